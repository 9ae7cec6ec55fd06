"""The queue's start estimate (jobmodel.capacity.queue_eta): properties of the upper bound, checked
against a simulation of the queue's rules, and the options that would start a job sooner."""

from __future__ import annotations

import heapq
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobmodel as jm
from ftl_ledger.job_codec import from_record
from jobmodel.capacity import queue_eta as E
from jobmodel.capacity.queue_eta import Holder, StartBound, hold_limit, sooner_options, start_bound

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = 1_800_000_000.0

capacities = st.integers(min_value=1, max_value=12)
limits = st.one_of(st.none(), st.integers(min_value=0, max_value=10_000).map(float))
known_limits = st.integers(min_value=0, max_value=10_000).map(float)


@st.composite
def queues(draw, limit=limits):
    """(capacity, running, ahead, instances): running jobs that fit the capacity together."""
    capacity = draw(capacities)
    running, left = [], capacity
    for _ in range(draw(st.integers(0, 5))):
        if left == 0:
            break
        count = draw(st.integers(1, left))
        left -= count
        held = draw(limit)  # started at most its limit ago: not overdue
        started = NOW - draw(st.integers(0, 5_000 if held is None else int(held)))
        running.append(Holder(count, held, started))
    ahead = [
        Holder(draw(st.integers(1, capacity)), draw(limit)) for _ in range(draw(st.integers(0, 6)))
    ]
    return capacity, running, ahead, draw(st.integers(1, capacity))


def bound(capacity, running, ahead, instances, allowance=0.0) -> StartBound:
    return start_bound(
        capacity=capacity,
        now_s=NOW,
        running=running,
        ahead=ahead,
        instances=instances,
        allowance_s=allowance,
    )


@SETTINGS
@given(queues())
def test_the_bound_is_never_before_now(q) -> None:
    got = bound(*q, allowance=E.HANDOVER_ALLOWANCE_S)
    assert got.at_s is None or got.at_s >= NOW
    assert (got.at_s is None) == (got.reason is not None)


@SETTINGS
@given(queues(), st.integers(0, 6), st.integers(1, 12), limits)
def test_one_more_job_ahead_never_makes_the_bound_earlier(q, where, count, limit) -> None:
    capacity, running, ahead, instances = q
    more = [*ahead]
    more.insert(min(where, len(ahead)), Holder(min(count, capacity), limit))
    before, after = (
        bound(capacity, running, ahead, instances),
        bound(capacity, running, more, instances),
    )
    if before.at_s is None:
        assert after.at_s is None
    elif after.at_s is not None:
        assert after.at_s >= before.at_s


@SETTINGS
@given(queues(limit=known_limits), st.integers(0, 4), st.integers(1, 5_000))
def test_a_longer_limit_never_makes_the_bound_earlier(q, which, extra) -> None:
    capacity, running, ahead, instances = q
    jobs = [*running, *ahead]
    if not jobs:
        return
    i = which % len(jobs)
    longer = [
        Holder(j.instances, j.limit_s + extra, j.started_s) if k == i else j
        for k, j in enumerate(jobs)
    ]
    short = bound(capacity, running, ahead, instances)
    long = bound(capacity, longer[: len(running)], longer[len(running) :], instances)
    assert short.at_s is not None and long.at_s is not None
    assert long.at_s >= short.at_s


@SETTINGS
@given(queues())
def test_fewer_instances_never_start_later(q) -> None:
    capacity, running, ahead, instances = q
    more = bound(capacity, running, ahead, instances)
    fewer = bound(capacity, running, ahead, max(1, instances - 1))
    if more.at_s is not None:
        assert fewer.at_s is not None and fewer.at_s <= more.at_s


@SETTINGS
@given(capacities, st.data())
def test_a_job_that_fits_now_with_nothing_ahead_starts_now(capacity, data) -> None:
    used = data.draw(st.integers(0, capacity - 1))
    running = [Holder(used, None, NOW - 10)] if used else []  # holds its instances for ever
    got = bound(capacity, running, [], capacity - used)
    assert got == StartBound(NOW)


@SETTINGS
@given(queues(limit=known_limits))
def test_known_limits_give_a_known_bound(q) -> None:
    got = bound(*q)
    assert got.at_s is not None, got


@SETTINGS
@given(queues(limit=known_limits), st.data())
def test_the_job_starts_by_the_bound_whatever_the_jobs_actually_run(q, data) -> None:
    """Simulate the queue's rules with run times up to each job's limit: the job starts by
    the bound (the property that makes it an upper bound)."""
    capacity, running, ahead, instances = q
    got = bound(capacity, running, ahead, instances)
    ends = []
    for job in running:
        ran = data.draw(st.floats(0, 1)) * job.limit_s
        ends.append((max(NOW, job.started_s + ran), job.instances))
    actual = [data.draw(st.floats(0, 1)) * j.limit_s for j in ahead]
    start = simulate(
        capacity, ends, [(j.instances, r) for j, r in zip(ahead, actual, strict=True)], instances
    )
    assert start <= got.at_s + 1e-6


def simulate(capacity, ends, waiting, instances) -> float:
    """In-order dispatch with no backfill; returns when the last job (``instances``) starts."""
    heap = list(ends)
    heapq.heapify(heap)
    held, t = sum(c for _, c in heap), NOW
    for count, runs in [*waiting, (instances, 0.0)]:
        while capacity - held < count:
            end, freed = heapq.heappop(heap)
            t, held = max(t, end), held - freed
        heapq.heappush(heap, (t + runs, count))
        held += count
    return t


# -- unknown, with the reason ----------------------------------------------------------------


def test_unknown_capacity_running_or_ahead_limit_says_why() -> None:
    assert bound(None, [], [], 1).reason == E.UNKNOWN_CAPACITY
    blocked = bound(2, [Holder(2, None, NOW - 5)], [], 1)
    assert blocked == StartBound(None, E.UNKNOWN_RUNNING)
    behind = bound(2, [], [Holder(2, None)], 1)
    assert behind == StartBound(None, E.UNKNOWN_AHEAD)
    assert bound(2, [], [Holder(3, 60.0)], 1).reason == E.TOO_BIG_AHEAD
    assert "can never start" in (bound(2, [], [], 3).reason or "")
    # a running job past its limit (and the allowance) may hold its instances any longer
    overdue = start_bound(
        capacity=2, now_s=NOW, running=[Holder(2, 60.0, NOW - 2000)], ahead=[], instances=1
    )
    assert overdue == StartBound(None, E.OVERDUE_RUNNING)


def test_a_bound_counts_the_allowance_and_the_jobs_ahead_in_order() -> None:
    running = [Holder(2, 3600.0, NOW - 600)]  # ends by NOW + 3000 + allowance
    got = start_bound(capacity=3, now_s=NOW, running=running, ahead=[Holder(2, 100.0)], instances=1)
    # the job ahead needs 2 of the 1 free: it starts when the running job ends; ours fits
    # beside it (1 free) but never before it
    assert got.at_s == NOW + 3000 + E.HANDOVER_ALLOWANCE_S
    assert got.iso is not None and got.iso.endswith("Z")


def test_hold_limit_is_max_wait_for_spot_else_max_runtime() -> None:
    stop = {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert hold_limit({"StoppingCondition": stop, "EnableManagedSpotTraining": True}) == 7200
    assert hold_limit({"StoppingCondition": stop}) == 3600
    assert hold_limit({}) is None
    assert hold_limit({"StoppingCondition": {"MaxRuntimeInSeconds": "x"}}) is None


# -- sooner ----------------------------------------------------------------------------------


def spec(name: str) -> jm.TemplateSpec:
    return jm.shipped_catalog()[name]


def job(**extra):
    return from_record(
        {"instance_type": "ml.p4d.24xlarge", "instance_count": 4, "spot": False, **extra}
    )


def options(j, template="bert-large-qa", *, running=(), others=(), reason=None, capacity=4):
    current = bound(capacity, list(running), list(others), j.instance_count)
    return sooner_options(
        job=j,
        spec=spec(template),
        current=current,
        capacity=capacity,
        now_s=NOW,
        running=list(running),
        others=list(others),
        batch_reason=reason,
        allowance_s=0,
    )


def test_fewer_instances_the_largest_that_starts_earlier_and_the_largest_that_starts_now() -> None:
    # 4 instances; 2 run for another hour, 1 more for two hours: 1 free now
    running = [Holder(2, 3600.0, NOW), Holder(1, 7200.0, NOW)]
    got = options(job(), running=running)
    assert [o["request"] for o in got] == [{"instance_count": 3}, {"instance_count": 1}]
    assert got[0]["estimated_start_by"] == StartBound(NOW + 3600).iso
    assert got[1]["estimated_start_by"] == StartBound(NOW).iso
    assert all(o["option"] == "fewer_instances" for o in got)


def test_no_fewer_instances_when_nothing_is_earlier_or_the_queue_is_not_all_listed() -> None:
    running = [Holder(4, 3600.0, NOW)]  # every count waits for the same end
    assert options(job(), running=running) == []
    got = sooner_options(
        job=job(),
        spec=spec("bert-large-qa"),
        current=StartBound(None, "x"),
        capacity=4,
        now_s=NOW,
        running=[],
        others=None,
        batch_reason=None,
    )
    assert got == []


def test_other_types_only_when_sagemaker_has_no_capacity_of_the_type() -> None:
    reason = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - no capacity"
    got = options(job(instance_count=2), reason=reason, capacity=2)
    (other,) = [o for o in got if o["option"] == "other_instance_type"]
    # multi-node smddp: EFA and smddp types of the template, not the job's own
    assert other["instance_types"] == ["ml.p4de.24xlarge", "ml.p3dn.24xlarge"]
    assert other["request"] == {"instance_type": "ml.p4de.24xlarge"}
    assert not [
        o
        for o in options(job(instance_count=2), capacity=2)
        if o["option"] == "other_instance_type"
    ]


def test_on_demand_for_a_spot_job_only() -> None:
    got = options(job(spot=True, instance_count=1), template="distilbert-spot")
    assert [o["request"] for o in got] == [{"spot": False}]
    assert options(job(instance_count=1), template="distilbert-spot") == []


def test_options_keep_within_the_template() -> None:
    # distilbert-spot runs on one instance only: nothing fewer to offer
    j = job(instance_type="ml.g5.xlarge", instance_count=1)
    got = options(j, template="distilbert-spot", running=[Holder(4, 60.0, NOW)])
    assert got == []
    assert math.isfinite(bound(4, [Holder(4, 60.0, NOW)], [], 1).at_s or math.inf)
