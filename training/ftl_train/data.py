"""Load a dataset split from a channel folder, whatever format it was written in.

Recognised, in this order:

* a folder written by ``Dataset.save_to_disk`` (``state.json`` + ``dataset_info.json``)
  or ``DatasetDict.save_to_disk`` (``dataset_dict.json``), at the top or one level down;
* JSON lines / JSON (``.jsonl``, ``.json``, optionally ``.gz``), CSV (``.csv``), TSV
  (``.tsv``) and Parquet (``.parquet``) files anywhere below the folder. One format per
  channel; mixing formats is an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

BUILDER_BY_SUFFIX = {
    ".jsonl": "json",
    ".json": "json",
    ".ndjson": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")
# Files that may sit beside data in a channel and are not data.
IGNORED_FILES = {
    "dataset_info.json",
    "state.json",
    "dataset_dict.json",
    "_SUCCESS",
    "manifest.json",
}


class DataError(ValueError):
    """A channel holds no data the entrypoint can read."""


def _is_saved_dataset(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "state.json")) and os.path.isfile(
        os.path.join(path, "dataset_info.json")
    )


def _is_saved_dataset_dict(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "dataset_dict.json"))


def _suffix(filename: str) -> str | None:
    name = filename.lower()
    for comp in COMPRESSION_SUFFIXES:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    for suffix in BUILDER_BY_SUFFIX:
        if name.endswith(suffix):
            return suffix
    return None


def _data_files(path: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if f.startswith(".") or f in IGNORED_FILES:
                continue
            suffix = _suffix(f)
            if suffix is None:
                continue
            found.setdefault(suffix, []).append(os.path.join(root, f))
    return found


def detect_format(path: str) -> str:
    """'save_to_disk', 'save_to_disk_dict', 'json', 'csv', 'tsv' or 'parquet'."""
    if _is_saved_dataset(path):
        return "save_to_disk"
    if _is_saved_dataset_dict(path):
        return "save_to_disk_dict"
    files = _data_files(path)
    builders = {("tsv" if s == ".tsv" else BUILDER_BY_SUFFIX[s]) for s in files}
    if not builders:
        subdirs = [
            os.path.join(path, d)
            for d in sorted(os.listdir(path))
            if os.path.isdir(os.path.join(path, d))
        ]
        for sub in subdirs:
            if _is_saved_dataset(sub) or _is_saved_dataset_dict(sub):
                return "save_to_disk_nested"
        raise DataError(
            f"no dataset found in {path}: expected save_to_disk output, "
            ".jsonl, .json, .csv, .tsv or .parquet files"
        )
    if len(builders) > 1:
        raise DataError(
            f"{path} mixes data formats ({', '.join(sorted(builders))}); put one format per channel"
        )
    return builders.pop()


def _pick_split(dsd: Any, split_names: Iterable[str], path: str) -> Any:
    names = list(split_names)
    for name in names:
        if name in dsd:
            return dsd[name]
    if len(dsd) == 1:
        return next(iter(dsd.values()))
    raise DataError(f"{path} holds splits {sorted(dsd)}; none of them is {names}")


def load_split(
    path: str, split_names: Iterable[str] = ("train",), cache_dir: str | None = None
) -> Any:
    """Load one ``datasets.Dataset`` from a channel folder."""
    import datasets

    split_names = tuple(split_names)
    fmt = detect_format(path)
    if fmt == "save_to_disk":
        return datasets.load_from_disk(path)
    if fmt == "save_to_disk_dict":
        return _pick_split(datasets.load_from_disk(path), split_names, path)
    if fmt == "save_to_disk_nested":
        subs = {
            d: os.path.join(path, d)
            for d in sorted(os.listdir(path))
            if os.path.isdir(os.path.join(path, d))
            and (
                _is_saved_dataset(os.path.join(path, d))
                or _is_saved_dataset_dict(os.path.join(path, d))
            )
        }
        for name in split_names:
            if name in subs:
                return load_split(subs[name], split_names, cache_dir)
        if len(subs) == 1:
            return load_split(next(iter(subs.values())), split_names, cache_dir)
        raise DataError(
            f"{path} holds datasets {sorted(subs)}; none of them is {list(split_names)}"
        )

    files = [f for suffix, fs in _data_files(path).items() for f in fs]
    kwargs = {}
    builder = fmt
    if fmt == "tsv":
        builder = "csv"
        kwargs["delimiter"] = "\t"
    return datasets.load_dataset(
        builder, data_files=sorted(files), split="train", cache_dir=cache_dir, **kwargs
    )
