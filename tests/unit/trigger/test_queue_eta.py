"""Queue mode's estimated start through the real handler: moto for DynamoDB and SageMaker,
the sandbox's Batch stand-in for the queue (docs/API.md, Queue mode: ``estimated_start_by``,
``estimated_start_unknown_reason``, ``sooner``)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest

from jobmodel.capacity import queue_eta as E
from jobmodel.contract.names import ENV_QUEUE_CAPACITY, timestamp
from tests.unit.trigger.conftest import queue_launcher
from testsupport.authz.record import recording


@pytest.fixture
def two_slots(batch_sandbox, monkeypatch, tmp_path):
    """A queue of two instances whose capacity the trigger knows."""
    env = {ENV_QUEUE_CAPACITY: "2"}
    return queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=2, env=env)


@pytest.fixture
def three_slots(batch_sandbox, monkeypatch, tmp_path):
    env = {ENV_QUEUE_CAPACITY: "3"}
    return queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=3, env=env)


def job(prefix, template="distilbert-spot", **extra):
    return {"template": template, "job_name": prefix, **extra}


def describe(launcher, name):
    return launcher({"action": "describe", "job_name": name})


def end_of(launcher, name) -> float:
    """When the stand-in's job ``name`` frees its instances at the latest: Batch's
    scheduledAt (ms) + its hold limit + the allowance."""
    (sent,) = [j for j in launcher.batch_jobs() if j.name == name]
    limit = E.hold_limit(json.loads(sent.request["serviceRequestPayload"]))
    assert sent.scheduled is not None and limit is not None
    return int(sent.scheduled * 1000) / 1000 + limit + E.HANDOVER_ALLOWANCE_S


def iso(seconds: float) -> str:
    return timestamp(datetime.fromtimestamp(seconds, UTC))


def test_queued_jobs_start_by_the_running_jobs_ends_in_order(two_slots, prefix):
    a, b = (two_slots(job(f"{prefix}-{x}"))["job_name"] for x in "ab")
    c, d = (two_slots(job(f"{prefix}-{x}"))["job_name"] for x in "cd")
    assert [describe(two_slots, n)["status"] for n in (a, b)] == ["InProgress"] * 2
    first, second = sorted((end_of(two_slots, a), end_of(two_slots, b)))
    got_c, got_d = describe(two_slots, c), describe(two_slots, d)
    assert got_c["queue_position"] == 1 and got_d["queue_position"] == 2
    # c takes the first instance freed; d, behind it, the second
    assert got_c["estimated_start_by"] == iso(first), got_c
    assert got_d["estimated_start_by"] == iso(second), got_d
    assert "estimated_start_unknown_reason" not in got_c
    # a spot job of one instance: on-demand is the only other way
    assert [o["option"] for o in got_c["sooner"]] == ["on_demand"]
    assert got_c["sooner"][0]["request"] == {"spot": False}
    # the started jobs carry none of it
    assert "estimated_start_by" not in describe(two_slots, a)


def test_list_looks_at_the_queue_once_whatever_the_page_holds(two_slots, prefix):
    names = [two_slots(job(f"{prefix}-{x}"))["job_name"] for x in "abcde"]
    for name in names[:2]:
        assert describe(two_slots, name)["status"] == "InProgress"  # the ledger learns it
    with recording() as calls:
        page = two_slots({"action": "list"})
    queued = [j for j in page["jobs"] if j["status"] == "Queued"]
    assert len(queued) == 3 and all(j["estimated_start_by"] for j in queued), page
    assert sorted(j["estimated_start_by"] for j in queued) == [
        j["estimated_start_by"] for j in sorted(queued, key=lambda j: j["queue_position"])
    ]
    ops = Counter(c.operation for c in calls)
    # one snapshot, one listing per Batch status, one ledger read of every job's limits
    assert ops["GetJobQueueSnapshot"] == 1 and ops["BatchGetItem"] == 1, ops
    assert ops["ListServiceJobs"] == 4 and ops["DescribeServiceJob"] == 0, ops


def test_fewer_instances_that_would_start_now(three_slots, prefix):
    a = three_slots(job(f"{prefix}-a"))["job_name"]
    big = three_slots(job(f"{prefix}-b", template="bert-large-qa", instance_count=3))
    got = describe(three_slots, big["job_name"])
    assert got["status"] == "Queued" and got["estimated_start_by"] == iso(end_of(three_slots, a))
    fewer = [o for o in got["sooner"] if o["option"] == "fewer_instances"]
    assert [o["request"] for o in fewer] == [{"instance_count": 2}]
    now = datetime.now(UTC).timestamp()
    starts = datetime.fromisoformat(fewer[0]["estimated_start_by"].replace("Z", "+00:00"))
    assert abs(starts.timestamp() - now) < 60  # "now": this describe's clock


def test_a_running_job_the_platform_did_not_start_leaves_the_bound_unknown(two_slots, prefix):
    # a job someone else queued: the request of a dry run, on both instances
    outsider = two_slots(job(f"{prefix}-x", dry_run=True))["create_training_job"]
    outsider["ResourceConfig"]["InstanceCount"] = 2
    outsider["TrainingJobName"] = f"{prefix}-outsider"
    two_slots.standin.submit(
        {
            "jobName": f"{prefix}-outsider",
            "jobQueue": two_slots.queue_arn,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "serviceRequestPayload": json.dumps(outsider),
            "shareIdentifier": "default",
        }
    )
    assert [j.status for j in two_slots.batch_jobs()] == ["SCHEDULED"]
    waiting = two_slots(job(f"{prefix}-w"))
    got = describe(two_slots, waiting["job_name"])
    assert got["status"] == "Queued" and got["estimated_start_by"] is None
    assert got["estimated_start_unknown_reason"] == E.UNKNOWN_RUNNING
    assert f"{prefix}-outsider" not in json.dumps(got)  # another's job is never named


def test_without_the_queues_capacity_the_bound_is_unknown(
    batch_sandbox, monkeypatch, tmp_path, prefix
):
    queued = queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=0)
    name = queued(job(prefix))["job_name"]
    got = describe(queued, name)
    assert got["estimated_start_by"] is None
    assert got["estimated_start_unknown_reason"] == E.UNKNOWN_CAPACITY


def test_a_queue_that_cannot_be_read_leaves_the_estimate_unknown_not_the_describe(
    two_slots, prefix, monkeypatch
):
    from ftl_trigger.backends.queue import service_jobs as batch

    for x in "abc":
        two_slots(job(f"{prefix}-{x}"))
    name = f"{prefix}-c"
    (waiting,) = [j for j in two_slots.batch_jobs() if j.name.startswith(name)]

    def refuse(*_a, **_k):
        raise batch.UpstreamError("AWS Batch ListServiceJobs failed: no")

    monkeypatch.setattr(batch, "jobs_in", refuse)
    got = describe(two_slots, waiting.name)
    assert got["status"] == "Queued" and got["queue_position"] == 1
    assert got["estimated_start_by"] is None and got["sooner"] == []
    assert got["estimated_start_unknown_reason"].startswith("the queue could not be read")
