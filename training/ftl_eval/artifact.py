"""What the archive holds, and where the model to evaluate is.

The platform names the kind (``jobmodel.after_training.archive``, the same three names) in
``ftl_eval_archive_kind``; the archive's layout must agree:

* ``full-model``: ``config.json`` at the root;
* ``lora-adapter``: ``adapter_config.json`` at the root (no model); the base model is the
  ``base_model`` channel (the training job's ``model`` channel);
* ``merged-model``: ``config.json`` at the root and ``adapter/adapter_config.json``.

The ``archive`` channel holds SageMaker's ``model.tar.gz`` (unpacked here, refusing links and
paths that leave the folder) or its unpacked contents.
"""

from __future__ import annotations

import glob
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass

from ftl_train import compat

FULL_MODEL = "full-model"
ADAPTER = "lora-adapter"
MERGED = "merged-model"
KINDS = (FULL_MODEL, ADAPTER, MERGED)
ADAPTER_SUBDIR = "adapter"  # ftl_train.lora.ADAPTER_SUBDIR
ARCHIVE_CHANNEL = "archive"
BASE_CHANNEL = "base_model"


class ArtifactError(ValueError):
    """The archive is missing, unreadable, or not what the platform says it is."""


@dataclass(frozen=True)
class ModelFiles:
    """``model``: the folder ``from_pretrained`` loads (the base model for an adapter);
    ``adapter``: the LoRA adapter to apply, or None; ``tokenizer``: the tokenizer's folder."""

    kind: str
    model: str
    adapter: str | None
    tokenizer: str


def layout(root: str) -> str | None:
    """The kind an unpacked archive's files say it is (None: no model at all)."""
    has_model = os.path.isfile(os.path.join(root, "config.json"))
    if os.path.isfile(os.path.join(root, "adapter_config.json")) and not has_model:
        return ADAPTER
    if has_model:
        sub = os.path.join(root, ADAPTER_SUBDIR, "adapter_config.json")
        return MERGED if os.path.isfile(sub) else FULL_MODEL
    return None


def unpack(channel: str, workdir: str) -> str:
    """The folder holding the archive's files: the channel itself when unpacked, else its
    ``*.tar.gz`` unpacked under ``workdir``."""
    if layout(channel) is not None:
        return channel
    tars = sorted(glob.glob(os.path.join(channel, "*.tar.gz")))
    if not tars:
        raise ArtifactError(f"the {ARCHIVE_CHANNEL} channel {channel} holds no model.tar.gz")
    dest = tempfile.mkdtemp(prefix="archive-", dir=workdir)
    try:
        with tarfile.open(tars[0]) as tar:
            compat.safe_extract(tar, dest)
    except (tarfile.TarError, ValueError, OSError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise ArtifactError(f"model archive {tars[0]}: {exc}") from None
    return dest


def _base_model(base_channel: str | None) -> str:
    if base_channel and os.path.isdir(base_channel):
        if os.path.isfile(os.path.join(base_channel, "config.json")):
            return base_channel
        for sub in sorted(glob.glob(os.path.join(base_channel, "*", "config.json"))):
            return os.path.dirname(sub)
    raise ArtifactError(
        f"a LoRA adapter needs its base model: the {BASE_CHANNEL} channel holds no model "
        "(config.json); the evaluation never downloads one"
    )


def open_model(
    kind: str, archive_channel: str | None, base_channel: str | None, workdir: str
) -> ModelFiles:
    """Where the model of an archive of ``kind`` is; ``ArtifactError`` when the archive
    does not hold what ``kind`` says."""
    if kind not in KINDS:
        raise ArtifactError(
            f"ftl_eval_archive_kind must be one of {', '.join(KINDS)}, got {kind!r}"
        )
    if not archive_channel or not os.path.isdir(archive_channel):
        raise ArtifactError(f"no {ARCHIVE_CHANNEL} channel: the job's model.tar.gz is its input")
    root = unpack(archive_channel, workdir)
    found = layout(root)
    if found != kind:
        raise ArtifactError(
            f"the archive holds {found or 'no model'} but the platform says {kind}: "
            f"{sorted(os.listdir(root))[:12]}"
        )
    if kind == ADAPTER:
        return ModelFiles(kind=kind, model=_base_model(base_channel), adapter=root, tokenizer=root)
    adapter = os.path.join(root, ADAPTER_SUBDIR) if kind == MERGED else None
    return ModelFiles(kind=kind, model=root, adapter=adapter, tokenizer=root)
