"""The software inside each training image the catalog names: one JSON file per image.

A file is named ``<repository>__<tag>.json`` (the image URI's repository and tag; the
registry and region do not change what is inside) and holds the image's Python, its
ENTRYPOINT (``entrypoint``: the command and its source; ``guess`` says why when no source
shows it), every
package the entrypoint touches at the image's exact version, each with its source (a
Dockerfile or buildspec of ``aws/deep-learning-containers`` at a named commit, or the
image's own release notes), and the distribution libraries it ships. Packages the image
leaves unpinned carry ``"unpinned": true`` and the version they resolved to as of the
image's build date.

Read at synth (a template whose image has no file fails, ``ftl_constructs.job_template``),
by the tests that tie the catalog to these files, and by the image matrix, which builds one
Python environment per file (``testsupport/image_envs.py``). Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "DIR",
    "ImageSet",
    "ImageSetError",
    "all_sets",
    "file_for",
    "for_uri",
    "split_uri",
]

DIR = Path(__file__).resolve().parent
# The packages every file must account for (a version, or "absent": true).
REQUIRED_PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "datasets",
    "accelerate",
    "peft",
    "trl",
    "numpy",
    "safetensors",
    "huggingface-hub",
    "evaluate",
    "scikit-learn",
    "sagemaker-training",
    "sagemaker-pytorch-training",
)


class ImageSetError(ValueError):
    """An image with no package-set file, or a file that breaks the format."""


def split_uri(uri: str) -> tuple[str, str]:
    """(repository, tag) of an image URI ``[registry/]repository:tag``."""
    path = uri.split("/", 1)[1] if "/" in uri and "." in uri.split("/", 1)[0] else uri
    repository, sep, tag = path.rpartition(":")
    if not sep or not repository or not tag or "@" in repository or "/" in tag:
        raise ImageSetError(f"image {uri!r} has no repository:tag")
    return repository, tag


def file_for(repository: str, tag: str) -> Path:
    return DIR / f"{repository.replace('/', '+')}__{tag}.json"


@dataclass(frozen=True)
class ImageSet:
    """One image's software, as its file states it."""

    repository: str
    tag: str
    framework: Mapping[str, str]
    python: str
    entrypoint: tuple[str, ...]  # the image's ENTRYPOINT (SageMaker appends "train")
    build_date: str
    packages: Mapping[str, Mapping[str, Any]]
    distribution_libraries: Mapping[str, Any]
    sources: tuple[Mapping[str, str], ...]
    path: Path

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def python_minor(self) -> str:
        """``3.9`` for ``3.9.19``."""
        return ".".join(self.python.split(".")[:2])

    @property
    def py_version(self) -> str:
        """The SDK's spelling, ``py39``."""
        return "py" + self.python_minor.replace(".", "")

    def version(self, package: str) -> str | None:
        """The package's version in the image, or None when the image lacks it."""
        entry = self.packages.get(package)
        if not entry or entry.get("absent"):
            return None
        return str(entry["version"])

    def ships(self, library: str) -> bool:
        return bool(self.distribution_libraries.get(library))

    def digest(self) -> str:
        """sha256 of the file's bytes: the key of the environment built from it."""
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def requirements(self) -> list[str]:
        """``name==version`` for every package the image has (what an environment installs)."""
        return [
            f"{name}=={entry['version']}"
            for name, entry in sorted(self.packages.items())
            if not entry.get("absent")
        ]


def _load(path: Path) -> ImageSet:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ImageSetError(f"{path.name}: {err}") from None
    where = path.name
    for key in (
        "repository",
        "tag",
        "framework",
        "python",
        "entrypoint",
        "build_date",
        "packages",
        "sources",
    ):
        if key not in raw:
            raise ImageSetError(f"{where}: missing {key!r}")
    if file_for(raw["repository"], raw["tag"]).name != path.name:
        raise ImageSetError(f"{where}: the name must be <repository>__<tag>.json")
    ids = {s["id"] for s in raw["sources"]}
    for s in raw["sources"]:
        if not s.get("commit") and not s.get("url"):
            raise ImageSetError(f"{where}: source {s['id']!r} names no commit or document")
    entrypoint = raw["entrypoint"]
    command = entrypoint.get("command") if isinstance(entrypoint, dict) else None
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(x, str) and x for x in command)
    ):
        raise ImageSetError(f"{where}: entrypoint.command must be a non-empty list of strings")
    if entrypoint.get("source") not in ids:
        raise ImageSetError(
            f"{where}: entrypoint cites unknown source {entrypoint.get('source')!r}"
        )
    packages = raw["packages"]
    for name in REQUIRED_PACKAGES:
        if name not in packages:
            raise ImageSetError(f"{where}: package {name!r} is not accounted for")
    for name, entry in packages.items():
        if entry.get("absent"):
            continue
        if not entry.get("version"):
            raise ImageSetError(f"{where}: package {name!r} has no version")
        if entry.get("source") not in ids:
            raise ImageSetError(
                f"{where}: package {name!r} cites unknown source {entry.get('source')!r}"
            )
    return ImageSet(
        repository=raw["repository"],
        tag=raw["tag"],
        framework=dict(raw["framework"]),
        python=str(raw["python"]),
        entrypoint=tuple(command),
        build_date=str(raw["build_date"]),
        packages=packages,
        distribution_libraries=dict(raw.get("distribution_libraries") or {}),
        sources=tuple(raw["sources"]),
        path=path,
    )


@cache
def all_sets() -> dict[str, ImageSet]:
    """Every file here, by name (``<repository>__<tag>``)."""
    return {p.stem: _load(p) for p in sorted(DIR.glob("*.json"))}


def for_uri(uri: str) -> ImageSet:
    """The package set of an image URI; ImageSetError naming the image when there is none."""
    repository, tag = split_uri(uri)
    path = file_for(repository, tag)
    if not path.is_file():
        raise ImageSetError(
            f"image {repository}:{tag} has no package-set file (image_sets/{path.name})"
        )
    return all_sets().get(path.stem) or _load(path)
