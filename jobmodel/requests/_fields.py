"""Reading one field of a JSON request: optional fields, booleans, patterned strings, integers
in range, objects, and the sorted keys and ``field.key`` names that error messages use
(``submit_parts`` uses them); and the types of ``submit_fields``'s table (a row, its
``ftl submit`` flag, the submit being read) with the generic readers a row may name."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from re import Pattern
from typing import TYPE_CHECKING, Any

from .. import _rules as R
from ..contract.errors import ValidationError
from ..templates.hyperparameters import json_type as _json_type

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..after_training.tracking import TrackingConfig
    from ..platform import PlatformConfig
    from ..teams import Team
    from ..templates.spec import TemplateSpec


def opt(payload: Mapping[str, Any], key: str) -> Any:
    """An optional field: absent and JSON null both mean 'use the default'."""
    return payload.get(key)


def boolean(payload: Mapping[str, Any], field_name: str, default: bool) -> bool:
    """An optional ``true``/``false`` field; ``default`` when absent."""
    value = opt(payload, field_name)
    if value is None:
        return default
    if type(value) is not bool:
        raise ValidationError(
            field_name, f"{field_name} must be true or false, got {_json_type(value)}"
        )
    return value


def patterned(
    payload: Mapping[str, Any], field_name: str, pattern: Pattern[str], rule: str
) -> str | None:
    """An optional string the whole of which matches ``pattern``; ``rule`` says it in words
    (``"<field> must be <rule>, got <value>"``). None when absent."""
    value = opt(payload, field_name)
    if value is not None and (type(value) is not str or pattern.fullmatch(value) is None):
        raise ValidationError(field_name, f"{field_name} must be {rule}, got {R.show(value)}")
    return value


def require_int(field_name: str, value: Any) -> int:
    if type(value) is int and value.bit_length() > 63:
        raise ValidationError(field_name, f"{field_name} is out of range, got {R.show(value)}")
    if type(value) is not int:
        raise ValidationError(
            field_name, f"{field_name} must be an integer, got {_json_type(value)}"
        )
    return value


def bounded_int(
    payload: Mapping[str, Any], field_name: str, default: int, high: int, template: str
) -> int:
    """An optional integer field from 1 to ``high``; the template's default when absent."""
    value = opt(payload, field_name)
    if value is None:
        return default
    number = require_int(field_name, value)
    if not 1 <= number <= high:
        raise ValidationError(
            field_name,
            f"{field_name} must be between 1 and {high} for template {template}, got {number}",
        )
    return number


def require_mapping(field_name: str, value: Any) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(
            field_name, f"{field_name} must be an object, got {_json_type(value)}"
        )
    return value


def sorted_keys(mapping: Mapping[Any, Any]) -> list[Any]:
    return sorted(mapping, key=lambda k: (type(k) is not str, str(k)))


def sub(field_name: str, key: Any) -> str:
    """``field.key`` for error fields, with the key cut to a sane length."""
    text = key if type(key) is str else str(key)
    return f"{field_name}.{text[:100]}"


@dataclass
class Reading:
    """One submit being read: what it is checked against, the template once ``template`` is
    read, and every field's value read so far (by field name)."""

    payload: Mapping[str, Any]
    catalog: Mapping[str, TemplateSpec]
    platform: PlatformConfig
    team: Team | None
    queued: bool  # the platform's scheduler is ``queue``
    queue_capacity: int | None
    tracking: TrackingConfig | None = (
        None  # the platform's MLflow servers (jobmodel.after_training.tracking)
    )
    template: TemplateSpec | None = None
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> TemplateSpec:
        assert self.template is not None, "the template row comes before the rows that use it"
        return self.template


Read = Callable[[Reading, str], Any]  # (the submit, the field's name) -> the field's value


@dataclass(frozen=True, kw_only=True)
class CliFlag:
    """A field's ``ftl submit`` flag. ``flag`` is ``--name`` (or a bare name: the positional
    argument); ``value`` says how ``ftl`` reads it: ``text``, ``int``, ``duration`` (seconds
    or ``90m``/``10h``/``2d``), ``pairs`` (repeatable ``KEY=VALUE``, an object), ``json-pairs``
    (the same with JSON values), ``list`` (repeatable), ``bool`` (``--x``/``--no-x``) or
    ``switch`` (``--x`` sends ``true``). ``dest`` is argparse's attribute when not the
    flag's own."""

    flag: str
    help: str
    metavar: str | None = None
    value: str = "text"
    dest: str | None = None


@dataclass(frozen=True, kw_only=True)
class SubmitField:
    """One submit field (``submit_fields``' docstring). ``form``: whether ``to_dict`` (the
    request the ledger records) holds it: ``always``, ``when set`` (left out while its value is
    ``omit``, None unless said, so the forms and fingerprints recorded before the field
    existed are unchanged: new fields use this; one whose reader applies a fixed default sets
    ``omit`` to that default) or ``never``. ``fingerprint``: whether, when in the form, it is
    part of the request's identity. ``http``: whether an HTTP body may carry it. ``schema``:
    more JSON Schema keywords than the type. ``attribute``: the ``SubmitRequest`` attribute
    when not ``name``; ``kept=False``: checked only."""

    name: str
    json_type: str
    rule: str
    read: Read
    required: bool = False
    cli: CliFlag | None = None
    attribute: str | None = None
    kept: bool = True
    form: str = "when set"
    omit: Any = None
    fingerprint: bool = True
    http: bool = True
    schema: Mapping[str, Any] = field(default_factory=dict)

    @property
    def attr(self) -> str:
        return self.attribute or self.name


# -- generic readers of a row (``read``) ----------------------------------------------------


def switch(default: bool) -> Read:
    """``true``/``false``; ``default`` when absent."""
    return lambda r, name: boolean(r.payload, name, default)


def matching(pattern: str, rule: str) -> Read:
    """A string matching ``pattern`` (``"<field> must be <rule>"`` when not); None when absent."""
    compiled = re.compile(pattern)
    return lambda r, name: patterned(r.payload, name, compiled, rule)


def up_to(default: Callable[[TemplateSpec], int], high: Callable[[TemplateSpec], int]) -> Read:
    """An integer from 1 to the template's ``high``; the template's ``default`` when absent."""
    return lambda r, name: bounded_int(r.payload, name, default(r.spec), high(r.spec), r.spec.name)
