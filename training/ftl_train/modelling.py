"""The model (its class, weight dtype and attention kernel) and the Trainer around it."""

from __future__ import annotations

import logging
from typing import Any

from . import attention, compat, lora
from . import loss as fused_loss
from .callbacks import MetricLineCallback
from .defaults import Performance
from .hparams import HyperparameterError, Hyperparameters
from .kernels import KernelLines, Kernels
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
    kwargs = compat.dtype_kwargs(weight_dtype(hp, perf))
    kwargs.update(model_kwargs)
    kwargs.update(lora.quantization_kwargs(hp))
    attn = perf.attn_implementation
    if attn == attention.NAME:
        attention.register()
    try:
        model = auto.from_pretrained(model_path, **compat.attention_kwargs(attn), **kwargs)
    except (ValueError, ImportError) as exc:
        if attn == "eager":
            raise
        logger.warning(
            "attn_implementation=%s is not available for this model (%s); using eager", attn, exc
        )
        model = auto.from_pretrained(model_path, **compat.attention_kwargs("eager"), **kwargs)
    if hp.task in ("clm", "sft"):
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = model.config.eos_token_id
        # No KV cache while training: with one, transformers skips its packed-sequence mask
        # and packed examples would attend to each other. Switched back on before the final save.
        model.config.use_cache = False
    if perf.loss_kernel == "chunked" and not fused_loss.install(model, perf.loss_chunk_tokens):
        logger.warning("loss_kernel=chunked does not apply to this model; plain cross-entropy")
    return model


def kernels_of(model: Any, perf: Performance) -> Kernels:
    """The kernels this run uses, read from the loaded model and the resolved settings."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT
    config = getattr(base, "config", None)
    loss = perf.loss_kernel
    if loss == "chunked" and not hasattr(base, "_ftl_plain_forward"):
        loss = "plain"
    return Kernels(
        attention=str(getattr(config, "_attn_implementation", None) or "default"),
        loss=loss,
        norm_rope_swiglu="liger" if perf.liger_kernel else "plain",
        optimizer="adamw_bf16_states" if perf.optim_state_dtype == "bfloat16" else perf.optim,
        optimizer_states=perf.optim_state_dtype,
    )


def optimizer_override(args: Any, perf: Performance) -> tuple | None:
    """(class, kwargs) for the Trainer when the optimizer is one of ours, else None."""
    if perf.optim_state_dtype != "bfloat16":
        return None
    from .optim import AdamWBf16States

    kwargs = dict(
        lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon
    )
    return AdamWBf16States, kwargs


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
    kernels = kernels_of(model, perf)
    trainer_kwargs["callbacks"].insert(1, KernelLines(kernels))
    override = optimizer_override(args, perf)
    if override is not None:
        if not compat.trainer_takes_optimizer_cls():
            raise HyperparameterError(
                "hyperparameter optim_state_dtype=bfloat16 needs transformers >= 4.47 "
                "(Trainer(optimizer_cls_and_kwargs=...)); this image has an older one"
            )
        trainer_kwargs["optimizer_cls_and_kwargs"] = override

    trainer_kwargs.update(compat.trainer_tokenizer_kwargs(tokenizer))
    trainer = FtlTrainer(**trainer_kwargs)
    trainer.ftl_kernels = kernels
    # The printer echoes every log dict; the ftl_metric lines already carry them.
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    if task.label_names:
        trainer.label_names = task.label_names
    return trainer
