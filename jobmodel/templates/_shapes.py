"""Helpers the template types and template rules share.

``check_keys`` reads one object of a catalog file (unknown and missing keys are
``TemplateError``s), ``freeze_map`` / ``freeze_seq`` turn what was read into read-only
views and tuples, and ``fail`` builds the ``TemplateError`` every template rule raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from ..contract.errors import TemplateError

__all__ = ["Named", "check_keys", "fail", "freeze_map", "freeze_seq"]


def freeze_map(value: Any) -> Any:
    """A read-only view of a copy of ``value`` when it is a mapping; anything else as is."""
    if isinstance(value, MappingProxyType):
        return value
    if isinstance(value, Mapping):
        return MappingProxyType(dict(value))
    return value


def freeze_seq(value: Any) -> Any:
    """A tuple of ``value`` when it is a list or tuple; anything else as is."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def check_keys(
    template: str, what: str, data: Any, allowed: Iterable[str], required: Iterable[str]
) -> None:
    """``data`` must be an object with only ``allowed`` keys and every ``required`` one."""
    if not isinstance(data, Mapping):
        raise TemplateError(
            template, "type", f"{what} must be an object, got {type(data).__name__}"
        )
    allowed_set = set(allowed)
    unknown = sorted(str(k) for k in data if k not in allowed_set)
    if unknown:
        raise TemplateError(template, "unknown-key", f"{what} has unknown key {unknown[0]!r}")
    for key in required:
        if key not in data:
            raise TemplateError(template, "missing-key", f"{what} needs key {key!r}")


class Named(Protocol):
    """What ``fail`` reads of a template: its name (``TemplateSpec`` is one; this module sits
    below ``spec``, which imports it)."""

    @property
    def name(self) -> str: ...


def fail(spec: Named, rule: str, message: str) -> TemplateError:
    """The error for ``spec`` breaking ``rule`` (the caller raises it)."""
    return TemplateError(str(spec.name), rule, message)
