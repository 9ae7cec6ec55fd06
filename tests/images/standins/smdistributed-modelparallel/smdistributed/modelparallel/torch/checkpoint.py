"""``smp.save``/``smp.load``/``smp.save_checkpoint``/``smp.resume_from_checkpoint`` (stand-in).

One process holds every partition, so a "partial" file holds the whole object. File names
follow this stand-in's own pattern (``<f>_<pp_rank>_<tp_rank>`` and, with ``v3``,
``_<rdp_rank>``); the real library's layout is not reproduced.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import torch

from .state import state, trace


def _partial_name(f: str, v3: bool) -> str:
    return f"{f}_0_0_0" if v3 else f"{f}_0_0"


def save(
    obj: Any, f: str, partial: bool = True, pickle_protocol: int = 2, v3: bool = False, **_: Any
) -> None:
    path = _partial_name(f, v3) if partial else f
    torch.save(obj, path, pickle_protocol=pickle_protocol)
    trace("save", path=path, partial=partial, v3=v3)


def load(
    f: str, map_location: Any = "cpu", partial: bool = True, back_compat: bool = False, **_: Any
) -> Any:
    path = f
    if partial:
        found = [p for p in (_partial_name(f, True), _partial_name(f, False)) if os.path.exists(p)]
        found = found or sorted(glob.glob(f + "_*"))
        if not found:
            raise FileNotFoundError(f"no partial checkpoint {f}_* (stand-in layout)")
        path = found[0]
    trace("load", path=path, partial=partial, back_compat=back_compat)
    return torch.load(path, map_location=map_location)


def save_checkpoint(
    path: str,
    tag: str,
    partial: bool = True,
    model: Any = None,
    optimizer: Any = None,
    user_content: Any = None,
    translate_if_full: bool = True,
    num_kept_partial_checkpoints: int | None = None,
) -> None:
    os.makedirs(path, exist_ok=True)
    model = model if model is not None else state.model
    optimizer = optimizer if optimizer is not None else state.optimizer
    if partial:
        folder = os.path.join(path, f"{tag}_partial")
        os.makedirs(folder, exist_ok=True)
        if model is not None:
            torch.save(model.local_state_dict(), os.path.join(folder, "model_0_0.pt"))
        if optimizer is not None:
            torch.save(optimizer.local_state_dict(), os.path.join(folder, "optimizer_0_0.pt"))
        torch.save(user_content, os.path.join(folder, "user_content.pt"))
    else:
        if model is not None:
            torch.save(model.state_dict(), os.path.join(path, tag))
        torch.save(user_content, os.path.join(path, f"user_content_{tag}"))
    with open(os.path.join(path, "newest"), "w", encoding="utf-8") as fh:
        fh.write(tag)
    trace("save_checkpoint", path=path, tag=tag, partial=partial)


def resume_from_checkpoint(
    path: str,
    tag: str | None = None,
    partial: bool = True,
    strict: bool = True,
    load_optimizer: bool = True,
    load_sharded_optimizer_state: bool = True,
    translate_function: Any = None,
) -> Any:
    if tag is None:
        with open(os.path.join(path, "newest"), encoding="utf-8") as fh:
            tag = fh.read().strip()
    trace(
        "resume_from_checkpoint", path=path, tag=tag, partial=partial, load_optimizer=load_optimizer
    )
    if partial:
        folder = os.path.join(path, f"{tag}_partial")
        if state.model is not None:
            state.model.load_state_dict(
                torch.load(os.path.join(folder, "model_0_0.pt"), map_location="cpu"), strict=strict
            )
        opt_file = os.path.join(folder, "optimizer_0_0.pt")
        if load_optimizer and state.optimizer is not None and os.path.exists(opt_file):
            state.optimizer.load_state_dict(torch.load(opt_file, map_location="cpu"))
        user = os.path.join(folder, "user_content.pt")
        return torch.load(user, map_location="cpu") if os.path.exists(user) else None
    full = torch.load(os.path.join(path, tag), map_location="cpu")
    if translate_function is not None:
        full = translate_function(full)
    if state.model is not None:
        state.model.load_state_dict(full, strict=strict)
    user = os.path.join(path, f"user_content_{tag}")
    return torch.load(user, map_location="cpu") if os.path.exists(user) else None
