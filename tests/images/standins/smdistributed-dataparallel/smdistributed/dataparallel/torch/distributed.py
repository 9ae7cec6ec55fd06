"""``smdistributed.dataparallel.torch.distributed``: the pre-1.4 smddp API (stand-in).

Old scripts and old transformers releases do ``import smdistributed.dataparallel.torch
.distributed as dist`` and call these instead of ``torch.distributed``; each is the
``torch.distributed`` call over the stand-in ``smddp`` (gloo) backend.
"""

from __future__ import annotations

import os
from typing import Any

import torch.distributed as _dist
from torch.distributed import ReduceOp  # noqa: F401

from .. import _trace
from . import torch_smddp

group = _dist.group


def init_process_group(*args: Any, **kwargs: Any) -> None:
    kwargs.pop("backend", None)
    _trace("distributed.init_process_group")
    if not _dist.is_initialized():
        _dist.init_process_group(torch_smddp.BACKEND, *args, **kwargs)


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return _dist.is_initialized()


def get_rank(group: Any = None) -> int:
    return _dist.get_rank(group) if group is not None else _dist.get_rank()


def get_world_size(group: Any = None) -> int:
    return _dist.get_world_size(group) if group is not None else _dist.get_world_size()


def get_local_rank() -> int:
    return int(os.environ.get("SMDATAPARALLEL_LOCAL_RANK", os.environ.get("LOCAL_RANK", "0")))


def get_local_size() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))


def barrier(*args: Any, **kwargs: Any) -> Any:
    _trace("distributed.barrier")
    return _dist.barrier(*args, **kwargs)


def all_reduce(*args: Any, **kwargs: Any) -> Any:
    return _dist.all_reduce(*args, **kwargs)


def broadcast(*args: Any, **kwargs: Any) -> Any:
    return _dist.broadcast(*args, **kwargs)


def all_gather(*args: Any, **kwargs: Any) -> Any:
    return _dist.all_gather(*args, **kwargs)


def reduce(*args: Any, **kwargs: Any) -> Any:
    return _dist.reduce(*args, **kwargs)
