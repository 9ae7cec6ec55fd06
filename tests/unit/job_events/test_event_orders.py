"""Events arrive in any order and any number of times (EventBridge promises neither order nor
exactly-once): every order of a queued job's realistic life gives the same ledger item, gives
the team's usage back once with the job's cost, announces once, and a replay changes nothing.

All 720 orders run through the function's own rules (parse, then ``jobmodel.jobs.record.plan``: the
one writer's merge and settlement) in memory; a
sample of them runs through the handler against moto (each order takes a few dozen DynamoDB
calls): the natural order, its reverse, and 30 drawn with a fixed seed, in which every event
comes at every position and before every other event."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from ftl_events.parse import parse
from ftl_ledger.job_codec import from_record
from jobmodel.contract.statuses import TERMINAL_STATUSES
from jobmodel.jobs.notifications import is_notice
from jobmodel.jobs.record import Change, plan
from tests.unit.job_events.sequences import life, training_name

# Attributes that record when and how often the item was written, not what it says.
BOOKKEEPING = {"updated_at", "revision", "team"}
ORDERS = list(itertools.permutations(range(6)))  # all 720
SAMPLE = [ORDERS[0], ORDERS[-1], *random.Random(0).sample(ORDERS[1:-1], 30)]


class Published:
    """Stands in for the SNS client: counts announcements (SNS itself: the other tests)."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    def publish(self, **kwargs) -> dict:
        message = json.loads(kwargs["Message"])
        if message["event"] == "ended":  # the starts are notified too
            self.messages.append(message)
        return {"MessageId": "m"}


def _put(events, name: str, team: str) -> None:
    events.put_job(
        name,
        status="Submitting",
        team=team,
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        price_usd_per_hour=30.0,
        estimated_max_cost_usd=60.0,
    )
    events.put_usage(team, events.month(), instances=2, reserved=60.0)


def _state(item: dict, name: str) -> dict:
    """The item with the job's own name replaced (and its team left out), so different jobs
    compare."""
    text = json.dumps({k: v for k, v in item.items() if k not in BOOKKEEPING}, sort_keys=True)
    return json.loads(text.replace(training_name(name), "TRAINING").replace(name, "JOB"))


def _metrics(lines: list[str]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in lines:
        doc = json.loads(line)
        for metric in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            totals[metric["Name"]] = totals.get(metric["Name"], 0) + doc[metric["Name"]]
    return totals


@pytest.fixture
def published(events, monkeypatch) -> Published:
    fake = Published()
    monkeypatch.setattr(events.runtime, "sns", fake)
    return fake


def _run(events, published, prefix, capsys, order, index):
    name = f"{prefix}-{index}"
    team = f"team{index}"
    _put(events, name, team)
    sequence = life(name)
    for event in sequence:  # Batch queued the job in its team's share
        if event["source"] == "aws.batch":
            event["detail"]["shareIdentifier"] = team
    capsys.readouterr()
    before = len(published.messages)
    for i in order:
        events(sequence[i])
    lines = capsys.readouterr().out.splitlines()
    announced = published.messages[before:]
    # A replay of everything, in order, changes, announces and publishes nothing.
    replayed = [events(event)["updated"] for event in sequence]
    assert replayed == [False] * 6, order
    assert capsys.readouterr().out == "" and len(published.messages) == before + 1
    return events.job(name), events.usage(team), lines, announced, name


def _settle_in_memory(order: tuple[int, ...]) -> tuple[dict, dict[str, float], int]:
    """Fold the events in ``order`` with the function's rules: the final job, the team's
    usage changes and how many changes ended the job."""
    job = {"job_name": "job", "status": "Submitting", "team": "nlp", "instance_count": 2}
    job.update(price_usd_per_hour=30.0, estimated_max_cost_usd=60.0)
    usage = {"releases": 0, "spend": 0.0}
    ends = 0
    sequence = [parse(event) for event in life("job")]
    for i in [*order, *range(6)]:  # then a replay of everything
        write = plan(job, Change(sequence[i].update), stamp="now", read=from_record)
        if write is None:
            continue
        after = write.after
        usage["releases"] += write.release
        usage["spend"] += (write.cost or 0) if write.release else 0
        usage["spend"] += write.add_spend or 0
        ends += after["status"] in TERMINAL_STATUSES and job["status"] not in TERMINAL_STATUSES
        job = after
    # A start notice is owed only where the order saw the job start before it ended
    # (jobmodel.jobs.notifications): the end's announcement is owed in every order.
    owed = {k: v for k, v in job.get("owed_effects", {}).items() if not is_notice(k)}
    return {**job, "owed_effects": owed}, usage, ends


def test_every_order_settles_the_same_with_the_functions_rules():
    reference = _settle_in_memory(ORDERS[0])
    job, usage, ends = reference
    assert job["status"] == "Completed" and job["cost_usd"] == 20.0 and ends == 1
    assert usage == {"releases": 1, "spend": 20.0} and job["usage_spend_usd"] == 20.0
    for order in ORDERS[1:]:
        assert _settle_in_memory(order) == reference, order


def test_orders_through_the_handler_give_the_same_record(events, published, prefix, capsys):
    reference = None
    positions = {(event, at) for order in SAMPLE for at, event in enumerate(order)}
    before = {(o[i], o[j]) for o in SAMPLE for i in range(6) for j in range(i + 1, 6)}
    assert len(positions) == 36 and len(before) == 30
    for index, order in enumerate(SAMPLE):
        job, usage, lines, announced, name = _run(events, published, prefix, capsys, order, index)
        state = _state(job, name)
        if reference is None:
            reference = state
            assert state["status"] == "Completed" and state["status_source"] == "sagemaker"
            assert state["batch_status"] == "SUCCEEDED" and state["cost_usd"] == 20.0
            assert state["final_metrics"] == {"eval_f1": 91.5, "train_loss": 0.25}
            assert state["spot_interruptions"] == 1 and state["training_job_name"] == "TRAINING"
            assert state["usage_released"] is True and state["usage_spend_usd"] == 20.0
            assert "queue_reason" not in state and state["queued_ms"] < state["dequeued_ms"]
        assert state == reference, order
        assert usage["instances"] == 0 and float(usage["reserved"]) == 0, order
        assert float(usage["spend"]) == 20.0 and float(usage["committed"]) == 20.0, order
        (message,) = announced
        assert message["job_name"] == name and message["status"] == "Completed", order
        totals = _metrics(lines)
        assert totals["JobsCompleted"] == 1 and totals.get("JobsStarted", 1) == 1, order
        assert totals.get("InstancesRunningChange", 0) == 0, order
        assert totals.get("InstancesQueuedChange", 0) == 0, order
        assert totals["SpendUsd"] == 20.0, order
