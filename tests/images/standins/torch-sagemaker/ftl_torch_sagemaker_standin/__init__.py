"""TEST-ONLY STAND-IN for SageMaker model parallelism v2 (``import torch.sagemaker``).

SMP v2 (pip name ``smdistributed-modelparallel``, v2.8.0 in the
``smdistributed-modelparallel:2.5.1-gpu-py311-cu124`` image) is closed and ships only in
SageMaker's SMP images. ``sitecustomize.py`` next to this folder makes ``import
torch.sagemaker`` load this module when the image matrix puts the folder on ``PYTHONPATH``
(images whose package-set file says they ship ``torch-sagemaker``).

What is implemented: the calls this platform's entrypoint makes
(``training/ftl_train/parallel.py``), which transformers 4.44.2 and accelerate 1.5.2 in that
image do not add to (neither imports ``torch.sagemaker``):

- ``init(config=None)``: the SMP v2 parameters as a dict, a JSON file path, or (None)
  ``SM_HP_MP_PARAMETERS``; integer degrees must be >= 1 (``hybrid_shard_degree`` >= 0 and at
  most the world size); keys outside the documented list are recorded, not refused;
  ``random_seed`` seeds torch. Ranks come from ``torch.distributed`` when it is initialised,
  else ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``.
- ``transform(model, device=None, dtype=None, delayed_param=False, config=None, ...)``:
  requires ``init`` first; with ``tensor_parallel_degree`` > 1 refuses a degree that does
  not divide the world size and a model family SMP v2's tensor parallelism does not support
  (``_check_tensor_parallel``, with its documentation); moves/casts the model when asked and
  returns the same model, unchanged otherwise. ``state.transformed`` records that it ran
  and on which class.
- ``state``: ``initialized``, ``config``, ``requested``, ``rank``, ``world_size``,
  ``local_rank``, ``tp_size``/``tp_rank`` (1/0), ``cp_size``, ``ep_size``,
  ``hybrid_shard_degree``, ``sm_activation_offloading``, ``activation_loading_horizon``,
  ``transformed``; ``is_initialized()``.

Every call is appended as one JSON line to ``$FTL_STANDIN_TRACE`` when set.

What it does NOT prove:

- tensor parallelism: no module is swapped for a tensor-parallel (Transformer Engine)
  implementation; ``tensor_parallel_degree`` is recorded, and the run is data parallel only;
  context and expert parallelism likewise;
- SMP's hybrid sharding device mesh, its FSDP patches, activation offloading
  (``sm_activation_offloading``, ``activation_loading_horizon``), delayed parameter
  initialisation, its distributed checkpointing, FP8/mixed-precision kernels;
- any GPU, NCCL, EFA or multi-host behaviour;
- any check of the real library beyond those above, or its API drift across releases.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

__version__ = "2.8.0"
STAND_IN = True

DOCUMENTED_KEYS = frozenset(
    {
        "hybrid_shard_degree",
        "sm_activation_offloading",
        "activation_loading_horizon",
        "fsdp_cache_flush_warnings",
        "allow_empty_shards",
        "tensor_parallel_degree",
        "context_parallel_degree",
        "expert_parallel_degree",
        "random_seed",
    }
)
_DEGREES = ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree")


def _trace(call: str, **details: Any) -> None:
    path = os.environ.get("FTL_STANDIN_TRACE")
    if not path:
        return
    record = {
        "lib": "torch.sagemaker",
        "call": call,
        "pid": os.getpid(),
        "time": time.time(),
        **details,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")


class _State:
    def __init__(self) -> None:
        self.initialized = False
        self.config: dict[str, Any] = {}
        self.requested: dict[str, Any] = {}
        self.rank = 0
        self.world_size = 1
        self.local_rank = 0
        self.tp_size = 1
        self.tp_rank = 0
        self.cp_size = 1
        self.ep_size = 1
        self.hybrid_shard_degree = 0
        self.sm_activation_offloading = False
        self.activation_loading_horizon = 2
        self.transformed: list[str] = []


state = _State()


def _ranks() -> tuple[int, int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank = int(os.environ.get("RANK", "0") or 0)
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    return rank, world, int(os.environ.get("LOCAL_RANK", "0") or 0)


def _load(config: Any) -> dict[str, Any]:
    if config is None:
        raw = os.environ.get("SM_HP_MP_PARAMETERS", "") or "{}"
        config = json.loads(raw)
        if isinstance(config, str):
            config = json.loads(config)
    elif isinstance(config, str):
        with open(config, encoding="utf-8") as f:
            config = json.load(f)
    if not isinstance(config, dict):
        raise ValueError("torch.sagemaker.init: the configuration must be a JSON object")
    return dict(config)


def init(config: Any = None) -> None:
    """``torch.sagemaker.init``: read and check the SMP v2 parameters."""
    params = _load(config)
    rank, world, local = _ranks()
    for key in _DEGREES:
        if key in params and int(params[key]) < 1:
            raise ValueError(f"torch.sagemaker.init: {key} must be >= 1, got {params[key]}")
    hsd = int(params.get("hybrid_shard_degree", 0) or 0)
    if hsd < 0 or hsd > world:
        raise ValueError(
            f"torch.sagemaker.init: hybrid_shard_degree must be between 0 and the world size "
            f"{world}, got {hsd}"
        )
    unknown = sorted(set(params) - DOCUMENTED_KEYS)
    if "random_seed" in params:
        import torch

        torch.manual_seed(int(params["random_seed"]))
    state.requested = dict(params)
    state.config = dict(params)
    state.rank, state.world_size, state.local_rank = rank, world, local
    state.hybrid_shard_degree = hsd
    state.sm_activation_offloading = bool(params.get("sm_activation_offloading", False))
    state.activation_loading_horizon = int(params.get("activation_loading_horizon", 2))
    state.initialized = True
    _trace("init", parameters=params, unknown_keys=unknown, rank=rank, world_size=world)


def is_initialized() -> bool:
    return state.initialized


# SageMaker Developer Guide, SMP v2 "Tensor parallelism", section "Hugging Face Transformer
# models compatible with the SMP tensor parallelism": GPT-NeoX, Llama 2, Llama 3, Mistral 7B,
# Mixtral 8x7B and 8x22B (transformers model types below).
TENSOR_PARALLEL_MODEL_TYPES = frozenset({"gpt_neox", "llama", "mistral", "mixtral"})


def _check_tensor_parallel(model: Any) -> None:
    """Same guide, "Configure tensor parallelism": the degree must divide the number of GPUs
    in the cluster (the world size); only the model families above have SMP's
    tensor-parallel implementation."""
    degree = int(state.config.get("tensor_parallel_degree", 1) or 1)
    if degree <= 1:
        return
    if state.world_size % degree:
        raise ValueError(
            f"torch.sagemaker.transform: tensor_parallel_degree {degree} does not divide the "
            f"world size {state.world_size}"
        )
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in TENSOR_PARALLEL_MODEL_TYPES:
        raise ValueError(
            f"torch.sagemaker.transform: tensor parallelism supports the model types "
            f"{', '.join(sorted(TENSOR_PARALLEL_MODEL_TYPES))}, not {model_type!r}"
        )
    _trace("tensor_parallel", degree=degree, model_type=model_type, world_size=state.world_size)


def transform(
    model: Any,
    device: Any = None,
    dtype: Any = None,
    delayed_param: Any = False,
    config: Any = None,
    load_state_dict_from_rank0: bool = False,
    **kwargs: Any,
) -> Any:
    """``torch.sagemaker.transform``: the same model (no tensor-parallel swap here), after the
    checks SMP v2 documents for tensor parallelism (``_check_tensor_parallel``)."""
    if not state.initialized:
        raise RuntimeError("torch.sagemaker.transform: call torch.sagemaker.init() first")
    _check_tensor_parallel(model)
    if dtype is not None:
        model = model.to(dtype=dtype)
    if device is not None:
        model = model.to(device)
    name = type(model).__name__
    state.transformed.append(name)
    _trace(
        "transform",
        model=name,
        device=device,
        dtype=dtype,
        delayed_param=bool(delayed_param),
        tensor_parallel_degree=state.config.get("tensor_parallel_degree", 1),
    )
    return model
