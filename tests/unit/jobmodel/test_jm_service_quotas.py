"""SageMaker service quotas (jobmodel.capacity.service_quotas): reading, shortfalls, chain steps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobmodel.capacity import service_quotas as SQ
from jobmodel.capacity.chain import Step
from jobmodel.capacity.plans import ON_DEMAND, PLAN, SPOT


def entry(name: str, code: str, value: object) -> dict[str, object]:
    return {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": code, "Value": value}


def quotas(**values: float) -> SQ.AccountQuotas:
    """``p4d=2`` -> on-demand ml.p4d.24xlarge 2; ``p4d_spot=0`` -> spot 0."""
    types = {"p4d": "ml.p4d.24xlarge", "p5": "ml.p5.48xlarge", "g5": "ml.g5.xlarge"}
    out = []
    for key, value in values.items():
        short, _, spot = key.partition("_")
        name = SQ.quota_name(types[short], spot=bool(spot))
        out.append(entry(name, f"L-{key.upper()}", value))
    return SQ.AccountQuotas.from_entries(out)


def test_quota_names_are_sagemakers() -> None:
    assert SQ.quota_name("ml.p4d.24xlarge", spot=False) == "ml.p4d.24xlarge for training job usage"
    assert (
        SQ.quota_name("ml.p4d.24xlarge", spot=True) == "ml.p4d.24xlarge for spot training job usage"
    )


def test_shortfall_names_quota_value_count_and_where_to_ask() -> None:
    q = quotas(p4d=2, p4d_spot=0)
    assert SQ.shortfall(q, "ml.p4d.24xlarge", 2, spot=False) is None
    short = SQ.shortfall(q, "ml.p4d.24xlarge", 4, spot=False)
    assert short is not None and short.field == "instance_count"
    message = short.message()
    assert "'ml.p4d.24xlarge for training job usage' (L-P4D) is 2" in message
    assert "4 x ml.p4d.24xlarge (on-demand)" in message
    assert "--service-code sagemaker --quota-code L-P4D --desired-value 4" in message
    assert "Service Quotas console" in message
    spot = SQ.shortfall(q, "ml.p4d.24xlarge", 1, spot=True)
    assert spot is not None and spot.field == "instance_type"
    assert "(spot)" in spot.message() and "L-P4D_SPOT" in spot.message()
    assert spot.to_dict()["quota_value"] == 0


def test_unlisted_quota_refuses_nothing() -> None:
    assert SQ.shortfall(quotas(p4d=2), "ml.g5.xlarge", 50, spot=True) is None


def test_not_adjustable_says_so() -> None:
    q = SQ.AccountQuotas.from_entries(
        [{**entry(SQ.quota_name("ml.g5.xlarge", spot=False), "L-X", 1), "Adjustable": False}]
    )
    short = SQ.shortfall(q, "ml.g5.xlarge", 2, spot=False)
    assert short is not None and "not adjustable" in short.message()


def test_malformed_entries_are_skipped() -> None:
    name = SQ.quota_name("ml.g5.xlarge", spot=False)
    bad = [
        entry(name, "L-1", "3"),
        entry(name, "L-1", True),
        entry(name, "L-1", -1),
        entry(name, "L-1", float("nan")),
        entry(name, "", 3),
        {"QuotaName": name, "Value": 3},
        {"QuotaCode": "L-1", "Value": 3},
        "not a dict",
    ]
    assert SQ.AccountQuotas.from_entries(bad).by_name == {}  # type: ignore[arg-type]


def test_filter_steps_drops_short_types_and_steps() -> None:
    q = quotas(p4d=4, p4d_spot=0, p5=0)
    steps = [
        Step(SPOT, ("ml.p4d.24xlarge",), 2),
        Step(ON_DEMAND, ("ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.xlarge"), 2),
        Step(PLAN, ("ml.p5.48xlarge",), 2, plan_arn="arn:plan", plan_name="p"),
    ]
    kept, skipped, shorts = SQ.filter_steps(steps, q)
    assert [s.kind for s in kept] == [ON_DEMAND, PLAN]
    assert kept[0].instance_types == ("ml.p4d.24xlarge", "ml.g5.xlarge")
    assert kept[1] == steps[2]  # plans are reserved capacity, not under these quotas
    assert len(skipped) == 2 and skipped[0].startswith("spot ml.p4d.24xlarge:")
    assert skipped[1].startswith("on-demand ml.p5.48xlarge:")
    assert {(s.instance_type, s.spot) for s in shorts} == {
        ("ml.p4d.24xlarge", True),
        ("ml.p5.48xlarge", False),
    }


def test_filter_steps_keeps_everything_within_quota() -> None:
    steps = [Step(ON_DEMAND, ("ml.p4d.24xlarge",), 4)]
    kept, skipped, shorts = SQ.filter_steps(steps, quotas(p4d=4))
    assert kept == steps and skipped == [] and shorts == []
    kept, _, _ = SQ.filter_steps(steps, quotas(p4d=3))
    assert kept == []


@settings(max_examples=200, deadline=None)
@given(
    value=st.one_of(st.integers(-5, 100), st.floats(allow_nan=True), st.none(), st.text()),
    count=st.integers(1, 64),
    spot=st.booleans(),
)
def test_shortfall_exactly_when_count_exceeds_a_valid_value(
    value: object, count: int, spot: bool
) -> None:
    name = SQ.quota_name("ml.g5.xlarge", spot=spot)
    q = SQ.AccountQuotas.from_entries([entry(name, "L-9", value)])
    short = SQ.shortfall(q, "ml.g5.xlarge", count, spot=spot)
    valid = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value == value
        and value not in (float("inf"),)
        and value >= 0
    )
    assert (short is not None) == (valid and count > float(value))  # type: ignore[arg-type]
    if short is not None:
        assert short.message() and short.field in ("instance_type", "instance_count")
