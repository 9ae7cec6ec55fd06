"""Hyperparameter rules: the contract's rule form and the template rules on hyperparameters
(jobmodel.templates.hyperparameters)."""

from __future__ import annotations

from typing import Any

import jobmodel as jm
from tests.unit.jobmodel.template_support import rule_cases, rule_of, spec_with


def test_hyperparameter_rule_dict_form_is_the_contracts() -> None:
    assert jm.HyperparameterRule("float", 1e-6, 1e-3).to_dict() == {
        "type": "float",
        "min": 1e-6,
        "max": 1e-3,
    }
    assert jm.HyperparameterRule("str", choices=("a", "b")).to_dict() == {
        "type": "str",
        "choices": ["a", "b"],
    }
    assert jm.HyperparameterRule("bool").to_dict() == {"type": "bool"}
    rule = jm.HyperparameterRule.from_dict({"type": "int", "choices": [1, 2]})
    assert rule.choices == (1, 2)


def _rule(**kwargs: Any) -> jm.HyperparameterRule:
    return jm.HyperparameterRule(**kwargs)


CASES: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "default-not-scalar",
        "bert-large-qa",
        {"hyperparameters": {"task": "qa", "layers": [1, 2]}},
        "hyperparameter-default",
    ),
    (
        "default-breaks-rule",
        "bert-large-qa",
        {"hyperparameters": {"learning_rate": 0.5}},
        "hyperparameter-default",
    ),
    (
        "default-wrong-type",
        "bert-large-qa",
        {"hyperparameters": {"num_train_epochs": 2.5}},
        "hyperparameter-default",
    ),
    (
        "rule-type",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="complex")}},
        "hyperparameter-rule",
    ),
    (
        "rule-min-max",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", min=5, max=1)}},
        "hyperparameter-rule",
    ),
    (
        "rule-both",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", min=1, choices=(1, 2))}},
        "hyperparameter-rule",
    ),
    (
        "rule-bool-bounds",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="bool", min=0)}},
        "hyperparameter-rule",
    ),
    (
        "rule-str-bounds",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="str", max=3)}},
        "hyperparameter-rule",
    ),
    (
        "rule-int-float-bound",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", max=2.5)}},
        "hyperparameter-rule",
    ),
    (
        "rule-empty-choices",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="str", choices=())}},
        "hyperparameter-rule",
    ),
    (
        "rule-bad-choice",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", choices=(1, "2"))}},
        "hyperparameter-rule",
    ),
    (
        "rule-nan",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="float", max=float("nan"))}},
        "hyperparameter-rule",
    ),
    (
        "reserved-default",
        "bert-large-qa",
        {"hyperparameters": {"sagemaker_program": "x.py"}},
        "hyperparameter-reserved",
    ),
    (
        "reserved-mp",
        "bert-large-qa",
        {"overridable": {"mp_parameters": _rule(type="str")}},
        "hyperparameter-reserved",
    ),
    (
        "value-too-long",
        "bert-large-qa",
        {"hyperparameters": {"task": "q" * 300}},
        "hyperparameter-length",
    ),
    (
        "too-many",
        "bert-large-qa",
        {"hyperparameters": {f"h{i}": i for i in range(93)}},
        "hyperparameter-count",
    ),
]


@rule_cases(CASES)
def test_every_rule_fires(
    shipped: dict[str, jm.TemplateSpec], base: str, changes: dict[str, Any], rule: str
) -> None:
    assert rule_of(spec_with(shipped, base, **changes)) == rule
