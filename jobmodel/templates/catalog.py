"""Catalog files: reading and writing ``{"version": 1, "templates": [...]}``, and the shipped one.

``load_catalog`` reads a file or a dict into specs by name (validated unless told not
to), ``dump_catalog`` writes the file form, ``shipped_catalog`` is the catalog that
ships inside the package (``shipped_templates.json``, images unresolved).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from ..contract.errors import TemplateError
from ._shapes import check_keys
from .rules import validate_template
from .spec import TemplateSpec

__all__ = [
    "CATALOG_VERSION",
    "SHIPPED_CATALOG_FILE",
    "dump_catalog",
    "load_catalog",
    "shipped_catalog",
]

CATALOG_VERSION = 1


def load_catalog(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    validate: bool = True,
    require_image: bool = False,
) -> dict[str, TemplateSpec]:
    """Read a catalog (``{"version": 1, "templates": [...]}``) from a JSON file path or a dict.

    Returns specs by name, in file order. Duplicate names raise ``TemplateError``
    (rule ``duplicate-name``); with ``validate`` every spec goes through
    ``validate_template(spec, require_image=require_image)``.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as fh:
            data: Any = json.load(fh)
    else:
        data = source
    return _catalog_from_data(data, validate=validate, require_image=require_image)


def _catalog_from_data(
    data: Any, *, validate: bool, require_image: bool
) -> dict[str, TemplateSpec]:
    if not isinstance(data, Mapping):
        raise TemplateError("<catalog>", "catalog", "a catalog must be a JSON object")
    check_keys("<catalog>", "catalog", data, ("version", "templates"), ("version", "templates"))
    if data["version"] != CATALOG_VERSION or type(data["version"]) is not int:
        raise TemplateError(
            "<catalog>",
            "catalog",
            f"catalog version must be {CATALOG_VERSION}, got {data['version']!r}",
        )
    templates = data["templates"]
    if not isinstance(templates, list):
        raise TemplateError("<catalog>", "catalog", "templates must be a list")
    out: dict[str, TemplateSpec] = {}
    for entry in templates:
        spec = TemplateSpec.from_dict(entry)
        if spec.name in out:
            raise TemplateError(
                str(spec.name),
                "duplicate-name",
                f"template {spec.name} appears twice in the catalog",
            )
        if validate:
            validate_template(spec, require_image=require_image)
        out[spec.name] = spec
    return out


def dump_catalog(specs: Mapping[str, TemplateSpec] | Iterable[TemplateSpec]) -> dict[str, Any]:
    """The catalog file form of ``specs``; duplicate names raise ``TemplateError``."""
    values = specs.values() if isinstance(specs, Mapping) else specs
    seen: set[str] = set()
    out = []
    for spec in values:
        if spec.name in seen:
            raise TemplateError(
                spec.name, "duplicate-name", f"template {spec.name} appears twice in the catalog"
            )
        seen.add(spec.name)
        out.append(spec.to_dict())
    return {"version": CATALOG_VERSION, "templates": out}


SHIPPED_CATALOG_FILE = "shipped_templates.json"


@lru_cache(maxsize=1)
def _shipped() -> tuple[TemplateSpec, ...]:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), SHIPPED_CATALOG_FILE)
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return tuple(_catalog_from_data(data, validate=True, require_image=False).values())


def shipped_catalog() -> dict[str, TemplateSpec]:
    """The catalog shipped with the platform (images unresolved: ``image_uri`` is None)."""
    return {spec.name: spec for spec in _shipped()}
