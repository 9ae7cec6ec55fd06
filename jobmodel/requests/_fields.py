"""Reading one field of a JSON request: optional fields, integers in range, objects, and the
sorted keys and ``field.key`` names that error messages use (``submit_parts`` uses them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _rules as R
from ..contract.errors import ValidationError
from ..templates.hyperparameters import json_type as _json_type


def opt(payload: Mapping[str, Any], key: str) -> Any:
    """An optional field: absent and JSON null both mean 'use the default'."""
    return payload.get(key)


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
