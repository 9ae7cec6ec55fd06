"""The model (its class, weight dtype and attention kernel) and the Trainer around it."""

from __future__ import annotations

import inspect
import logging
from typing import Any

from . import lora
from .callbacks import MetricLineCallback
from .defaults import Performance
from .hparams import Hyperparameters
from .preprocess import TaskData
from .tasks import model_auto_class

logger = logging.getLogger("ftl_train")


def weight_dtype(hp: Hyperparameters, perf: Performance) -> Any:
    """float32 weights for full fine-tuning (bf16/fp16 autocast computes, the optimizer updates
    fp32 master weights); the frozen base of LoRA in the 16-bit compute dtype. Explicit because
    transformers 5 would otherwise keep a checkpoint's own dtype (usually bf16) for training."""
    import torch

    if hp.peft == "none":
        return torch.float32
    return torch.bfloat16 if perf.bf16 else torch.float16 if perf.fp16 else torch.float32


def load_model(hp: Hyperparameters, model_path: str, perf: Performance, model_kwargs: dict) -> Any:
    auto = model_auto_class(hp.task)
    kwargs = dict(model_kwargs)
    kwargs.update(lora.quantization_kwargs(hp))
    kwargs.setdefault("dtype", weight_dtype(hp, perf))
    attn = perf.attn_implementation
    try:
        model = auto.from_pretrained(model_path, attn_implementation=attn, **kwargs)
    except (ValueError, ImportError) as exc:
        if attn == "eager":
            raise
        logger.warning(
            "attn_implementation=%s is not available for this model (%s); using eager", attn, exc
        )
        model = auto.from_pretrained(model_path, attn_implementation="eager", **kwargs)
    if hp.task in ("clm", "sft"):
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = model.config.eos_token_id
        # No KV cache while training: with one, transformers skips its packed-sequence mask
        # and packed examples would attend to each other. Switched back on before the final save.
        model.config.use_cache = False
    return model


def make_trainer(
    model: Any,
    args: Any,
    task: TaskData,
    tokenizer: Any,
    perf: Performance,
    callbacks: list,
    flops_per_token: float,
) -> Any:
    lengths = None
    if (
        perf.group_by_length
        and task.lengths_column
        and task.lengths_column in task.train.column_names
    ):
        lengths = list(task.train[task.lengths_column])

    from .trainer import FtlTrainer

    trainer_kwargs: dict[str, Any] = dict(
        model=model,
        args=args,
        data_collator=task.collator,
        train_dataset=task.train,
        eval_dataset=task.eval,
        compute_metrics=task.compute_metrics,
        callbacks=[MetricLineCallback(), *callbacks],
        ftl_lengths=lengths,
        ftl_is_lm=task.is_lm,
        ftl_flops_per_token=flops_per_token,
    )
    from transformers import Trainer

    if "processing_class" in inspect.signature(Trainer.__init__).parameters:
        trainer_kwargs["processing_class"] = tokenizer
    else:  # transformers < 4.46
        trainer_kwargs["tokenizer"] = tokenizer
    trainer = FtlTrainer(**trainer_kwargs)
    # The printer echoes every log dict; the ftl_metric lines already carry them.
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    if task.label_names:
        trainer.label_names = task.label_names
    return trainer
