"""Checkpoint folders under ``checkpoint_dir``: which are complete, which to resume, which to drop.

The HF Trainer writes ``checkpoint-<step>/`` file by file. A spot reclaim or a SIGKILL
can stop it half-way, and SageMaker syncs whatever is in ``/opt/ml/checkpoints`` to S3
and back, so a folder on disk is not proof of a usable checkpoint. After the Trainer has
written everything (and every process has passed a barrier) the saving process writes
``COMPLETE_MARKER`` last; only folders with that marker are resumed from or counted
when old checkpoints are rotated away.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time

logger = logging.getLogger("ftl_train")

PREFIX = "checkpoint"
COMPLETE_MARKER = "ftl_checkpoint_complete.json"
_STEP_RE = re.compile(rf"^{PREFIX}-(\d+)$")
# Files without which the HF Trainer cannot resume.
REQUIRED_FILES = ("trainer_state.json",)
WEIGHT_FILES = (
    "model.safetensors",
    "adapter_model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def step_of(path: str) -> int | None:
    m = _STEP_RE.match(os.path.basename(os.path.normpath(path)))
    return int(m.group(1)) if m else None


def list_checkpoints(checkpoint_dir: str) -> list[tuple[int, str]]:
    """(step, path) of every ``checkpoint-<step>`` folder, oldest first."""
    if not checkpoint_dir or not os.path.isdir(checkpoint_dir):
        return []
    out = []
    for name in os.listdir(checkpoint_dir):
        path = os.path.join(checkpoint_dir, name)
        step = step_of(name)
        if step is not None and os.path.isdir(path):
            out.append((step, path))
    return sorted(out)


def is_complete(path: str) -> bool:
    marker = os.path.join(path, COMPLETE_MARKER)
    if not os.path.isfile(marker):
        return False
    try:
        with open(marker, encoding="utf-8") as fh:
            info = json.load(fh)
    except (OSError, json.JSONDecodeError):
        return False
    if info.get("step") != step_of(path):
        return False
    if not all(os.path.isfile(os.path.join(path, f)) for f in REQUIRED_FILES):
        return False
    if not sharded_files_present(path, info.get("world_size")):
        return False
    if not any(os.path.isfile(os.path.join(path, f)) for f in WEIGHT_FILES):
        # A sharded save in another layout (FSDP's pytorch_model_fsdp_0/, DeepSpeed) is
        # accepted when the marker lists it.
        return bool(info.get("files"))
    return True


def sharded_files_present(path: str, world_size: int | None) -> bool:
    """Every rank's shard of each sharded (torch.distributed.checkpoint) folder is there.

    Under multi-node FSDP each node writes its ranks' ``__<rank>_0.distcp`` files into its
    own ``/opt/ml/checkpoints``; SageMaker uploads them all to one S3 prefix and a restart
    downloads the whole prefix to every host. A checkpoint one of whose nodes never
    finished uploading is not resumable, whatever the marker (written by rank 0) says.
    """
    if not world_size:
        return True
    for name in os.listdir(path):
        folder = os.path.join(path, name)
        if not os.path.isfile(os.path.join(folder, ".metadata")):
            continue
        if not all(
            os.path.isfile(os.path.join(folder, f"__{rank}_0.distcp")) for rank in range(world_size)
        ):
            return False
    return True


class CheckpointError(RuntimeError):
    """The newest complete checkpoint cannot be resumed by this run as configured."""


def sharded_folders(path: str) -> list[str]:
    """The torch.distributed.checkpoint folders (with ``.metadata``) of a checkpoint."""
    return sorted(
        name for name in os.listdir(path) if os.path.isfile(os.path.join(path, name, ".metadata"))
    )


def check_resumable(path: str | None, fsdp_enabled: bool) -> None:
    """A sharded (FSDP) checkpoint needs FSDP to load it; any number of processes will do
    (torch.distributed.checkpoint reshards on load), but a run without FSDP finds no weights
    it can read, and the Trainer would stop deep inside with a generic message."""
    if not path or fsdp_enabled:
        return
    folders = sharded_folders(path)
    if folders:
        saved = _marker(path).get("world_size")
        raise CheckpointError(
            f"checkpoint {path} holds FSDP-sharded state ({', '.join(folders)}; saved by "
            f"{saved} processes) and this run does not use FSDP: resume it with the fsdp "
            "hyperparameter set, launched with torchrun on more than one process (on a CPU, "
            "FSDP needs more than one process)"
        )


def _marker(path: str) -> dict:
    try:
        with open(os.path.join(path, COMPLETE_MARKER), encoding="utf-8") as fh:
            info = json.load(fh)
    except (OSError, json.JSONDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def newest_complete(checkpoint_dir: str) -> str | None:
    for _step, path in reversed(list_checkpoints(checkpoint_dir)):
        if is_complete(path):
            return path
        logger.warning("ignoring incomplete checkpoint %s (no %s)", path, COMPLETE_MARKER)
    return None


def mark_complete(path: str, extra: dict | None = None) -> None:
    """Write the completion marker atomically (temp file + rename) after fsyncing the files."""
    files = []
    for root, _dirs, names in os.walk(path):
        for name in names:
            if name == COMPLETE_MARKER or name.startswith(".ftl_tmp"):
                continue
            full = os.path.join(root, name)
            files.append(os.path.relpath(full, path))
            try:
                fd = os.open(full, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError:
                pass
    info = {"step": step_of(path), "files": sorted(files), "time": time.time()}
    if extra:
        info.update(extra)
    tmp = os.path.join(path, f".ftl_tmp_{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(path, COMPLETE_MARKER))


def best_checkpoint(
    run_dir: str, best_step: int | None, saving_step: int, recorded: str | None
) -> str | None:
    """The best checkpoint's folder, from the step whose evaluation was best (issue 34).

    transformers 5.x records ``best_global_step`` at each evaluation and, while saving,
    points ``best_model_checkpoint`` at ``checkpoint-<best_global_step>`` only if that folder
    already exists. Under FSDP with sharded checkpoints nothing has written the folder at
    that moment when the step being saved is the best one, and every rank creates it soon
    after: ranks that look first keep the old value (``None`` on a first best), later ones
    take the new path, so they disagree on loading the best model at the end and the job
    hangs in a collective. The path is a function of steps every rank holds identically, so
    it is computed here instead of looked up: the step being saved names its own folder, an
    older best step names its folder if it is still there (a state saved by the racy check
    is repaired on the next save). Without a best step the recorded value stands.
    """
    if not best_step:
        return recorded
    path = os.path.join(run_dir, f"{PREFIX}-{best_step}")
    if best_step == saving_step or os.path.isdir(path):
        return path
    return recorded


def rotate(
    checkpoint_dir: str, keep: int | None, best: str | None = None, saving_process: bool = True
) -> list[str]:
    """Delete old checkpoints; return the deleted paths.

    On the saving process: keep the newest ``keep`` complete checkpoints and the best one;
    also drop incomplete folders older than the newest complete one (left by a crash).
    On other nodes (which hold only their own RNG files, never markers): keep the newest
    ``keep`` folders by step and the best one.
    """
    if keep is None or keep <= 0:
        return []
    ckpts = list_checkpoints(checkpoint_dir)
    best_norm = os.path.normpath(best) if best else None
    protected: set[str] = set()
    if best_norm:
        protected.add(best_norm)
    deleted = []
    if saving_process:
        complete = [(s, p) for s, p in ckpts if is_complete(p)]
        protected.update(os.path.normpath(p) for _s, p in complete[-keep:])
        newest_step = complete[-1][0] if complete else None
        for step, path in ckpts:
            norm = os.path.normpath(path)
            if norm in protected:
                continue
            if is_complete(path) or (newest_step is not None and step < newest_step):
                deleted.append(path)
    else:
        protected.update(os.path.normpath(p) for _s, p in ckpts[-keep:])
        deleted = [p for _s, p in ckpts if os.path.normpath(p) not in protected]
    for path in deleted:
        logger.info("deleting old checkpoint %s (save_total_limit=%s)", path, keep)
        shutil.rmtree(path, ignore_errors=True)
    return deleted
