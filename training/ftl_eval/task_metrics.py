"""The template's task metrics on the held-out channel, as training measures them.

The held-out data goes through the training entrypoint's own preparation for the job's
``task`` (``ftl_train.tasks.PREPARE``, with the training job's hyperparameters: lengths,
columns, label mapping) and the model through the Trainer's evaluation loop, so the numbers
are the ones ``ftl_train`` reports: SQuAD exact match and F1 by the official script's rules
(``ftl_train.metrics.squad_metrics``), classification accuracy and macro F1, and the LM loss
with its perplexity (``exp`` of the mean token loss).
"""

from __future__ import annotations

import logging
import math
import tempfile
from typing import Any

from ftl_train.data import DataError, load_split
from ftl_train.hparams import HyperparameterError, Hyperparameters
from ftl_train.inputs import EVAL_SPLITS
from ftl_train.preprocess import cache_dir, limit_raw
from ftl_train.tasks import PREPARE, model_auto_class

from .artifact import ModelFiles

logger = logging.getLogger("ftl_eval")

TASKS = ("qa", "classification", "mlm", "clm")
# The Trainer's timing keys are not metrics of the model.
_TIMING = ("_runtime", "_per_second", "epoch")


def load_model(task: str, files: ModelFiles) -> Any:
    """The model to evaluate: the archive's, or the base model with the adapter applied."""
    auto = model_auto_class(task)
    model = auto.from_pretrained(files.model)
    if files.kind == "lora-adapter" and files.adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, files.adapter)
    model.eval()
    return model


def task_metrics(hp: Hyperparameters, files: ModelFiles, data_path: str) -> dict[str, float]:
    """``eval_*`` metrics of the model on the held-out data at ``data_path``."""
    if hp.task not in TASKS:
        raise HyperparameterError(
            f"task {hp.task} has no task metrics here (tasks with them: {', '.join(TASKS)})"
        )
    import transformers
    from transformers import AutoConfig, AutoTokenizer, Trainer, TrainingArguments

    from ftl_train import compat

    transformers.set_seed(hp.seed)  # the MLM collator masks at random
    tokenizer = AutoTokenizer.from_pretrained(files.tokenizer)
    config = AutoConfig.from_pretrained(files.model)
    held_out = load_split(data_path, EVAL_SPLITS, cache_dir=cache_dir())
    held_out = limit_raw(held_out, hp.max_eval_samples)
    if held_out is None or len(held_out) == 0:
        raise DataError(f"the held-out channel {data_path} holds no examples")
    data = PREPARE[hp.task](hp, tokenizer, config, None, held_out, None)
    if data.eval is None or len(data.eval) == 0:
        raise DataError("the held-out data produced no examples for the model")
    model = load_model(hp.task, files)
    with tempfile.TemporaryDirectory(prefix="ftl-eval-") as out:
        args = TrainingArguments(
            output_dir=out,
            per_device_eval_batch_size=hp.per_device_eval_batch_size,
            report_to="none",
            label_names=data.label_names,
        )
        trainer = Trainer(
            model=model,
            args=args,
            eval_dataset=data.eval,
            data_collator=data.collator,
            compute_metrics=data.compute_metrics,
            **compat.trainer_tokenizer_kwargs(tokenizer),
        )
        raw = trainer.evaluate()
    out_metrics = {
        str(k): float(v)
        for k, v in raw.items()
        if str(k).startswith("eval_")
        and not any(t in str(k) for t in _TIMING)
        and isinstance(v, (int, float))
        and not isinstance(v, bool)
    }
    if data.is_lm and "eval_loss" in out_metrics:
        loss = out_metrics["eval_loss"]
        out_metrics["eval_perplexity"] = math.exp(loss) if loss < 700 else float("inf")
    logger.info("task metrics on %d held-out examples: %s", len(held_out), out_metrics)
    return out_metrics
