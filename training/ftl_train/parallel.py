"""FSDP (through the HF Trainer / accelerate) and SageMaker model parallelism v2.

FSDP: ``fsdp="full_shard auto_wrap"`` (any of the Trainer's options) turns on PyTorch
FSDP for a torchrun launch. The entrypoint always asks for a *sharded* checkpoint
(``SHARDED_STATE_DICT``: torch.distributed.checkpoint, one ``__<rank>_0.distcp`` file per
rank plus ``.metadata``), so every rank writes only its own file, names never collide
when SageMaker syncs the nodes' ``/opt/ml/checkpoints`` into one S3 prefix, and a restart
on other hosts (each gets the whole prefix back) reshards on load. Activation
checkpointing is FSDP's own (``fsdp_config.activation_checkpointing``), not the Trainer's
``gradient_checkpointing``, which would all-gather twice in the backward pass.

SMP v1 (``smdistributed.modelparallel``, issue 34): precision is SMP's own ``fp16``
parameter (``smp_v1_precision``), and tensor parallelism needs the model created inside
``smp.tensor_parallelism()`` (``smp_v1_model_creation``).

SMP v2 (``torch.sagemaker``): the SageMaker SDK passes the ``smp`` distribution's
parameters as ``mp_parameters``; the toolkit exports them as ``SM_HP_MP_PARAMETERS``.
SMP v1 (``smdistributed.modelparallel``, MPI launch) is told apart by its ``partitions``
key, which the HF Trainer requires to switch its own SMP v1 path on; that path is left
alone. For v2, ``torch.sagemaker.init(params)`` runs before the model is built and
``torch.sagemaker.transform(model)`` after (tensor parallelism, activation offloading);
sharding then comes from the Trainer's FSDP (``hybrid_shard`` when
``hybrid_shard_degree`` > 1). Without the library (an image other than the SageMaker
PyTorch/HF images with SMP v2) the job stops with a message instead of training
unsharded.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from . import compat
from .hparams import HyperparameterError, Hyperparameters, fsdp_options

logger = logging.getLogger("ftl_train")

SMP_V2_ONLY_KEYS = frozenset(
    {
        "hybrid_shard_degree",
        "sm_activation_offloading",
        "activation_loading_horizon",
        "expert_parallel_degree",
        "fsdp_cache_flush_warnings",
        "cpu_offload",
    }
)


def fsdp_training_args(
    fsdp: str | None,
    layer_cls: str | None,
    activation_checkpointing: bool,
    smp_v2: bool = False,
    cuda: bool = True,
) -> dict[str, Any]:
    """TrainingArguments fields for FSDP, or {} when ``fsdp`` is empty. FSDP2 where accelerate
    has it, except under SMP v2, which shards through FSDP1 (``compat.fsdp_version_config``)."""
    options = fsdp_options(fsdp)
    if not options:
        return {}
    config: dict[str, Any] = {
        "state_dict_type": "SHARDED_STATE_DICT",
        "activation_checkpointing": bool(activation_checkpointing),
        "cpu_ram_efficient_loading": False,
    }
    config.update(compat.fsdp_version_config(smp_v2, cuda))
    if layer_cls:
        names = [n.strip() for n in layer_cls.split(",") if n.strip()]
        config["transformer_layer_cls_to_wrap"] = names
    if "auto_wrap" not in options:
        options.append("auto_wrap")  # without a wrap policy FSDP shards one flat unit
    return {"fsdp": " ".join(options), "fsdp_config": config}


def check_fsdp_launch(args: Any) -> None:
    """FSDP needs a distributed launch: torchrun, and on a CPU more than one process (a
    capacity chain's next attempt may get fewer). The Trainer would stop with a bare
    ValueError; this names the hyperparameter and what the run got."""
    if not getattr(args, "fsdp", None):
        return
    from transformers.training_args import ParallelMode

    if args.parallel_mode != ParallelMode.DISTRIBUTED:
        raise HyperparameterError(
            f"hyperparameter fsdp needs a distributed launch (torchrun; on a CPU more than one "
            f"process); this run has {args.world_size} process(es) and parallel mode "
            f"{args.parallel_mode.value}"
        )


# ---------------------------------------------------------------- SMP v1


def smp_v1_parameters(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """SMP v1's parameters when the HF Trainer takes its SMP v1 path, else None: as
    transformers' ``is_sagemaker_mp_enabled`` reads it, ``partitions`` in
    ``SM_HP_MP_PARAMETERS`` and ``sagemaker_mpi_enabled`` in ``SM_FRAMEWORK_PARAMS``."""
    params = mp_parameters(environ)
    if "partitions" not in params:
        return None
    try:
        framework = json.loads(environ.get("SM_FRAMEWORK_PARAMS", "{}") or "{}")
    except json.JSONDecodeError:
        return None
    if not (isinstance(framework, dict) and framework.get("sagemaker_mpi_enabled")):
        return None
    return params


def smp_v1_precision(
    fp16: bool | None, bf16: bool | None, params: Mapping[str, Any], cuda: bool
) -> tuple[bool, bool]:
    """(bf16, fp16) under SMP v1, from the hyperparameters and the SMP parameters.

    transformers' Trainer (4.26, the SMP v1 image's) raises "SageMaker Model Parallelism
    does not support BF16 yet" for ``bf16``, and with SMP >= 1.10 replaces ``fp16`` with
    the SMP configuration's ``fp16`` (``smp.state.cfg.fp16``), which is where the SMP v1
    documentation sets it ("fp16": true in the ``smdistributed.modelparallel``
    parameters). So bf16 is never chosen, and a hyperparameter ``fp16`` that disagrees
    with ``mp_parameters`` is an error rather than a setting the Trainer drops."""
    smp_fp16 = bool(params.get("fp16", False))
    if bf16 or params.get("bf16"):
        raise HyperparameterError(
            "bf16: SageMaker model parallelism v1 does not train in bfloat16 with the Hugging "
            'Face Trainer; set "fp16": true in mp_parameters instead'
        )
    if fp16 is not None and bool(fp16) != smp_fp16:
        raise HyperparameterError(
            f"hyperparameter fp16={str(fp16).lower()} contradicts mp_parameters fp16="
            f"{str(smp_fp16).lower()}: under SageMaker model parallelism v1 the Trainer trains "
            "with the SMP configuration's fp16; set it in mp_parameters"
        )
    if smp_fp16 and not cuda:
        raise HyperparameterError(
            'mp_parameters "fp16": true needs a CUDA GPU (SageMaker model parallelism v1 '
            "trains in float16 there); this device has none"
        )
    return False, smp_fp16


def smp_v1_tensor_parallel_degree(environ: Mapping[str, str]) -> int:
    params = smp_v1_parameters(environ) or {}
    return int(params.get("tensor_parallel_degree", 1) or 1)


def smp_v1_model_creation(environ: Mapping[str, str]) -> Any:
    """The context the model is created in: ``smp.tensor_parallelism()`` when SMP v1 asks
    for a tensor-parallel degree above 1, else nothing. SMP v1 distributes only the
    modules created inside it or marked with ``smp.set_tensor_parallelism`` (the SMP v1
    tensor-parallelism guide); the Trainer's ``smp.DistributedModel`` then splits them."""
    degree = smp_v1_tensor_parallel_degree(environ)
    if degree <= 1:
        return contextlib.nullcontext()
    import smdistributed.modelparallel.torch as smp  # type: ignore[import-not-found]

    logger.info("SMP v1 tensor parallelism: degree %d, model created for it", degree)
    return smp.tensor_parallelism()


def check_tensor_parallel_heads(config: Any, degree: int) -> None:
    """SMP v1 splits attention by heads: the head count must divide by the degree."""
    if degree <= 1:
        return
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    if heads and int(heads) % degree:
        raise HyperparameterError(
            f"mp_parameters tensor_parallel_degree {degree} does not divide the model's "
            f"{heads} attention heads ({getattr(config, 'model_type', 'model')}); pick a "
            "degree that divides the head count or a model whose head count it divides"
        )


# ---------------------------------------------------------------- SMP v2


def mp_parameters(environ: Mapping[str, str]) -> dict[str, Any]:
    raw = environ.get("SM_HP_MP_PARAMETERS") or ""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise HyperparameterError(f"SM_HP_MP_PARAMETERS is not JSON: {raw[:200]!r}") from None
    if isinstance(value, str):  # JSON-encoded twice by some SDK paths
        value = json.loads(value)
    if not isinstance(value, dict):
        raise HyperparameterError("SM_HP_MP_PARAMETERS must be a JSON object")
    return value


def smp_v2_requested(environ: Mapping[str, str]) -> bool:
    """SMP v2 parameters under torchrun (not SMP v1's MPI launch with ``partitions``)."""
    params = mp_parameters(environ)
    if not params or "partitions" in params:
        return False
    if SMP_V2_ONLY_KEYS & params.keys():
        return True
    mpi = any(k in environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"))
    return not mpi and any(
        k in params for k in ("tensor_parallel_degree", "hybrid_shard_degree", "random_seed")
    )


def smp_v2_init(environ: Mapping[str, str]) -> Any:
    """``torch.sagemaker`` initialised with the job's parameters, or None when not asked for."""
    if not smp_v2_requested(environ):
        return None
    params = mp_parameters(environ)
    try:
        import torch.sagemaker as tsm  # type: ignore[import-not-found]
    except ImportError:
        raise HyperparameterError(
            "the job asks for SageMaker model parallelism v2 (SM_HP_MP_PARAMETERS="
            f"{json.dumps(params, sort_keys=True)}) but torch.sagemaker is not installed in this "
            "image; use a SageMaker PyTorch/Hugging Face training image with SMP v2 (PyTorch 2.x)"
        ) from None
    tsm.init(params)
    logger.info("SMP v2 initialised: %s", params)
    return tsm


def smp_v2_transform(tsm: Any, model: Any) -> Any:
    if tsm is None:
        return model
    return tsm.transform(model)


def smp_v2_fsdp_options(environ: Mapping[str, str], hp: Hyperparameters) -> str | None:
    """Hybrid sharding when the SMP v2 parameters ask for it and fsdp was not given."""
    params = mp_parameters(environ) if smp_v2_requested(environ) else {}
    if hp.fsdp:
        return hp.fsdp
    if params:
        degree = int(params.get("hybrid_shard_degree", 0) or 0)
        return "hybrid_shard auto_wrap" if degree > 1 else "full_shard auto_wrap"
    return None
