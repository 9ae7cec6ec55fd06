"""Evaluation after training (issue 36): what a team adds to a template's evaluation policy,
the arguments the evaluation entrypoint reads, and the gate on the registered version.

Holds: ``additions`` (a team's additions in ``ftl:evaluation``, and the policy a team's job
gets), ``arguments`` (the evaluation job's channels and hyperparameters, which
``training/evaluate.py`` reads), ``gate`` (metrics, policy and baseline -> verdict),
``results`` (an evaluation job's end read: its ``evaluation.json``, the outcome, the evaluated
job's ``evaluation``), ``version`` (the registered version after its evaluation: metadata
within its limits, the update, the baseline, the metrics JSON) and ``tracking`` (the
evaluation job's MLflow variables: the evaluated job's run). The policy itself is a template
key: ``templates.evaluation_policy``.

``launch`` (the evaluation job's name and request, from the evaluated job's own request, with
the renderer's metric definitions).

May import (within jobmodel): contract, templates, after_training, jobs, _rules, instances, render.
"""
