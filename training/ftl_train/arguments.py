"""The Trainer's ``TrainingArguments``: hyperparameters and resolved performance settings,
written with the newest field names (``compat.training_arguments_kwargs`` renames or drops
them for the transformers version the image has)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from . import compat, parallel
from .defaults import Performance
from .env import SageMakerEnv, select_backend, smddp_requested, trainer_ddp_backend
from .hparams import HyperparameterError, Hyperparameters
from .preprocess import DEFAULT_BEST_METRIC

logger = logging.getLogger("ftl_train")


def _report_to(sm: SageMakerEnv) -> str:
    """TensorBoard when the template asked for its output folder and the package is there."""
    if not sm.tensorboard_dir:
        return "none"
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return "none"
    os.environ.setdefault("TENSORBOARD_LOGGING_DIR", sm.tensorboard_dir)
    return "tensorboard"


def _evaluation(hp: Hyperparameters, has_eval: bool) -> dict[str, Any]:
    """When to evaluate, and whether (and by which metric) to reload the best checkpoint."""
    # Not given: evaluate at every checkpoint, so the best-model reload (on by default with
    # validation data) has an evaluation for each checkpoint whatever the template's
    # save_steps (a fixed default of 500 refused every template saving every 200 steps).
    eval_steps = hp.save_steps if hp.eval_steps is None else hp.eval_steps
    eval_steps = eval_steps if has_eval else 0
    step_eval = bool(has_eval and eval_steps > 0)
    load_best = hp.load_best_model_at_end
    if load_best is None:
        load_best = step_eval
    if load_best and not step_eval:
        raise HyperparameterError("load_best_model_at_end needs validation data and eval_steps > 0")
    if load_best and hp.save_steps % eval_steps != 0:
        raise HyperparameterError(
            f"load_best_model_at_end needs save_steps ({hp.save_steps}) "
            f"to be a multiple of eval_steps ({eval_steps})"
        )
    metric = hp.metric_for_best_model or DEFAULT_BEST_METRIC[hp.task]
    bare = metric[len("eval_") :] if metric.startswith("eval_") else metric
    greater = not (bare.endswith("loss") or bare.endswith("perplexity"))
    kw: dict[str, Any] = dict(
        do_eval=has_eval,
        load_best_model_at_end=load_best,
        metric_for_best_model=metric if load_best else None,
        greater_is_better=greater if load_best else None,
        eval_strategy="steps" if step_eval else "no",
    )
    if step_eval:
        kw["eval_steps"] = eval_steps
    return kw


def _sharding_and_checkpointing(
    hp: Hyperparameters, perf: Performance, environ: Mapping[str, str]
) -> dict[str, Any]:
    """FSDP fields (with FSDP's own activation checkpointing) or the Trainer's checkpointing."""
    kw: dict[str, Any] = {}
    fsdp = parallel.fsdp_training_args(
        parallel.smp_v2_fsdp_options(environ, hp),
        hp.fsdp_transformer_layer_cls_to_wrap,
        perf.gradient_checkpointing,
        smp_v2=parallel.smp_v2_requested(environ),
        cuda=perf.cuda,
    )
    kw.update(fsdp)
    # Under FSDP the checkpointing is FSDP's own (fsdp_config); the Trainer's would
    # all-gather twice.
    kw["activation_checkpointing"] = bool(perf.gradient_checkpointing and not fsdp)
    if perf.gradient_checkpointing and not fsdp:
        kw["activation_checkpointing_kwargs"] = {"use_reentrant": False}
    return kw


MPI_LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_RANK")


def ddp_backend(perf: Performance, environ: Mapping[str, str]) -> str | None:
    """``TrainingArguments.ddp_backend``: the launch's backend; on a CPU started by a launcher
    (mpirun's or torchrun's rank variables set), gloo even for one process, since transformers
    4.26 then sets up a CPU process group and refuses to without a named backend. smddp is the
    Trainer's own choice (``trainer_ddp_backend``)."""
    backend = trainer_ddp_backend(select_backend(environ, cuda=perf.cuda))
    launched = any(environ.get(k) for k in MPI_LOCAL_RANK_VARS)
    if backend is None and not perf.cuda and launched and not smddp_requested(environ):
        return "gloo"
    return backend


def _optional(
    hp: Hyperparameters,
    perf: Performance,
    sm: SageMakerEnv,
    report_to: str,
    environ: Mapping[str, str],
) -> dict[str, Any]:
    """Fields set only in some runs, and the CPU flag."""
    kw: dict[str, Any] = {"warmup_ratio": hp.warmup_ratio}
    if report_to == "tensorboard":
        kw["logging_dir"] = sm.tensorboard_dir
    if not perf.cuda and smddp_requested(environ):
        # smddp on a CPU (the test stand-in; the real library needs GPUs): the Trainer wraps
        # the model for smddp's process group, which accelerate sets up only when use_cpu is
        # off, so the CPU is named to accelerate instead.
        os.environ.setdefault("ACCELERATE_TORCH_DEVICE", "cpu")
    elif not perf.cuda:
        # Said outright: bf16 autocast on a CPU wants it, and so does a multi-process CPU run
        # (gloo), which accelerate otherwise sets up as a single process.
        kw["use_cpu"] = True
    if perf.liger_kernel:
        kw["use_liger_kernel"] = True  # the Trainer patches the model with liger-kernel
    kw["save_safetensors"] = True
    return kw


def build_training_arguments(
    hp: Hyperparameters,
    perf: Performance,
    sm: SageMakerEnv,
    checkpoint_dir: str,
    has_eval: bool,
    environ: Mapping[str, str] | None = None,
) -> Any:
    from transformers import TrainingArguments

    evaluation = _evaluation(hp, has_eval)
    report_to = _report_to(sm)
    kw: dict[str, Any] = dict(
        output_dir=checkpoint_dir,
        do_train=True,
        learning_rate=hp.learning_rate,
        num_train_epochs=hp.num_train_epochs,
        max_steps=hp.max_steps,
        per_device_train_batch_size=hp.per_device_train_batch_size,
        per_device_eval_batch_size=hp.per_device_eval_batch_size,
        gradient_accumulation_steps=hp.gradient_accumulation_steps,
        weight_decay=hp.weight_decay,
        max_grad_norm=hp.max_grad_norm,
        lr_scheduler_type=hp.lr_scheduler_type,
        seed=hp.seed,
        bf16=perf.bf16,
        fp16=perf.fp16,
        tf32=perf.tf32,
        optim=perf.optim,
        torch_compile=perf.torch_compile,
        dataloader_num_workers=perf.dataloader_num_workers,
        dataloader_pin_memory=perf.dataloader_pin_memory,
        logging_strategy="steps",
        logging_steps=hp.logging_steps,
        save_strategy="steps",
        save_steps=hp.save_steps,
        save_total_limit=hp.save_total_limit,
        save_on_each_node=False,  # one process writes each file; other nodes only their RNG states
        report_to=report_to,
        disable_tqdm=True,  # progress bars flood CloudWatch; metrics are printed as lines
        log_level="info",
        log_level_replica="warning",
        ddp_backend=ddp_backend(perf, environ or os.environ),
        ignore_data_skip=False,
        remove_unused_columns=True,
        **evaluation,
    )
    kw.update(_optional(hp, perf, sm, report_to, environ or os.environ))
    kw.update(_sharding_and_checkpointing(hp, perf, environ or os.environ))
    args = TrainingArguments(**compat.training_arguments_kwargs(kw, compat.training_fields()))
    compat.fsdp_environment(args)
    return args
