"""Docker-free, deterministic packaging of the training source and the Lambda code.

Both are built at synth time into a folder whose content (not timestamps) decides the CDK
asset hash, so an unchanged source never triggers a redeploy.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import os
import py_compile
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ftl_constructs.botocore_models import Operations, cache_key, write_botocore_data

ROOT = Path(__file__).resolve().parent.parent
# The trigger's declaration of the AWS operations it calls: its asset ships botocore models
# trimmed to them (``botocore_models.declared_operations`` reads it).
TRIGGER_OPERATIONS = ROOT / "lambda" / "trigger" / "ftl_trigger" / "aws_operations.py"
# The job ledger's package (the record, its codec, team usage, the one writer): shipped in
# both the trigger's and the job-events function's assets.
LEDGER_PACKAGE = ROOT / "lambda" / "ledger" / "ftl_ledger"
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


BOTOCORE_DATA = "botocore_data"  # the asset's folder of trimmed botocore models


def lambda_bundle(
    name: str,
    *,
    code_dir: Path,
    packages: Iterable[Path] = (),
    files: Mapping[str, Any] | None = None,
    aws_operations: Operations | None = None,
    bytecode: bool = False,
) -> Path:
    """A folder holding ``code_dir``'s files, whole ``packages`` and generated JSON ``files``.

    ``aws_operations`` (service -> operation names) adds ``botocore_data/``: botocore models
    trimmed to those operations, generated from the installed botocore. ``bytecode`` adds
    ``__pycache__`` files compiled by this interpreter (only useful when the function runs the
    same Python minor version), hash-based and unchecked: Lambda's files carry a fixed mtime
    and ``/var/task`` is read-only, so timestamp-checked bytecode would be recompiled on every
    cold start. The folder is named by a hash of the sources and of what decides the generated
    files, so repeated synths reuse it without copying anything.
    """
    sources: list[tuple[str, Path]] = [
        (p.relative_to(code_dir).as_posix(), p) for p in _files(code_dir)
    ]
    for package in packages:
        sources += [
            (f"{package.name}/{p.relative_to(package).as_posix()}", p) for p in _files(package)
        ]
    generated = {
        rel: (json.dumps(content, indent=1, sort_keys=True) + "\n").encode()
        for rel, content in (files or {}).items()
    }
    digest = hashlib.sha256()
    for rel, path in sorted(sources):
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    for rel, data in sorted(generated.items()):
        digest.update(rel.encode() + b"\0" + data + b"\0")
    if aws_operations:
        digest.update(b"botocore\0" + cache_key(aws_operations).encode())
    if bytecode:
        digest.update(b"bytecode\0" + sys.implementation.cache_tag.encode())
    final = Path(tempfile.gettempdir()) / f"ftl-{name}-{digest.hexdigest()[:16]}"
    if final.is_dir():
        return final
    staging = Path(tempfile.mkdtemp(prefix=f"ftl-{name}-"))
    try:
        for rel, path in sources:
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, staging / rel)
        for rel, data in generated.items():
            (staging / rel).write_bytes(data)
        if aws_operations:
            write_botocore_data(aws_operations, staging / BOTOCORE_DATA)
        if bytecode:
            _compile(staging, [rel for rel, _ in sources if rel.endswith(".py")])
        staging.rename(final)
    except OSError:
        # Another process built the same content first: theirs is as good as ours.
        shutil.rmtree(staging, ignore_errors=True)
        if not final.is_dir():
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _compile(root: Path, modules: Iterable[str]) -> None:
    """Bytecode next to each module, as the import system looks for it, named by the module's
    path in the asset (not the temporary folder) so tracebacks read well."""
    for rel in modules:
        source = root / rel
        py_compile.compile(
            str(source),
            cfile=importlib.util.cache_from_source(str(source)),
            dfile=rel,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
