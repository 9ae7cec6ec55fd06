"""Hyperparameters: the rule a template sets on a knob callers may turn, and the checks on it.

``HyperparameterRule`` is the contract's ``overridable`` entry (a type plus bounds or
choices) and says why a value breaks it; ``check_override`` applies it to a caller's
value at submit time. The template rules on defaults, names and the total count (which
counts the keys the renderer adds for script mode and for each distribution kind) are in
``hyperparameter_rules``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .. import _rules as R
from ..contract.errors import ValidationError
from ._shapes import check_keys
from .distribution_kinds import KINDS

__all__ = [
    "DISTRIBUTION_KEYS",
    "RESERVED_HYPERPARAMETERS",
    "RESERVED_HYPERPARAMETER_PREFIX",
    "SCRIPT_MODE_KEYS",
    "HyperparameterRule",
    "check_override",
    "json_type",
]

# Hyperparameter keys the renderer owns; a template may not set them.
RESERVED_HYPERPARAMETERS = frozenset({"mp_parameters"})
RESERVED_HYPERPARAMETER_PREFIX = "sagemaker_"
# Script-mode keys added to every job, and the extra keys per distribution: the SageMaker
# Python SDK v2 estimator's encoding, which the Hugging Face training toolkit reads.
SCRIPT_MODE_KEYS = (
    "sagemaker_program",
    "sagemaker_submit_directory",
    "sagemaker_container_log_level",
    "sagemaker_job_name",
    "sagemaker_region",
)
# The keys each distribution kind renders (``distribution_kinds.KINDS``, the one table).
DISTRIBUTION_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: kind.keys for name, kind in KINDS.items()}
)


@dataclass(frozen=True, slots=True)
class HyperparameterRule:
    """What a caller may set one hyperparameter to: a type and either bounds or choices."""

    type: str
    min: int | float | None = None
    max: int | float | None = None
    choices: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.choices, list):
            object.__setattr__(self, "choices", tuple(self.choices))

    def to_dict(self) -> dict[str, Any]:
        """The contract's ``overridable`` entry: ``type`` plus ``min``/``max`` or ``choices``."""
        out: dict[str, Any] = {"type": self.type}
        if self.min is not None:
            out["min"] = self.min
        if self.max is not None:
            out["max"] = self.max
        if self.choices is not None:
            out["choices"] = list(self.choices)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, template: str = "?") -> HyperparameterRule:
        check_keys(template, "hyperparameter rule", d, ("type", "min", "max", "choices"), ("type",))
        choices = d.get("choices")
        return cls(
            type=d["type"],
            min=d.get("min"),
            max=d.get("max"),
            choices=tuple(choices) if isinstance(choices, (list, tuple)) else choices,
        )

    def problem(self) -> str | None:
        """Why this rule itself is malformed, or None."""
        if self.type not in R.HP_TYPES:
            return f"type must be one of {', '.join(R.HP_TYPES)}, got {self.type!r}"
        has_bounds = self.min is not None or self.max is not None
        if self.choices is not None and has_bounds:
            return "give either min/max or choices, not both"
        if self.type == "bool":
            if has_bounds or self.choices is not None:
                return "a bool rule takes neither min/max nor choices"
            return None
        if has_bounds:
            if self.type == "str":
                return "a str rule takes choices, not min/max"
            for bound in (self.min, self.max):
                if bound is None:
                    continue
                if self.type == "int" and type(bound) is not int:
                    return f"int bounds must be integers, got {bound!r}"
                if type(bound) not in (int, float) or not math.isfinite(bound):
                    return f"bounds must be finite numbers, got {bound!r}"
            if self.min is not None and self.max is not None and self.min > self.max:
                return f"min {self.min} is above max {self.max}"
        if self.choices is not None:
            if not isinstance(self.choices, tuple) or not self.choices:
                return "choices must be a non-empty list"
            for choice in self.choices:
                if self.violation(choice) is not None:
                    return f"choice {choice!r} is not a valid {self.type}"
            if len(set(self.choices)) != len(self.choices):
                return "choices must not repeat"
        return None

    def violation(self, value: Any) -> str | None:
        """Why ``value`` breaks this rule (phrase after the field name), or None."""
        t = type(value)
        kind = self.type
        if kind == "int":
            if t is not int:
                return f"must be an integer, got {json_type(value)}"
            if value.bit_length() > 63:
                return "is out of range for an integer"
        elif kind == "float":
            if t is not int and t is not float:
                return f"must be a number, got {json_type(value)}"
            if t is int and abs(value) > 2**1023:
                return "is out of range for a float"
            if t is float and not math.isfinite(value):
                return "must be a finite number"
        elif kind == "bool":
            if t is not bool:
                return f"must be true or false, got {json_type(value)}"
            return None
        elif kind == "str":
            if t is not str:
                return f"must be a string, got {json_type(value)}"
            if R.aws_len(value) > R.MAX_HYPERPARAMETER_LENGTH:
                return (
                    f"must be at most {R.MAX_HYPERPARAMETER_LENGTH} characters (UTF-16 code "
                    f"units), got {R.aws_len(value)}"
                )
        else:  # malformed rule; problem() reports it
            return f"has an unknown rule type {kind!r}"
        if self.choices is not None:
            if value not in self.choices:
                return f"must be one of {list(self.choices)}, got {R.show(value)}"
            return None
        lo, hi = self.min, self.max
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return f"must be between {_fmt_bound(lo)} and {_fmt_bound(hi)}, got {R.show(value)}"
        return None

    def coerce(self, value: Any) -> Any:
        """``value`` in its canonical form (float rules store floats); assumes it is valid."""
        if self.type == "float" and type(value) is int:
            return float(value)
        return value


def _fmt_bound(bound: Any) -> str:
    return "-inf" if bound is None else repr(bound)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    t = type(value)
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is float:
        return "number"
    if t is str:
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return t.__name__


def check_override(template: str, key: str, rule: HyperparameterRule, value: Any) -> Any:
    """A caller's value for ``key`` checked against ``rule``, in canonical form."""
    problem = rule.violation(value)
    field_name = f"hyperparameters.{key}"
    if problem is not None:
        raise ValidationError(field_name, f"{field_name} {problem} (template {template})")
    value = rule.coerce(value)
    encoded = R.encode_value(value)
    if len(encoded) > R.MAX_HYPERPARAMETER_LENGTH:
        raise ValidationError(
            field_name,
            f"{field_name} must encode to at most {R.MAX_HYPERPARAMETER_LENGTH} characters, got "
            f"{len(encoded)}",
        )
    return value
