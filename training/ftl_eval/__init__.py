"""The evaluation entrypoint (issue 36): a Completed job's model, measured after training.

* ``arguments.py``: the job's hyperparameters split into the evaluation's own
  (``ftl_eval_*``) and the training job's (for the task's data preparation).
* ``artifact.py``: what the archive holds (full model, LoRA adapter, merged model), checked
  against what the platform says, and where the model, adapter and base model are.
* ``task_metrics.py``: the template's task metrics on the held-out channel, computed by the
  training entrypoint's own data preparation and metrics (``ftl_train``).
* ``harness.py``: lm-evaluation-harness tasks from local task files and the team's golden
  sets, for causal LMs (``requirements-eval.txt``, installed only when needed).
* ``main.py``: the run: metrics as ``ftl_metric`` lines and ``evaluation.json``.
"""
