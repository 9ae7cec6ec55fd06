"""Template rules on hyperparameters: defaults, names, reserved keys, lengths and the count.

``check_hyperparameters`` is run by ``validate_template`` (``rules``). It counts the keys
the renderer adds for script mode and for each distribution kind
(``hyperparameters.SCRIPT_MODE_KEYS``, ``DISTRIBUTION_KEYS``) towards SageMaker's limit.
"""

from __future__ import annotations

from typing import Any

from .. import _rules as R
from ._shapes import fail
from .hyperparameters import (
    DISTRIBUTION_KEYS,
    RESERVED_HYPERPARAMETER_PREFIX,
    RESERVED_HYPERPARAMETERS,
    SCRIPT_MODE_KEYS,
)
from .spec import TemplateSpec

__all__ = ["check_hyperparameters"]


def _check_name(spec: TemplateSpec, key: Any, rule: str, what: str) -> None:
    if type(key) is not str or not key:
        raise fail(spec, rule, f"{what} names must be non-empty strings, got {key!r}")


def check_hyperparameters(spec: TemplateSpec) -> None:
    """Defaults and rules of ``spec``: rule ids ``hyperparameter-default``,
    ``hyperparameter-rule``, ``hyperparameter-reserved``, ``hyperparameter-length``,
    ``hyperparameter-count`` (the platform's own keys count towards SageMaker's limit)."""
    keys = set()
    for key, value in spec.hyperparameters.items():
        _check_name(spec, key, "hyperparameter-default", "hyperparameter")
        if not R.is_json_scalar(value):
            raise fail(
                spec,
                "hyperparameter-default",
                f"default for {key} must be a JSON scalar, got {value!r}",
            )
        keys.add(key)
    for key, rule in spec.overridable.items():
        _check_name(spec, key, "hyperparameter-rule", "overridable")
        problem = rule.problem()
        if problem is not None:
            raise fail(spec, "hyperparameter-rule", f"rule for {key}: {problem}")
        if key in spec.hyperparameters:
            violation = rule.violation(spec.hyperparameters[key])
            if violation is not None:
                raise fail(spec, "hyperparameter-default", f"default for {key} {violation}")
        keys.add(key)
    for key in keys:
        if key.startswith(RESERVED_HYPERPARAMETER_PREFIX) or key in RESERVED_HYPERPARAMETERS:
            raise fail(
                spec, "hyperparameter-reserved", f"hyperparameter {key} is set by the platform"
            )
        if R.aws_len(key) > R.MAX_HYPERPARAMETER_LENGTH:
            raise fail(
                spec, "hyperparameter-length", f"hyperparameter name {key[:40]}... is too long"
            )
    for key, value in spec.hyperparameters.items():
        encoded = R.encode_value(value)
        if len(encoded) > R.MAX_HYPERPARAMETER_LENGTH:
            raise fail(
                spec,
                "hyperparameter-length",
                f"default for {key} encodes to {len(encoded)} characters (max 256)",
            )
    total = (
        len(keys) + len(SCRIPT_MODE_KEYS) + len(DISTRIBUTION_KEYS.get(spec.distribution.kind, ()))
    )
    if total > R.MAX_HYPERPARAMETERS:
        raise fail(
            spec,
            "hyperparameter-count",
            f"{total} hyperparameters including the platform's keys; SageMaker allows "
            f"{R.MAX_HYPERPARAMETERS}",
        )
