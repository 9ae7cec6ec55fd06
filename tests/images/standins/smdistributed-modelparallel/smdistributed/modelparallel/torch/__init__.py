"""``import smdistributed.modelparallel.torch as smp`` (SMP v1 stand-in, one process).

See ``smdistributed.modelparallel`` for what this does not prove. Implemented:

- ``smp.init()`` (parameters from ``SM_HP_MP_PARAMETERS``; refuses more than one process),
  ``smp.is_initialized()``, ``smp.state`` (``cfg`` with every parameter, ``model``,
  ``optimizer``, ``module_manager.translate_functions`` = []);
- ranks and sizes: ``rank``/``size``, ``local_rank``/``local_size``, ``mp_``, ``pp_``,
  ``tp_``, ``dp_``, ``rdp_`` ``rank``/``size`` (0 and 1), ``get_*_group`` ([0]);
- ``smp.step`` (microbatches split along the batch axis, ``StepOutput`` with
  ``reduce_mean``/``reduce_sum``/``concat``/``stack``/``outputs``; a ModelOutput comes back
  as a dict of StepOutputs);
- ``smp.DistributedModel`` (also ``smp.model.DistributedModel``): forward/backward inside
  ``smp.step`` only, backward averaged over microbatches, ``state_dict`` under the wrapped
  module's names, ``load_state_dict`` (drops ``_smp_is_partial``), ``local_*``,
  ``register_post_step_hook`` (runs once, after the next step), ``register_post_partition_hook``;
- ``smp.DistributedOptimizer``: an instance of the optimizer's own class with
  ``local_state_dict``, ``load_state_dict`` and ``clip_master_grads``;
- ``smp.save``/``smp.load`` (``partial``, ``v3``, ``back_compat``), ``smp.save_checkpoint``,
  ``smp.resume_from_checkpoint`` (full: ``<path>/<tag>`` into the DistributedModel);
- ``smp.barrier``, ``smp.allgather`` ([obj]), ``smp.broadcast``, ``smp.CommGroup``,
  ``smp.RankType`` and their ``WORLD``/``MP_GROUP``/``DP_GROUP``/... aliases;
- ``tensor_parallelism()``/``model_creation(tensor_parallelism=True)`` mark the modules
  created inside, ``set_tensor_parallelism`` marks a module; ``DistributedModel`` records
  the split of the marked layers of a supported model and refuses a head count the degree
  does not divide (``tensor_parallel.py``); ``tp_size()`` etc. are the configuration's;
- no-op context managers ``partition``, ``delay_param_initialization``, and
  ``set_activation_checkpointing``, ``tp_register_with_module``.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from typing import Any

from . import exceptions, model  # noqa: F401  (smp.model.DistributedModel)
from . import tensor_parallel as _tp
from .checkpoint import load, resume_from_checkpoint, save, save_checkpoint
from .model import DistributedModel
from .optimizer import DistributedOptimizer
from .state import (
    dp_rank,
    dp_size,
    get_dp_group,
    get_mp_group,
    get_pp_group,
    get_rdp_group,
    get_tp_group,
    get_world_group,
    init,
    is_initialized,
    local_rank,
    local_size,
    mp_rank,
    mp_size,
    pp_rank,
    pp_size,
    rank,
    rdp_rank,
    rdp_size,
    reset,
    size,
    state,
    tp_rank,
    tp_size,
    trace,
)
from .step import StepOutput, step

__all__ = [
    "CommGroup",
    "DistributedModel",
    "DistributedOptimizer",
    "RankType",
    "StepOutput",
    "allgather",
    "barrier",
    "broadcast",
    "dp_rank",
    "dp_size",
    "get_dp_group",
    "get_mp_group",
    "get_pp_group",
    "get_rdp_group",
    "get_tp_group",
    "get_world_group",
    "init",
    "is_initialized",
    "load",
    "local_rank",
    "local_size",
    "mp_rank",
    "mp_size",
    "pp_rank",
    "pp_size",
    "rank",
    "rdp_rank",
    "rdp_size",
    "reset",
    "resume_from_checkpoint",
    "save",
    "save_checkpoint",
    "set_tensor_parallelism",
    "size",
    "state",
    "step",
    "tp_rank",
    "tp_size",
]


class CommGroup(enum.Enum):
    WORLD = 0
    MP_GROUP = 1
    DP_GROUP = 2
    PP_GROUP = 3
    TP_GROUP = 4
    RDP_GROUP = 5


class RankType(enum.Enum):
    WORLD_RANK = 0
    MP_RANK = 1
    DP_RANK = 2
    PP_RANK = 3
    TP_RANK = 4
    RDP_RANK = 5


WORLD = CommGroup.WORLD
MP_GROUP = CommGroup.MP_GROUP
DP_GROUP = CommGroup.DP_GROUP
PP_GROUP = CommGroup.PP_GROUP
TP_GROUP = CommGroup.TP_GROUP
RDP_GROUP = CommGroup.RDP_GROUP


def barrier(group: CommGroup = CommGroup.WORLD) -> None:
    trace("barrier", group=getattr(group, "name", group))


def allgather(obj: Any, group: CommGroup = CommGroup.WORLD) -> list[Any]:
    trace("allgather", group=getattr(group, "name", group))
    return [obj]


def broadcast(obj: Any, group: CommGroup = CommGroup.WORLD) -> None:
    trace("broadcast", group=getattr(group, "name", group))


@contextlib.contextmanager
def _noop(name: str, **details: Any) -> Iterator[None]:
    trace(name, **details)
    yield


def partition(index: int) -> Any:
    return _noop("partition", index=index)


def tensor_parallelism(enabled: bool = True, **config: Any) -> Any:
    """Modules created inside are marked for tensor parallelism (``tensor_parallel.py``)."""
    trace("tensor_parallelism", enabled=enabled)
    return _tp.creating(enabled)


def set_tensor_parallelism(module: Any, enabled: bool = True, **config: Any) -> None:
    _tp.mark(module, enabled)


def model_creation(tensor_parallelism: bool = False, dtype: Any = None, **config: Any) -> Any:
    trace("model_creation", tensor_parallelism=tensor_parallelism, dtype=dtype)
    return _tp.creating(tensor_parallelism)


def delay_param_initialization(enabled: bool = True) -> Any:
    return _noop("delay_param_initialization", enabled=enabled)


def set_activation_checkpointing(module: Any, *args: Any, **kwargs: Any) -> None:
    trace("set_activation_checkpointing", module=type(module).__name__)


def tp_register_with_module(*args: Any, **kwargs: Any) -> None:
    trace("tp_register_with_module")
