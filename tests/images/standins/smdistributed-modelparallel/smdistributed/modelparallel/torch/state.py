"""Library state, configuration and ranks of the SMP v1 stand-in (one process)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from .exceptions import SMPUnsupportedError, SMPValidationError

# Defaults of the SMP v1 parameters the library, transformers or this platform read.
DEFAULTS: dict[str, Any] = {
    "pipeline_parallel_degree": 1,
    "microbatches": 1,
    "pipeline": "interleaved",
    "placement_strategy": "cluster",
    "optimize": "speed",
    "auto_partition": True,
    "default_partition": 0,
    "ddp": False,
    "tensor_parallel_degree": 1,
    "fp16": False,
    "bf16": False,
    "fp16_params": False,
    "prescaled_batch": False,
    "shard_optimizer_state": False,
    "sharded_data_parallel_degree": 1,
    "offload_activations": False,
    "activation_loading_horizon": 4,
    "delayed_parameter_initialization": False,
    "skip_tracing": False,
    "horovod": False,
}


def trace(call: str, **details: Any) -> None:
    """One JSON line per call in ``$FTL_STANDIN_TRACE`` (no-op when unset)."""
    path = os.environ.get("FTL_STANDIN_TRACE")
    if not path:
        return
    record = {
        "lib": "smdistributed.modelparallel",
        "call": call,
        "pid": os.getpid(),
        "time": time.time(),
        **details,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")


class Config:
    """``smp.state.cfg``: every parameter as an attribute (requested values kept as given)."""

    def __init__(self, params: dict[str, Any]) -> None:
        values = dict(DEFAULTS)
        values.update(params)
        if "partitions" in params:  # SMP's older name for the pipeline degree
            values["pipeline_parallel_degree"] = params["partitions"]
        values["partitions"] = values["pipeline_parallel_degree"]
        self.requested = dict(params)
        for key, value in values.items():
            setattr(self, key, value)
        micro = int(self.microbatches)
        if micro < 1:
            raise SMPValidationError(f"microbatches must be >= 1, got {micro}")
        self.microbatches = micro

    def __repr__(self) -> str:
        return f"Config({self.requested!r})"


class ModuleManager:
    """``smp.state.module_manager``: no translation functions (no module is replaced)."""

    def __init__(self) -> None:
        self.translate_functions: list[Any] = []


class State:
    def __init__(self) -> None:
        self.initialized = False
        self.cfg: Config | None = None
        self.model: Any = None
        self.optimizer: Any = None
        self.module_manager = ModuleManager()
        self.in_step = False
        self.microbatch = 0
        self.num_microbatches = 1
        self.step_count = 0

    @property
    def microbatches(self) -> int:
        return self.cfg.microbatches if self.cfg else 1


state = State()


def _parameters(config: Any) -> dict[str, Any]:
    if config is None:
        raw = os.environ.get("SM_HP_MP_PARAMETERS", "") or "{}"
        config = json.loads(raw)
        if isinstance(config, str):  # JSON-encoded twice by some SDK paths
            config = json.loads(config)
    elif isinstance(config, str):
        with open(config, encoding="utf-8") as f:
            config = json.load(f)
    if not isinstance(config, dict):
        raise SMPValidationError("the SMP parameters must be a JSON object")
    return dict(config)


def _world_size() -> int:
    for key in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"):
        value = os.environ.get(key)
        if value:
            return int(value)
    return 1


def init(config: Any = None) -> None:
    """``smp.init()``: read the parameters (``SM_HP_MP_PARAMETERS`` when none are given)."""
    if state.initialized:
        return
    world = _world_size()
    if world != 1:
        raise SMPUnsupportedError(f"the SMP v1 stand-in runs one process; this launch has {world}")
    params = _parameters(config)
    state.cfg = Config(params)
    state.initialized = True
    trace("init", parameters=params)


def is_initialized() -> bool:
    return state.initialized


def _require_init() -> None:
    if not state.initialized:
        raise SMPValidationError("smp.init() has not been called")


def rank() -> int:
    _require_init()
    return 0


def size() -> int:
    _require_init()
    return 1


def local_rank() -> int:
    _require_init()
    return 0


def local_size() -> int:
    _require_init()
    return 1


mp_rank = pp_rank = tp_rank = dp_rank = rdp_rank = local_rank
mp_size = pp_size = tp_size = dp_size = rdp_size = local_size


def _group() -> list[int]:
    _require_init()
    return [0]


get_mp_group = get_pp_group = get_tp_group = get_dp_group = get_rdp_group = _group
get_world_group = _group
