"""Helpers the template test modules share (hyperparameters, template rules, catalog)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import jobmodel as jm


def rule_cases(cases: list[tuple[str, str, dict[str, Any], str]]) -> Any:
    """Parametrize a test over ``(id, base template, changes, rule id)`` cases."""
    return pytest.mark.parametrize(
        ("base", "changes", "rule"), [c[1:] for c in cases], ids=[c[0] for c in cases]
    )


def spec_with(shipped: dict[str, jm.TemplateSpec], base: str, /, **changes: Any) -> jm.TemplateSpec:
    """A copy of the shipped template ``base`` with ``changes`` applied."""
    return dataclasses.replace(shipped[base], **changes)


def rule_of(spec: jm.TemplateSpec, *, require_image: bool = False) -> str:
    """The rule id ``validate_template`` refuses ``spec`` with (it must refuse it)."""
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(spec, require_image=require_image)
    assert spec.name in str(info.value) or info.value.template == str(spec.name)
    assert info.value.rule in str(info.value)
    return info.value.rule
