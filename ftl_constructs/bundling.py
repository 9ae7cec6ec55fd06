"""Docker-free, deterministic packaging of the training source and the Lambda code.

Both are built at synth time into a folder whose content (not timestamps) decides the CDK
asset hash, so an unchanged source never triggers a redeploy.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


def _files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and not _SKIP_DIRS.intersection(p.relative_to(root).parts)
        and not p.name.endswith(_SKIP_SUFFIXES)
    )


def source_tarball(source_dir: Path, out_dir: Path) -> Path:
    """``sourcedir.tar.gz`` of ``source_dir`` with fixed order, owners and times."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _files(source_dir):
            info = tarfile.TarInfo(path.relative_to(source_dir).as_posix())
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "sourcedir.tar.gz"
    _replace_atomically(target, packed.getvalue())
    return target


def _replace_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` so that a reader never sees a partial file.

    Several synths may share one output folder (parallel test workers, a deploy running
    beside a test): each writes a private temporary file and renames it into place, and
    an identical file already there is left alone.
    """
    if target.is_file() and target.read_bytes() == data:
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def lambda_bundle(
    name: str,
    *,
    code_dir: Path,
    packages: Iterable[Path] = (),
    files: Mapping[str, Any] | None = None,
) -> Path:
    """A folder holding ``code_dir``'s files, whole ``packages`` and generated JSON ``files``.

    The folder is named by a hash of its content, so repeated synths reuse it.
    """
    staging = Path(tempfile.mkdtemp(prefix=f"ftl-{name}-"))
    for path in _files(code_dir):
        dest = staging / path.relative_to(code_dir)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    for package in packages:
        for path in _files(package):
            dest = staging / package.name / path.relative_to(package)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    for rel, content in (files or {}).items():
        (staging / rel).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
    digest = hashlib.sha256()
    for path in _files(staging):
        digest.update(path.relative_to(staging).as_posix().encode() + b"\0" + path.read_bytes())
    final = Path(tempfile.gettempdir()) / f"ftl-{name}-{digest.hexdigest()[:16]}"
    if final.exists():
        shutil.rmtree(staging)
        return final
    try:
        staging.rename(final)
    except OSError:
        # Another process built the same content first: theirs is as good as ours.
        if not final.is_dir():
            raise
        shutil.rmtree(staging)
    return final
