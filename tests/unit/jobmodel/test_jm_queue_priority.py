"""Queue mode in the job model: template priorities, the request's ``priority`` and the
scheduler configuration the trigger reads (jobmodel.templates.spec, template_rules, request_parts,
scheduler)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobmodel as jm
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.names import ENV_JOB_QUEUE, ENV_QUEUE_SHARE_POLICY, ENV_SCHEDULER
from tests.unit.jobmodel.template_support import rule_of, spec_with

QUEUE_ARN = "arn:aws:batch:us-east-1:123456789012:job-queue/ftl-training"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def queued(payload: dict[str, Any], catalog: dict[str, jm.TemplateSpec], platform) -> Any:
    return jm.validate_submit(payload, catalog, platform, scheduler="queue")


# -- template fields ----------------------------------------------------------------------


def test_templates_default_to_priority_50_in_0_to_100(shipped) -> None:
    for spec in shipped.values():
        assert spec.queue_priority == 50
        assert spec.queue_priority_range == (0, 100)


def test_priority_fields_round_trip_and_show_in_the_template_view(shipped) -> None:
    spec = spec_with(shipped, "distilbert-spot", queue_priority=700, queue_priority_range=[10, 900])
    assert spec.queue_priority_range == (10, 900)  # a list from a catalog file becomes a tuple
    data = spec.to_dict()
    assert data["queue_priority"] == 700 and data["queue_priority_range"] == [10, 900]
    assert jm.TemplateSpec.from_dict(data) == spec
    view = spec.public_view()
    assert view["queue_priority"] == 700 and view["queue_priority_range"] == [10, 900]
    jm.validate_template(spec, require_image=False)


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"queue_priority": 101}, "queue_priority"),
        ({"queue_priority": -1, "queue_priority_range": (-1, 5)}, "queue_priority_range"),
        ({"queue_priority_range": (60, 40)}, "queue_priority_range"),
        ({"queue_priority": 9000, "queue_priority_range": (0, 10_000)}, "queue_priority_range"),
        ({"queue_priority": 5, "queue_priority_range": (10, 20)}, "queue_priority"),
        ({"queue_priority": True}, "queue_priority"),
        ({"queue_priority": "50"}, "queue_priority"),
        ({"queue_priority_range": (0, 50, 100)}, "queue_priority_range"),
        ({"queue_priority_range": (0, 100.0)}, "queue_priority_range"),
        ({"queue_priority_range": "0-100"}, "queue_priority_range"),
    ],
)
def test_bad_priority_settings_fail_synth_naming_template_and_field(
    shipped, changes: dict[str, Any], names: str
) -> None:
    spec = spec_with(shipped, "distilbert-spot", **changes)
    assert rule_of(spec) == "queue-priority"
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(spec, require_image=False)
    assert "distilbert-spot" in str(info.value) and names in info.value.message


def test_a_catalog_file_with_bad_priorities_is_refused(shipped) -> None:
    data = shipped["distilbert-spot"].to_dict()
    data["queue_priority_range"] = [0, 10_000]
    with pytest.raises(jm.TemplateError) as info:
        jm.load_catalog({"version": 1, "templates": [data]})
    assert info.value.rule == "queue-priority"


@SETTINGS
@given(
    low=st.integers(-5, 10_005),
    high=st.integers(-5, 10_005),
    default=st.integers(-5, 10_005),
)
def test_template_rule_holds_exactly_when_the_priorities_are_ordered(
    low: int, high: int, default: int
) -> None:
    spec = dataclasses.replace(
        jm.shipped_catalog()["distilbert-spot"],
        queue_priority=default,
        queue_priority_range=(low, high),
    )
    ordered = 0 <= low <= default <= high <= 9999
    try:
        jm.validate_template(spec, require_image=False)
    except jm.TemplateError as err:
        assert not ordered and err.rule == "queue-priority"
    else:
        assert ordered


# -- the request's priority ---------------------------------------------------------------


def test_queue_mode_applies_the_template_default(catalog, platform) -> None:
    req = queued({"template": "distilbert-spot"}, catalog, platform)
    assert req.priority == 50 and req.to_dict()["priority"] == 50


def test_queue_mode_accepts_the_range_edges(catalog, platform) -> None:
    for value in (0, 100):
        assert queued({"template": "distilbert-spot", "priority": value}, catalog, platform)


@pytest.mark.parametrize("value", [-1, 101, 9999, 2**70])
def test_queue_mode_refuses_a_priority_outside_the_templates_range(
    catalog, platform, value: int
) -> None:
    with pytest.raises(jm.ValidationError) as info:
        queued({"template": "distilbert-spot", "priority": value}, catalog, platform)
    assert info.value.field == "priority"
    if value != 2**70:
        assert info.value.message == (
            f"priority must be from 0 to 100 for template distilbert-spot, got {value}"
        )


@pytest.mark.parametrize("value", [True, False, "5", 5.0, [5], {"p": 5}])
def test_queue_mode_refuses_a_priority_that_is_not_an_integer(catalog, platform, value) -> None:
    with pytest.raises(jm.ValidationError) as info:
        queued({"template": "distilbert-spot", "priority": value}, catalog, platform)
    assert info.value.field == "priority" and "integer" in info.value.message


@pytest.mark.parametrize("value", [0, 50, True, "high"])
def test_direct_mode_refuses_any_priority(catalog, platform, value) -> None:
    with pytest.raises(jm.ValidationError) as info:
        jm.validate_submit({"template": "distilbert-spot", "priority": value}, catalog, platform)
    assert info.value.field == "priority"
    assert "ftl:scheduler = queue" in info.value.message


def test_direct_mode_request_is_unchanged_by_queue_mode(catalog, platform) -> None:
    """No priority in a direct request's form, so its fingerprint is what it always was."""
    req = jm.validate_submit({"template": "distilbert-spot", "priority": None}, catalog, platform)
    assert req.priority is None and "priority" not in req.to_dict()


def test_priority_is_part_of_a_queued_requests_identity(catalog, platform) -> None:
    one = queued({"template": "distilbert-spot", "priority": 10}, catalog, platform)
    two = queued({"template": "distilbert-spot", "priority": 11}, catalog, platform)
    default = queued({"template": "distilbert-spot"}, catalog, platform)
    explicit = queued({"template": "distilbert-spot", "priority": 50}, catalog, platform)
    assert one.fingerprint() != two.fingerprint()
    assert default.fingerprint() == explicit.fingerprint()


@SETTINGS
@given(
    low=st.integers(0, 9999),
    span=st.integers(0, 9999),
    pick=st.integers(0, 9999),
    value=st.one_of(st.integers(-20_000, 20_000), st.booleans(), st.none()),
)
def test_priority_rule(low: int, span: int, pick: int, value: Any) -> None:
    """Accepted exactly when an integer (not a bool) inside [low, high]; absent gives the
    template's default; the refusal names ``priority`` and the template's range."""
    high = min(9999, low + span)
    default = low + pick % (high - low + 1)
    spec = dataclasses.replace(
        jm.shipped_catalog()["distilbert-spot"],
        queue_priority=default,
        queue_priority_range=(low, high),
    )
    jm.validate_template(spec, require_image=False)
    catalog = {spec.name: spec}
    platform = jm.PlatformConfig(
        region="us-east-1",
        role_arn="arn:aws:iam::123456789012:role/train",
        data_bucket="ftl-data",
        checkpoint_bucket="ftl-ckpt",
        artifact_bucket="ftl-art",
        source_s3_uri="s3://ftl-art/source.tar.gz",
    )
    payload = {"template": spec.name, "priority": value}
    ok = value is None or (type(value) is int and low <= value <= high)
    try:
        req = queued(payload, catalog, platform)
    except jm.ValidationError as err:
        assert not ok and err.field == "priority"
        if type(value) is int:
            assert err.message == (
                f"priority must be from {low} to {high} for template {spec.name}, got {value}"
            )
    else:
        assert ok and req.priority == (default if value is None else value)
    # Direct mode never accepts one.
    if value is not None:
        with pytest.raises(jm.ValidationError):
            jm.validate_submit(payload, catalog, platform)


# -- the scheduler the trigger reads ------------------------------------------------------


def test_direct_is_the_default() -> None:
    cfg = SchedulerConfig.from_env({})
    assert cfg == SchedulerConfig() and not cfg.queued
    assert cfg.to_env() == {ENV_SCHEDULER: "direct"}
    assert SchedulerConfig.from_env({ENV_SCHEDULER: ""}) == cfg


@pytest.mark.parametrize("policy", ["fairshare", "quotashare"])
def test_queue_config_round_trips_through_the_environment(policy: str) -> None:
    cfg = SchedulerConfig(scheduler="queue", job_queue_arn=QUEUE_ARN, share_policy=policy)
    env = cfg.to_env()
    assert env == {
        ENV_SCHEDULER: "queue",
        ENV_JOB_QUEUE: QUEUE_ARN,
        ENV_QUEUE_SHARE_POLICY: policy,
    }
    assert SchedulerConfig.from_env(env) == cfg and cfg.queued
    assert SchedulerConfig.from_env({ENV_SCHEDULER: "queue", ENV_JOB_QUEUE: QUEUE_ARN}) == (
        SchedulerConfig(scheduler="queue", job_queue_arn=QUEUE_ARN)
    )


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({ENV_SCHEDULER: "batch"}, ENV_SCHEDULER),
        ({ENV_SCHEDULER: "Queue"}, ENV_SCHEDULER),
        ({ENV_SCHEDULER: "queue"}, ENV_JOB_QUEUE),
        ({ENV_SCHEDULER: "queue", ENV_JOB_QUEUE: "ftl-training"}, ENV_JOB_QUEUE),
        (
            {ENV_SCHEDULER: "queue", ENV_JOB_QUEUE: "arn:aws:batch:us-east-1:1:compute/x"},
            ENV_JOB_QUEUE,
        ),
        (
            {ENV_SCHEDULER: "queue", ENV_JOB_QUEUE: QUEUE_ARN, ENV_QUEUE_SHARE_POLICY: "fifo"},
            ENV_QUEUE_SHARE_POLICY,
        ),
    ],
)
def test_bad_scheduler_environment_names_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ValueError, match=variable):
        SchedulerConfig.from_env(env)


def test_bad_scheduler_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="job_queue_arn"):
        SchedulerConfig(scheduler="queue")
    with pytest.raises(ValueError, match="scheduler"):
        SchedulerConfig(scheduler="later")
    with pytest.raises(ValueError, match="share_policy"):
        SchedulerConfig(scheduler="queue", job_queue_arn=QUEUE_ARN, share_policy="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        SchedulerConfig().scheduler = "queue"  # type: ignore[misc]
