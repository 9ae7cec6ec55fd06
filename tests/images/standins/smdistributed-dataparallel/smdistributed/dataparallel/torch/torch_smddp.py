"""``import smdistributed.dataparallel.torch.torch_smddp``: the ``smddp`` process-group backend.

Stand-in (see ``smdistributed.dataparallel``): ``smddp`` is registered with
``torch.distributed.Backend.register_backend`` and backed by gloo; importing this module
also fills in the launcher's environment when missing and lets ``DistributedDataParallel``
take ``device_ids`` for a CPU module under this backend (the Trainer passes
``device_ids=[SMDATAPARALLEL_LOCAL_RANK]``).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import socket
from typing import Any

import torch
import torch.distributed as dist

from .. import _trace

BACKEND = "smddp"


def _first_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                pass
    return default


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fill_environment() -> dict[str, str]:
    """What ``smddprun`` exports to each process, where the launch did not already."""
    rank = _first_int(("OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"), 0)
    world = _first_int(("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"), 1)
    local = _first_int(("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK"), 0)
    local_size = _first_int(("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"), world)
    filled = {}
    for key, value in (
        ("RANK", rank),
        ("WORLD_SIZE", world),
        ("LOCAL_RANK", local),
        ("LOCAL_WORLD_SIZE", local_size),
        ("SMDATAPARALLEL_LOCAL_RANK", local),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", _free_port() if world == 1 else 29500),
    ):
        if not os.environ.get(key):
            os.environ[key] = str(value)
            filled[key] = str(value)
    return filled


def _create_process_group(store: Any, rank: int, size: int, timeout: Any) -> Any:
    _trace("backend.create", rank=rank, world_size=size)
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def _register() -> None:
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:  # torch >= 2.1: one gloo backend for the CPU only
        dist.Backend.register_backend(BACKEND, _create_process_group, devices=["cpu"])
    else:  # torch 1.13 / 2.0
        dist.Backend.register_backend(BACKEND, _create_process_group)


def _is_standin_group(process_group: Any) -> bool:
    try:
        if not dist.is_initialized():
            return False
        return str(dist.get_backend(process_group)).lower() == BACKEND
    except Exception:  # noqa: BLE001 - any doubt: leave DDP alone
        return False


def _patch_ddp_for_cpu_modules() -> None:
    """DDP rejects ``device_ids`` for a CPU module; the Trainer passes them for smddp."""
    ddp = torch.nn.parallel.DistributedDataParallel
    if getattr(ddp.__init__, "_ftl_smddp_standin", False):
        return
    original = ddp.__init__

    @functools.wraps(original)
    def __init__(self: Any, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        device_ids = kwargs.get("device_ids", args[0] if args else None)
        group = kwargs.get("process_group", args[3] if len(args) > 3 else None)
        on_cpu = all(p.device.type == "cpu" for p in module.parameters())
        if device_ids and on_cpu and _is_standin_group(group):
            args = args[2:] if len(args) >= 2 else ()
            if args:  # positional: device_ids, output_device, dim, ...
                args = (None, None, *args)
            kwargs.pop("device_ids", None)
            kwargs.pop("output_device", None)
            _trace("ddp.cpu_module", dropped_device_ids=list(device_ids))
        _trace("ddp.wrap", module=type(module).__name__)
        original(self, module, *args, **kwargs)

    __init__._ftl_smddp_standin = True  # type: ignore[attr-defined]
    ddp.__init__ = __init__  # type: ignore[method-assign]


def _patch_all_gather_into_tensor() -> None:
    """accelerate gathers evaluation outputs with ``all_gather_into_tensor`` into one flat
    tensor, which NCCL (and the real library) accept and gloo refuses ('invalid tensor
    size'); for the stand-in's groups it is an ``all_gather`` into a list, concatenated."""
    original = getattr(dist, "all_gather_into_tensor", None)
    if original is None or getattr(original, "_ftl_smddp_standin", False):
        return

    @functools.wraps(original)
    def all_gather_into_tensor(
        output_tensor: Any, input_tensor: Any, group: Any = None, async_op: bool = False
    ) -> Any:
        if not _is_standin_group(group):
            return original(output_tensor, input_tensor, group=group, async_op=async_op)
        parts = [torch.empty_like(input_tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, input_tensor, group=group)
        output_tensor.copy_(torch.cat([p.reshape(-1) for p in parts]).reshape(output_tensor.shape))
        _trace("all_gather_into_tensor", shape=list(output_tensor.shape))
        return None

    all_gather_into_tensor._ftl_smddp_standin = True  # type: ignore[attr-defined]
    dist.all_gather_into_tensor = all_gather_into_tensor  # type: ignore[assignment]


def _smddp_enabled() -> bool:
    try:
        params = json.loads(os.environ.get("SM_FRAMEWORK_PARAMS", "") or "{}")
    except json.JSONDecodeError:
        return False
    return bool(
        isinstance(params, dict) and params.get("sagemaker_distributed_dataparallel_enabled")
    )


def _patch_init_process_group() -> None:
    """The job's process group must be smddp's. The SMDDP guide's one script change for
    PyTorch is ``import smdistributed.dataparallel.torch.torch_smddp`` then
    ``init_process_group(backend="smddp")``; a job that enabled smddp
    (``sagemaker_distributed_dataparallel_enabled`` in SM_FRAMEWORK_PARAMS) but set up
    another backend would train without the library, silently. This stand-in refuses that
    (a test check, not the real library's), and traces the backend it got."""
    original = dist.init_process_group
    if getattr(original, "_ftl_smddp_standin", False):
        return

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend", args[0] if args else None)
        name = str(backend).lower() if backend is not None else None
        _trace("init_process_group", backend=name)
        if _smddp_enabled() and name != BACKEND:
            raise RuntimeError(
                f"smddp stand-in: this job enabled smddp but the process group backend is "
                f"{name!r}, not 'smddp'"
            )
        return original(*args, **kwargs)

    init_process_group._ftl_smddp_standin = True  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group  # type: ignore[assignment]


_filled = _fill_environment()
_register()
_patch_ddp_for_cpu_modules()
_patch_all_gather_into_tensor()
_patch_init_process_group()
_trace(
    "import torch_smddp",
    filled_environment=_filled,
    torch=torch.__version__,
    # set by the toolkit's smddp launch line (mpirun -x ...; the matrix's shim exports them)
    launch_flags={
        k: os.environ[k]
        for k in ("SMDATAPARALLEL_USE_SINGLENODE", "SMDATAPARALLEL_USE_HOMOGENEOUS", "FI_PROVIDER")
        if k in os.environ
    },
)
