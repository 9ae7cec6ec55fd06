"""The gate (issue 36): an evaluation's metrics, its policy and the latest Approved version's
metrics -> Approved, PendingManualApproval or Rejected, with the reason."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from jobmodel.evaluation.gate import APPROVED, MAX_REASON, PENDING, REJECTED, verdict
from jobmodel.templates.evaluation_policy import EvaluationPolicy


def _policy(*gate: dict, approve: bool = False) -> EvaluationPolicy:
    return EvaluationPolicy.from_dict(
        {"task_metrics": {"channel": "validation"}, "gate": list(gate), "approve_on_pass": approve}
    )


FLOOR = {"metric": "eval_f1", "min": 80}
REGRESS = {"metric": "eval_f1", "max_regression": 1.0}
PPL = {"metric": "eval_perplexity", "max": 20, "max_regression": 2}


def test_a_floor_rejects_below_and_passes_at_or_above():
    below = verdict({"eval_f1": 79.5}, _policy(FLOOR))
    assert below.status == REJECTED and "eval_f1 79.5 is below the minimum 80" in below.reason
    assert below.failed == ("eval_f1",)
    assert verdict({"eval_f1": 80.0}, _policy(FLOOR)).status == PENDING
    assert verdict({"eval_f1": 80.0}, _policy(FLOOR, approve=True)).status == APPROVED


def test_a_regression_against_the_approved_version_is_rejected_a_small_dip_is_not():
    policy = _policy(REGRESS)
    planted = verdict({"eval_f1": 85.0}, policy, {"eval_f1": 88.0})
    assert planted.status == REJECTED and "3 worse than the Approved version's 88" in planted.reason
    assert verdict({"eval_f1": 87.5}, policy, {"eval_f1": 88.0}).status == PENDING
    assert verdict({"eval_f1": 90.0}, policy, {"eval_f1": 88.0}).status == PENDING


def test_lower_is_better_metrics_regress_upwards():
    policy = _policy(PPL)
    assert verdict({"eval_perplexity": 12.0}, policy, {"eval_perplexity": 11.0}).status == PENDING
    worse = verdict({"eval_perplexity": 14.0}, policy, {"eval_perplexity": 11.0})
    assert worse.status == REJECTED and "worse" in worse.reason
    assert verdict({"eval_perplexity": 25.0}, policy).status == REJECTED  # above max


def test_without_a_baseline_the_regression_check_passes_and_says_so():
    first = verdict({"eval_f1": 70.0}, _policy(REGRESS, approve=True))
    assert first.status == APPROVED and "no Approved baseline for eval_f1" in first.reason
    other = verdict({"eval_f1": 70.0}, _policy(REGRESS), {"eval_accuracy": 0.9})
    assert other.status == PENDING and "no Approved baseline" in other.reason


def test_a_failed_or_incomplete_evaluation_leaves_the_version_pending_and_says_why():
    failed = verdict(None, _policy(FLOOR), failure="AlgorithmError: out of memory")
    assert failed.status == PENDING and "out of memory" in failed.reason
    for bad in ({}, {"eval_f1": math.nan}, {"eval_f1": "85"}, {"eval_f1": True}):
        missing = verdict(bad, _policy(FLOOR, approve=True))
        assert missing.status == PENDING and "no value for eval_f1" in missing.reason


def test_every_failed_check_is_in_the_reason_and_no_gate_means_review():
    policy = _policy(FLOOR, {"metric": "eval_exact_match", "min": 70})
    both = verdict({"eval_f1": 1.0, "eval_exact_match": 2.0}, policy)
    assert both.failed == ("eval_f1", "eval_exact_match") and both.reason.count("below") == 2
    assert verdict({"eval_f1": 1.0}, _policy()).status == PENDING


_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.none(), st.text(max_size=3), st.booleans()
)


@settings(max_examples=300, deadline=None)
@given(
    value=_value,
    base=_value,
    floor=st.one_of(st.none(), st.floats(-1e6, 1e6)),
    regression=st.one_of(st.none(), st.floats(0, 1e6)),
    higher=st.booleans(),
    approve=st.booleans(),
    failure=st.one_of(st.none(), st.text(max_size=2000)),
)
def test_the_verdict_follows_the_rules_for_any_input(
    value, base, floor, regression, higher, approve, failure
):
    gated = {"metric": "eval_f1", "higher_is_better": higher}
    if floor is None and regression is None:
        floor = 0.0
    if floor is not None:
        gated["min"] = floor
    if regression is not None:
        gated["max_regression"] = regression
    policy = _policy(gated, approve=approve)
    result = verdict({"eval_f1": value}, policy, {"eval_f1": base}, failure=failure)
    assert result.status in (APPROVED, PENDING, REJECTED)
    assert 0 < len(result.reason) <= MAX_REASON
    finite = isinstance(value, float) and math.isfinite(value)
    if failure is not None or not finite:
        assert result.status == PENDING and not result.failed
        return
    base_ok = isinstance(base, float) and math.isfinite(base)
    worse = None if not base_ok else (base - value if higher else value - base)
    fails = (floor is not None and value < floor) or (
        regression is not None and worse is not None and worse > regression
    )
    assert (result.status == REJECTED) == fails
    if not fails:
        assert result.status == (APPROVED if approve else PENDING)
