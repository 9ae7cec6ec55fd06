"""SweepRequest validation and the worst-case price check (issue 37)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobmodel.contract.errors import ValidationError
from jobmodel.sweeps import check_worst_case, parse_sweep, worst_case_usd
from jobmodel.templates.catalog import shipped_catalog


def _spec_and_float():
    for spec in shipped_catalog().values():
        for name, rule in spec.overridable.items():
            if (
                rule.type == "float"
                and rule.min is not None
                and rule.max is not None
                and spec.metrics
            ):
                return spec, name, rule
    pytest.skip("no shipped template with a bounded float hyperparameter and metrics")


def _payload(spec, name, low, high, **extra):
    base = {
        "ranges": {name: {"min": low, "max": high}},
        "objective": spec.metrics[0],
        "max_trials": 4,
        "max_parallel": 2,
        "cap_usd": 10_000,
    }
    base.update(extra)
    return base


def test_a_range_inside_the_bounds_is_accepted():
    spec, name, rule = _spec_and_float()
    req = parse_sweep(spec, _payload(spec, name, rule.min, rule.max))
    assert req.ranges[0].kind == "continuous" and req.max_trials == 4


@given(st.floats(min_value=1e-3, max_value=1e6))
def test_a_range_end_beyond_the_bound_is_refused_naming_the_field(extra):
    spec, name, rule = _spec_and_float()
    with pytest.raises(ValidationError) as err:
        parse_sweep(spec, _payload(spec, name, rule.min, rule.max + extra))
    assert err.value.field == f"ranges.{name}"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"strategy": "Grid"}, "strategy"),
        ({"strategy": "Hyperband", "early_stopping": "Auto"}, "early_stopping"),
        ({"max_trials": 0}, "max_trials"),
        ({"max_parallel": 5}, "max_parallel"),
        ({"cap_usd": -1}, "cap_usd"),
        ({"objective": "not-a-metric"}, "objective"),
        ({"instance_count": 10_000}, "instance_count"),
    ],
)
def test_each_rule_names_its_field(extra, field):
    spec, name, rule = _spec_and_float()
    with pytest.raises(ValidationError) as err:
        parse_sweep(spec, _payload(spec, name, rule.min, rule.max, **extra))
    assert err.value.field == field


def test_an_unknown_hyperparameter_is_refused():
    spec, name, rule = _spec_and_float()
    payload = _payload(spec, name, rule.min, rule.max)
    payload["ranges"] = {"not_overridable_xyz": {"min": 0, "max": 1}}
    with pytest.raises(ValidationError, match="not an overridable"):
        parse_sweep(spec, payload)


@given(st.integers(1, 50), st.floats(0.1, 50.0))
def test_the_worst_case_is_trials_times_each_trials_max_cost(trials, hourly):
    spec, name, rule = _spec_and_float()
    req = parse_sweep(
        spec, _payload(spec, name, rule.min, rule.max, max_trials=trials, max_parallel=1)
    )
    worst = worst_case_usd(req, hourly, 3600)
    assert worst == pytest.approx(trials * req.instance_count * hourly, abs=1e-3)


def test_the_worst_case_is_refused_over_each_limit():
    spec, name, rule = _spec_and_float()
    req = parse_sweep(spec, _payload(spec, name, rule.min, rule.max, cap_usd=100))
    check_worst_case(req, 50, per_job_cap_usd=60, month_left_usd=70)
    for kwargs in (
        {"per_job_cap_usd": 40, "month_left_usd": None},
        {"per_job_cap_usd": None, "month_left_usd": 40},
    ):
        with pytest.raises(ValidationError):
            check_worst_case(req, 50, **kwargs)
    with pytest.raises(ValidationError, match="sweep's cap_usd"):
        check_worst_case(req, 150, per_job_cap_usd=None, month_left_usd=None)


def test_categorical_values_must_each_be_valid():
    spec = shipped_catalog()["llm-lora"]
    rule = spec.overridable["lr_scheduler_type"]
    good = list(rule.choices or ("linear",))[:2]
    base = _payload(spec, "learning_rate", 1e-5, 1e-4)
    base["ranges"] = {"lr_scheduler_type": {"values": good}}
    assert parse_sweep(spec, base).ranges[0].kind == "categorical"
    base["ranges"] = {"lr_scheduler_type": {"values": [*good, 12345]}}
    with pytest.raises(ValidationError) as err:
        parse_sweep(spec, base)
    assert err.value.field == "ranges.lr_scheduler_type"


def test_a_str_hyperparameter_takes_no_min_max():
    spec = shipped_catalog()["llm-lora"]
    base = _payload(spec, "learning_rate", 1e-5, 1e-4)
    base["ranges"] = {"lr_scheduler_type": {"min": 0, "max": 1}}
    with pytest.raises(ValidationError, match="give values"):
        parse_sweep(spec, base)
