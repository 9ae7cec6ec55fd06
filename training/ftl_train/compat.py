"""Every difference between the library versions of the images the templates name, in one place.

The entrypoint runs in four package sets (``image_sets/*.json``): transformers 4.26 / torch
1.13.1 / Python 3.9, transformers 4.44.2 and 4.49 / torch 2.5.1 / Python 3.11, transformers
5.3 / torch 2.9 / Python 3.12, and the project's own newer pins. The rest of ``ftl_train``
is written for the newest API and calls the helpers here wherever an older release spells
something differently or lacks it. Each helper detects the feature itself (an attribute,
a signature parameter, a dataclass field), not a version string, and its docstring names
the versions on each side. ``tests/training/test_train_compat.py`` runs both branches of
each one.

Imports of torch and transformers stay inside the functions, so that modules which need
neither (hyperparameters, checkpoints, inputs) can use this one cheaply.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import tarfile
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

logger = logging.getLogger("ftl_train")

F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------- Python


def safe_extract(tar: tarfile.TarFile, dest: str) -> None:
    """Unpack ``tar`` into ``dest`` refusing links and paths that leave it.

    Python 3.12, and the security releases 3.9.17 / 3.10.12 / 3.11.4, have extraction
    filters (``extractall(filter="data")``); an older 3.9 (the transformers 4.26 image's
    interpreter may be one) does not, so the same rule is applied by hand there.
    """
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = os.path.realpath(dest)
    for member in tar.getmembers():
        target = os.path.realpath(os.path.join(dest, member.name))
        if (
            not (target == root or target.startswith(root + os.sep))
            or member.issym()
            or member.islnk()
            or member.isdev()
        ):
            raise ValueError(f"refusing to extract {member.name!r} from the model archive")
    tar.extractall(dest)


# ---------------------------------------------------------------------------- torch


def compiler_disable(fn: F) -> F:
    """``torch.compiler.disable(fn)``: keep ``fn`` out of torch.compile graphs.

    ``torch.compiler`` exists from torch 2.1; torch 1.13 (the transformers 4.26 image) has
    no compiler at all, so there is nothing to keep ``fn`` out of and it is returned as is.
    """
    import torch

    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return fn if disable is None else disable(fn)


def autocast_dtype(device_type: str) -> Any:
    """The dtype autocast computes in on ``device_type``, or None when autocast is off there.

    torch >= 2.4: ``torch.is_autocast_enabled(device_type)`` and
    ``torch.get_autocast_dtype(device_type)``. Older torch (1.13, 2.0-2.3) has per-device
    functions: ``is_autocast_enabled()`` / ``get_autocast_gpu_dtype()`` for CUDA and
    ``is_autocast_cpu_enabled()`` / ``get_autocast_cpu_dtype()`` for the CPU.
    """
    import torch

    if hasattr(torch, "get_autocast_dtype"):
        if not torch.is_autocast_enabled(device_type):
            return None
        return torch.get_autocast_dtype(device_type)
    if device_type == "cpu":
        on, get = torch.is_autocast_cpu_enabled, torch.get_autocast_cpu_dtype
    else:
        on, get = torch.is_autocast_enabled, torch.get_autocast_gpu_dtype
    return get() if on() else None


def varlen_takes_gqa(kernel: Any) -> bool:
    """``torch.nn.attention.varlen.varlen_attn`` takes ``enable_gqa`` (torch 2.13); torch
    2.10-2.11 have the kernel without it, so grouped key/value heads must be repeated to the
    query's head count before the call (measured on an H100 with torch 2.11: the keyword
    raised TypeError in every LoRA step)."""
    import inspect

    try:
        return "enable_gqa" in inspect.signature(kernel).parameters
    except (TypeError, ValueError):  # a builtin without a signature: assume the newer one
        return True


def fused_adamw_available() -> bool:
    """The Trainer can run PyTorch's fused AdamW (``optim=adamw_torch_fused``).

    Needs ``torch.optim.AdamW(fused=...)`` (torch >= 2.0) and the Trainer's
    ``adamw_torch_fused`` choice (transformers >= 4.28); torch 1.13 / transformers 4.26
    lack both.
    """
    try:
        import torch
        from transformers.training_args import OptimizerNames
    except ImportError:
        return False
    known = {o.value for o in OptimizerNames}
    return (
        "adamw_torch_fused" in known
        and "fused" in inspect.signature(torch.optim.AdamW.__init__).parameters
    )


# ---------------------------------------------------------------------------- transformers: models


@functools.cache
def _dtype_keyword() -> str:
    from transformers import PretrainedConfig

    return "dtype" if "dtype" in PretrainedConfig().to_dict() else "torch_dtype"


def dtype_kwargs(dtype: Any) -> dict[str, Any]:
    """``from_pretrained``'s weight-dtype keyword: ``{"dtype": dtype}`` or ``{"torch_dtype": ...}``.

    transformers >= 4.56 (5.x included) spells it ``dtype`` (``torch_dtype`` deprecated),
    and its configs store ``dtype``; 4.55 and older (4.26, 4.44, 4.49) take only
    ``torch_dtype`` and hand an unknown ``dtype`` to the model's ``__init__``, which
    raises a TypeError. Told apart by the config's own key.
    """
    return {_dtype_keyword(): dtype}


@functools.cache
def _selectable_attention() -> bool:
    from transformers import PretrainedConfig

    return hasattr(PretrainedConfig(), "_attn_implementation")


def attention_kwargs(attn: str) -> dict[str, Any]:
    """``from_pretrained(attn_implementation=attn)`` where the attention is selectable.

    transformers >= 4.36 chooses the attention kernel per model (``eager``, ``sdpa``,
    ``flash_attention_2``, registered ones) and keeps it in ``config._attn_implementation``.
    4.26 has no choice (each model has its one attention, the eager kind) and hands the
    unknown keyword to the model's ``__init__``, a TypeError: there it is left out.
    """
    if _selectable_attention():
        return {"attn_implementation": attn}
    if attn not in ("eager", "sdpa"):
        logger.warning(
            "attn_implementation=%s: this transformers has no attention choice; "
            "the model's own attention is used",
            attn,
        )
    return {}


# ---------------------------------------------------------------------------- transformers: Trainer


def _trainer_init_parameters() -> Mapping[str, Any]:
    from transformers import Trainer

    return inspect.signature(Trainer.__init__).parameters


def trainer_tokenizer_kwargs(tokenizer: Any) -> dict[str, Any]:
    """The Trainer's tokenizer argument: ``processing_class`` (transformers >= 4.46; 5.x has
    only that) or ``tokenizer`` (older)."""
    if "processing_class" in _trainer_init_parameters():
        return {"processing_class": tokenizer}
    return {"tokenizer": tokenizer}


def trainer_takes_optimizer_cls() -> bool:
    """``Trainer(optimizer_cls_and_kwargs=...)`` exists (transformers >= 4.47)."""
    return "optimizer_cls_and_kwargs" in _trainer_init_parameters()


def trainer_tokenizer(trainer: Any) -> Any:
    """The Trainer's tokenizer: ``trainer.processing_class`` (>= 4.46), ``trainer.tokenizer``
    before."""
    if hasattr(trainer, "processing_class"):
        return trainer.processing_class
    return getattr(trainer, "tokenizer", None)


def trainer_accelerator(trainer: Any) -> Any:
    """The Trainer's accelerate ``Accelerator`` (transformers >= 4.30), or None: 4.26's
    Trainer wraps the model and shards the data itself."""
    return getattr(trainer, "accelerator", None)


def trainer_fsdp_enabled(trainer: Any) -> bool:
    """The Trainer runs PyTorch FSDP: ``trainer.is_fsdp_enabled`` (transformers >= 4.30,
    set by accelerate), else its own ``fsdp`` list (4.26, no FSDP template runs there)."""
    if hasattr(trainer, "is_fsdp_enabled"):
        return bool(trainer.is_fsdp_enabled)
    return bool(getattr(trainer, "fsdp", None))


def unwrap_model(trainer: Any) -> Any:
    """The bare model under the Trainer's DDP/FSDP wrappers: ``accelerator.unwrap_model``
    (transformers >= 4.30); 4.26 has no accelerator, and its wrappers (DDP, SMP v1's
    ``DistributedModel``) keep the model in ``.module``, as its ``unwrap_model`` reads it."""
    accelerator = trainer_accelerator(trainer)
    if accelerator is not None:
        return accelerator.unwrap_model(trainer.model)
    model = trainer.model
    while hasattr(model, "module"):
        model = model.module
    return model


def barrier(trainer: Any) -> None:
    """Wait for every process of the job.

    transformers >= 4.30: the Trainer's accelerator. 4.26 has none: SMP v1
    (``smdistributed.modelparallel``) has its own barrier, else ``torch.distributed``'s.
    """
    accelerator = trainer_accelerator(trainer)
    if accelerator is not None:
        accelerator.wait_for_everyone()
        return
    if trainer.args.world_size <= 1:
        return
    from transformers.utils import is_sagemaker_mp_enabled

    if is_sagemaker_mp_enabled():
        import smdistributed.modelparallel.torch as smp  # type: ignore[import-not-found]

        smp.barrier()
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


# ---------------------------------------------------------------------------- FSDP


def fsdp_version_config(smp_v2: bool, cuda: bool) -> dict[str, Any]:
    """``fsdp_config`` entries that pick the FSDP implementation for this accelerate.

    * FSDP2 (``fully_shard``) where accelerate has it (>= 1.6,
      ``FullyShardedDataParallelPlugin.fsdp_version``): ``{"version": 2}``. transformers 5.3
      (the LLM image, accelerate 1.13) still defaults to FSDP1, which later releases
      deprecate (transformers 5.20 removed it; its default is FSDP2): asking for 2 gives
      every image the FSDP the tests run. Not under SMP v2, whose ``torch.sagemaker`` shards
      through FSDP1.
    * FSDP1 otherwise (accelerate 1.4 in the transformers 4.49 image, 1.5 in the SMP v2
      image, or SMP v2): transformers turns ``sync_module_states`` on, and accelerate's
      FSDP1 plugin then wants an accelerator and stops a CPU (gloo) run. On a CPU it is
      off: every process loads the same weights from the same files with the same seed.
    """
    try:
        from accelerate.utils import FullyShardedDataParallelPlugin
    except ImportError:
        return {}
    fields = {f.name for f in dataclasses.fields(FullyShardedDataParallelPlugin)}
    if "fsdp_version" in fields and not smp_v2:
        return {"version": 2}
    return {} if cuda else {"sync_module_states": False}


def fsdp_plugin(args: Any) -> Any:
    """accelerate's ``FullyShardedDataParallelPlugin`` for these ``TrainingArguments``, as
    the Trainer builds it where accelerate turns FSDP on by itself (GPUs).

    transformers >= 4.5x hands the plugin its settings as ``args.fsdp_plugin_args``
    (5.3 has it). Older ones (4.44 in the SMP v2 image, 4.49) write them to ``FSDP_*``
    environment variables (``fsdp_environment``), which the plugin reads when built without
    arguments; the Trainer then copies ``limit_all_gathers`` and ``activation_checkpointing``
    from ``fsdp_config`` onto it.
    """
    from accelerate.utils import FullyShardedDataParallelPlugin

    plugin_args = getattr(args, "fsdp_plugin_args", None)
    if plugin_args is not None:
        return FullyShardedDataParallelPlugin(**plugin_args)
    plugin = FullyShardedDataParallelPlugin()
    config = getattr(args, "fsdp_config", None) or {}
    for key in ("limit_all_gathers", "activation_checkpointing"):
        if key in config:
            setattr(plugin, key, config[key])
    return plugin


def fsdp_environment(args: Any, environ: Any = None) -> dict[str, str]:
    """The ``FSDP_*`` variables that older transformers leave out; returns those it set.

    transformers without ``TrainingArguments.fsdp_plugin_args`` (4.44, 4.49) passes FSDP
    settings to accelerate through the environment but not ``fsdp_config``'s
    ``state_dict_type``, so accelerate's default (full state dicts gathered on one process)
    would replace the sharded checkpoints (``SHARDED_STATE_DICT``) the entrypoint asks for,
    the ones that resume on another number of processes. Newer releases hand it over
    themselves: nothing is set.
    """
    environ = os.environ if environ is None else environ
    config = getattr(args, "fsdp_config", None) or {}
    if not getattr(args, "fsdp", None) or hasattr(args, "fsdp_plugin_args"):
        return {}
    out = {}
    if config.get("state_dict_type"):
        out["FSDP_STATE_DICT_TYPE"] = str(config["state_dict_type"])
    environ.update(out)
    return out


# ---------------------------------------------------------------------------- TrainingArguments


def training_fields() -> set[str]:
    """The fields this transformers' ``TrainingArguments`` has."""
    from transformers import TrainingArguments

    return {f.name for f in dataclasses.fields(TrainingArguments)}


# newest name -> the name older releases use for the same setting
_RENAMED_FIELDS = {
    # transformers 4.41 renamed evaluation_strategy (4.26, gone in 5.x)
    "eval_strategy": "evaluation_strategy",
    # transformers 5 renamed gradient_checkpointing (4.x has only that one)
    "activation_checkpointing": "gradient_checkpointing",
    "activation_checkpointing_kwargs": "gradient_checkpointing_kwargs",
    # transformers 4.34 renamed no_cuda
    "use_cpu": "no_cuda",
    # transformers 4.27 replaced xpu_backend (the CPU process group's backend) by ddp_backend
    "ddp_backend": "xpu_backend",
}


# Fields some supported release lacks, and what leaving them out means there (issue 34: any
# other missing field stops the run, so a setting cannot quietly disappear on a new image).
VERSION_DEPENDENT_FIELDS = {
    "save_safetensors": "gone in 5 (always safetensors); 4.26 writes pytorch_model.bin",
    "logging_dir": "gone in 5, which reads TENSORBOARD_LOGGING_DIR (set as well)",
    "fsdp_config": "missing in 4.26, where no FSDP template runs",
    "activation_checkpointing_kwargs": "missing in 4.26: reentrant checkpointing",
}


class CompatError(RuntimeError):
    """A setting this transformers lacks that compat does not know as version-dependent."""


def training_arguments_kwargs(kw: Mapping[str, Any], fields: set[str]) -> dict[str, Any]:
    """``TrainingArguments`` keywords, written with the newest names, for this release.

    * a renamed field gets the old name where only that exists (``_RENAMED_FIELDS``:
      ``eval_strategy`` < 4.41 ``evaluation_strategy``; ``activation_checkpointing[_kwargs]``
      < 5.0 ``gradient_checkpointing[_kwargs]``; ``use_cpu`` < 4.34 ``no_cuda``;
      ``ddp_backend`` < 4.27 ``xpu_backend``, which only a CPU run reads);
    * ``warmup_ratio``: transformers 5 dropped it, and its ``warmup_steps`` takes a float
      below 1 as a ratio;
    * a field in ``VERSION_DEPENDENT_FIELDS`` that this release lacks is left out, logged;
    * any other missing field raises ``CompatError`` naming it (issue 34): the image matrix
      runs every image the catalog names, so a new image that drops a setting fails there.
    """
    out: dict[str, Any] = {}
    for key, value in kw.items():
        name = key
        if name not in fields and _RENAMED_FIELDS.get(name) in fields:
            name = _RENAMED_FIELDS[name]
        if name == "warmup_ratio" and name not in fields and "warmup_steps" in fields:
            name = "warmup_steps"
        if name not in fields:
            if key not in VERSION_DEPENDENT_FIELDS:
                import transformers

                raise CompatError(
                    f"TrainingArguments.{key}: transformers {transformers.__version__} has no "
                    "such field (nor an older name for it) and ftl_train/compat.py does not "
                    "list it in VERSION_DEPENDENT_FIELDS; decide there how this release "
                    "spells the setting or why leaving it out is right"
                )
            logger.info("this transformers version has no TrainingArguments.%s; left out", key)
            continue
        out[name] = value
    return out
