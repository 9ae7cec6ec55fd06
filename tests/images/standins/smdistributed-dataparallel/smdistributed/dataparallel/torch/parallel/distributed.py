"""``DistributedDataParallel`` of the pre-1.4 smddp API: torch's DDP over the stand-in backend."""

from __future__ import annotations

from typing import Any

import torch

from ... import _trace
from .. import torch_smddp  # noqa: F401  (registers the backend, patches DDP for CPU modules)


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    def __init__(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        _trace("parallel.DistributedDataParallel", module=type(module).__name__)
        super().__init__(module, *args, **kwargs)
