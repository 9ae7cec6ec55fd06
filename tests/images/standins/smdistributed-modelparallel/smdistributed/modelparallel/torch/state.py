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
        self.pipeline_parallel_degree = int(self.pipeline_parallel_degree)
        self.tensor_parallel_degree = int(self.tensor_parallel_degree)
        # SMP v1 parameters reference (v1.10+): "fp16" and "bf16" each switch the model to
        # that half type; the library takes one of them, not both.
        if self.fp16 and self.bf16:
            raise SMPValidationError("fp16 and bf16 cannot both be true")

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
        self.world = 1
        self.tp_marked: set[int] = set()  # id() of modules created in tensor_parallelism()
        self.tp_split: list[dict[str, Any]] = []

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


def _job_world() -> tuple[int, int]:
    """(processes in the whole job, processes per host) as SageMaker's MPI launch makes them:
    ``sagemaker_mpi_num_of_processes_per_host`` (SM_FRAMEWORK_PARAMS) on each of SM_HOSTS.
    This stand-in runs rank 0 of that job; without those variables, the launch's own size."""
    try:
        framework = json.loads(os.environ.get("SM_FRAMEWORK_PARAMS", "") or "{}")
        hosts = json.loads(os.environ.get("SM_HOSTS", "") or "[]")
    except json.JSONDecodeError:
        framework, hosts = {}, []
    per_host = framework.get("sagemaker_mpi_num_of_processes_per_host") if framework else None
    if not per_host:
        world = _world_size()
        return world, world
    return int(per_host) * max(1, len(hosts)), int(per_host)


def _check_degrees(cfg: Config, world: int, per_host: int) -> None:
    """The degrees against the job's processes, as SMP v1 documents them (SageMaker
    Developer Guide, "SageMaker model parallelism library v1" configuration parameters and
    "Tensor Parallelism"): the model-parallel group (pipeline_parallel_degree x
    tensor_parallel_degree) divides the number of processes, the rest being data-parallel
    replicas, and a tensor-parallel group stays within one instance ("no greater than the
    number of GPUs per instance", seed 004)."""
    pp, tp = cfg.pipeline_parallel_degree, cfg.tensor_parallel_degree
    if pp < 1 or tp < 1:
        raise SMPValidationError(f"parallel degrees must be >= 1 (pipeline {pp}, tensor {tp})")
    if world % (pp * tp):
        raise SMPValidationError(
            f"pipeline_parallel_degree {pp} x tensor_parallel_degree {tp} = {pp * tp} does not "
            f"divide the {world} processes of the job"
        )
    if tp > per_host:
        raise SMPValidationError(
            f"tensor_parallel_degree {tp} is more than the {per_host} processes per host"
        )


def init(config: Any = None) -> None:
    """``smp.init()``: read the parameters (``SM_HP_MP_PARAMETERS`` when none are given) and
    check the degrees against the job's processes."""
    if state.initialized:
        return
    launched = _world_size()
    if launched != 1:
        raise SMPUnsupportedError(
            f"the SMP v1 stand-in runs one process; this launch has {launched}"
        )
    params = _parameters(config)
    cfg = Config(params)
    world, per_host = _job_world()
    _check_degrees(cfg, world, per_host)
    state.cfg = cfg
    state.world = world
    state.initialized = True
    _process_group()
    trace(
        "init",
        parameters=params,
        world=world,
        pp_size=pp_size(),
        tp_size=tp_size(),
        dp_size=dp_size(),
    )


def _process_group() -> None:
    """SMP v1 sets torch.distributed up itself (its DDP and the Trainer's barriers run on
    it; a script never calls ``init_process_group``). Here: a gloo group of this one
    process, so ``torch.distributed.barrier()`` returns at once; sizes come from ``smp``."""
    import torch.distributed as dist

    if state.world > 1 and dist.is_available() and not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        trace("torch.distributed", backend="gloo", world_size=1)


def reset() -> None:
    """Back to before ``smp.init`` (tests that build several jobs in one process)."""
    state.__init__()  # type: ignore[misc]


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


# This process is rank 0 of every group; the sizes are the job's (tp_size() is the
# configuration's tensor_parallel_degree, as in the real library).
mp_rank = pp_rank = tp_rank = dp_rank = rdp_rank = local_rank


def pp_size() -> int:
    _require_init()
    assert state.cfg is not None
    return state.cfg.pipeline_parallel_degree


def tp_size() -> int:
    _require_init()
    assert state.cfg is not None
    return state.cfg.tensor_parallel_degree


def mp_size() -> int:
    return pp_size() * tp_size()


def dp_size() -> int:
    """SMP v1 API reference (``smp.dp_size``, ``smp.rdp_size``): the data-parallel group
    holds every process of one pipeline stage, tensor-parallel ranks included (each reads
    its own batch unless ``prescaled_batch``); the reduced group leaves the TP ranks out."""
    return max(1, state.world // pp_size())


def rdp_size() -> int:
    return max(1, dp_size() // tp_size())


def _group() -> list[int]:
    _require_init()
    return [0]


get_mp_group = get_pp_group = get_tp_group = get_dp_group = get_rdp_group = _group
get_world_group = _group
