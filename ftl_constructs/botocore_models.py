"""Botocore data trimmed to the operations a Lambda calls, generated from the installed botocore.

A function's code declares the AWS operations it calls (``OPERATIONS`` in
``lambda/trigger/ftl_trigger/aws_operations.py``); at synth time :func:`write_botocore_data`
writes a botocore data folder holding, for each service, the service model with only those
operations and the shapes they reach (no documentation), its endpoint rule set and its
paginators for those operations, plus the top-level files botocore reads when it builds a
client (``endpoints.json`` cut to those services, ``partitions.json``,
``sdk-default-configuration.json``, ``_retry.json``). The function's loader reads only this
folder (see ``ftl_trigger/aws.py``): a full SageMaker model is 384 KiB gzipped and decoding it
is most of a client's creation time. Nothing here is kept by hand; the models come from
whatever botocore is installed, and no botocore import is needed (synth stays fast).
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# Bump when the generated layout changes, so cached bundles are rebuilt.
GENERATOR_VERSION = 1
TOP_LEVEL_FILES = ("partitions", "sdk-default-configuration", "_retry")
_DOC_KEYS = ("documentation", "documentationUrl")

Operations = Mapping[str, Iterable[str]]


def declared_operations(module: Path) -> dict[str, tuple[str, ...]]:
    """``OPERATIONS`` from a Lambda's declaration module, read without importing it."""
    tree = ast.parse(module.read_text(), filename=str(module))
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "OPERATIONS" and node.value is not None:
            value = ast.literal_eval(node.value)
            return {service: tuple(ops) for service, ops in value.items()}
    raise ValueError(f"{module} declares no OPERATIONS constant")


def botocore_data_dir() -> Path:
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("botocore is not installed; it is needed to trim the service models")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def cache_key(operations: Operations) -> str:
    """What decides the generated folder: botocore's version, the operations, this code."""
    ops = {s: sorted(o) for s, o in sorted(operations.items())}
    return json.dumps([GENERATOR_VERSION, botocore_version(), ops], sort_keys=True)


def botocore_version() -> str:
    """The installed botocore's version, read from its source (``importlib.metadata`` alone
    costs more import time than the whole bundling step)."""
    init = (botocore_data_dir().parent / "__init__.py").read_text()
    found = re.search(r"^__version__ = ['\"]([^'\"]+)['\"]", init, re.MULTILINE)
    if not found:
        raise ValueError("cannot read botocore's version")
    return found.group(1)


def _load(path_without_suffix: Path) -> Any:
    gz = path_without_suffix.with_name(path_without_suffix.name + ".json.gz")
    if gz.is_file():
        return json.loads(gzip.decompress(gz.read_bytes()))
    return json.loads(path_without_suffix.with_name(path_without_suffix.name + ".json").read_text())


def _exists(path_without_suffix: Path) -> bool:
    return any(
        path_without_suffix.with_name(path_without_suffix.name + s).is_file()
        for s in (".json", ".json.gz")
    )


def latest_version(data: Path, service: str) -> str:
    """The API version botocore picks: the newest that has a service model."""
    versions = [p.name for p in (data / service).iterdir() if _exists(p / "service-2")]
    if not versions:
        raise ValueError(f"botocore has no service model for {service!r}")
    return max(versions)


def _undocumented(node: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in node.items() if k not in _DOC_KEYS}


def _shape(shape: Mapping[str, Any]) -> dict[str, Any]:
    out = _undocumented(shape)
    if "members" in out:
        out["members"] = {name: _undocumented(m) for name, m in out["members"].items()}
    return out


def trim_service_model(model: Mapping[str, Any], operations: Iterable[str]) -> dict[str, Any]:
    """``model`` with only ``operations``, the shapes they reach and no documentation."""
    wanted = tuple(operations)
    missing = [op for op in wanted if op not in model["operations"]]
    if missing:
        raise ValueError(
            f"{model['metadata'].get('serviceId')} has no operation(s) {', '.join(missing)}"
        )
    ops = {name: _undocumented(model["operations"][name]) for name in wanted}
    shapes = model["shapes"]
    keep: set[str] = set()
    todo: list[str] = []
    for op in ops.values():
        todo += [op[k]["shape"] for k in ("input", "output") if k in op]
        todo += [e["shape"] for e in op.get("errors", [])]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        shape = shapes[name]
        todo += [m["shape"] for m in shape.get("members", {}).values()]
        todo += [shape[k]["shape"] for k in ("member", "key", "value") if k in shape]
    return {
        "version": model.get("version", "2.0"),
        "metadata": model["metadata"],
        "operations": ops,
        "shapes": {name: _shape(shapes[name]) for name in sorted(keep)},
    }


def _trim_endpoints(endpoints: Mapping[str, Any], prefixes: set[str]) -> dict[str, Any]:
    out = dict(endpoints)
    out["partitions"] = [
        {**p, "services": {k: v for k, v in p["services"].items() if k in prefixes}}
        for p in endpoints["partitions"]
    ]
    return out


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True))


def write_botocore_data(operations: Operations, dest: Path, source: Path | None = None) -> Path:
    """Write the trimmed data folder for ``operations`` to ``dest`` (from ``source``, default
    the installed botocore's data)."""
    data = source or botocore_data_dir()
    prefixes: set[str] = set()
    for service, ops in sorted(operations.items()):
        version = latest_version(data, service)
        folder = data / service / version
        model = trim_service_model(_load(folder / "service-2"), ops)
        prefixes.add(model["metadata"]["endpointPrefix"])
        _write(dest / service / version / "service-2.json", model)
        _write(
            dest / service / version / "endpoint-rule-set-1.json",
            _load(folder / "endpoint-rule-set-1"),
        )
        if _exists(folder / "paginators-1"):
            pages = _load(folder / "paginators-1")["pagination"]
            kept = {op: pages[op] for op in sorted(model["operations"]) if op in pages}
            if kept:
                _write(dest / service / version / "paginators-1.json", {"pagination": kept})
    _write(dest / "endpoints.json", _trim_endpoints(_load(data / "endpoints"), prefixes))
    for name in TOP_LEVEL_FILES:
        _write(dest / f"{name}.json", _load(data / name))
    return dest
