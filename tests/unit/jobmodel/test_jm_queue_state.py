"""Batch service-job state -> ledger fields, and the merge rule with SageMaker's events."""

from __future__ import annotations

import itertools
import json

import pytest

from jobmodel.contract.statuses import JOB_STATUSES
from jobmodel.jobs.queue_state import (
    STOP_REASON,
    classify_reason,
    from_service_job,
    ledger_job_name,
    merge,
)

ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/AWSBatchteam-a-job1" + "a" * 32


def detail(status, **extra):
    base = {"jobId": "j-1", "jobName": "team-a-job1", "status": status, "createdAt": 1000}
    return {**base, **extra}


def attempt(**extra):
    return {"serviceResourceId": {"name": "TrainingJobArn", "value": ARN}, **extra}


def test_queue_statuses_are_in_the_contract():
    assert {"Queued", "Scheduled"} <= set(JOB_STATUSES)


@pytest.mark.parametrize(
    ("status", "extra", "want"),
    [
        ("SUBMITTED", {}, "Queued"),
        ("RUNNABLE", {"statusReason": "Waiting for capacity"}, "Queued"),
        ("SCHEDULED", {"scheduledAt": 5000, "latestAttempt": attempt()}, "Scheduled"),
        ("RUNNING", {"latestAttempt": attempt()}, "InProgress"),
        ("SUCCEEDED", {"latestAttempt": attempt()}, "Completed"),
        ("FAILED", {"attempts": [attempt(statusReason="AlgorithmError")]}, "Failed"),
        ("FAILED", {"statusReason": STOP_REASON + " by alice", "stoppedAt": 9000}, "Stopped"),
        ("FAILED", {"statusReason": "head of queue too long", "stoppedAt": 9000}, "FailedToStart"),
    ],
)
def test_batch_status_maps_to_ledger_status(status, extra, want):
    update = from_service_job(detail(status, **extra))
    assert update.status == want
    assert update.batch_job_id == "j-1"
    assert update.batch_status == status


def test_queued_job_records_reason_and_time():
    update = from_service_job(detail("RUNNABLE", statusReason="Insufficient capacity"))
    assert update.queue_reason == "waiting for capacity"
    assert update.fields()["queued_ms"] == 1000
    assert update.queued_seconds is None


def test_scheduled_job_records_training_job_and_wait():
    update = from_service_job(detail("SCHEDULED", scheduledAt=61000, latestAttempt=attempt()))
    assert update.training_job_arn == ARN
    assert update.training_job_name == ARN.rsplit("/", 1)[-1]
    assert update.queued_seconds == 60


def test_job_cancelled_at_head_keeps_its_reason():
    update = from_service_job(detail("FAILED", statusReason="stuck at head", stoppedAt=601000))
    assert update.failure_reason == "stuck at head"
    assert update.queued_seconds == 600


@pytest.mark.parametrize("bad", [{}, {"jobId": "j"}, {"jobId": "j", "status": "DONE"}])
def test_malformed_detail_is_refused(bad):
    with pytest.raises(ValueError, match="not a Batch service job"):
        from_service_job(bad)


def test_reason_classification():
    assert classify_reason("Service quota exceeded for ml.p4d") == "over quota"
    assert classify_reason("CAPACITY:INSUFFICIENT") == "waiting for capacity"
    # Batch's own words for the reasons its head time limit acts on
    too_big = (
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated "
        "with the job queue cannot meet the capacity requirement of the job."
    )
    assert classify_reason(too_big) == "larger than the queue's capacity"
    assert classify_reason(too_big, position=1) == "larger than the queue's capacity"
    assert classify_reason("MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - x") == "over quota"
    capacity = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Unable to provision requested compute"
    assert classify_reason(capacity) == "waiting for capacity"
    assert classify_reason(None, position=4) == "behind 3 jobs"
    assert classify_reason(None, position=2) == "behind 1 job"
    assert classify_reason(None, position=1) == "next to run"


def test_ledger_job_name_strips_batch_decoration():
    assert ledger_job_name("AWSBatchteam-a-job1" + "0123456789abcdef" * 2) == "team-a-job1"
    assert ledger_job_name("team-a-job1") == "team-a-job1"


def _apply(updates):
    record = {"status": "Submitting", "status_source": "launcher"}
    for update in updates:
        for key, value in merge(record, update).items():
            if value is None:
                record.pop(key, None)
            else:
                record[key] = value
    return record


def _events():
    queued = from_service_job(detail("RUNNABLE", statusReason="capacity")).fields()
    scheduled = from_service_job(
        detail("SCHEDULED", scheduledAt=5000, latestAttempt=attempt())
    ).fields()
    running = from_service_job(detail("RUNNING", latestAttempt=attempt())).fields()
    batch_failed = from_service_job(
        detail("FAILED", attempts=[attempt(statusReason="stopped")], stoppedAt=9000)
    ).fields()
    sm_in_progress = {
        "status": "InProgress",
        "status_source": "sagemaker",
        "status_observed_ms": 6000,
    }
    sm_stopped = {"status": "Stopped", "status_source": "sagemaker", "status_observed_ms": 9500}
    return [queued, scheduled, running, batch_failed, sm_in_progress, sm_stopped]


def test_merge_is_order_independent_and_idempotent():
    records = {}
    for order in itertools.permutations(_events()):
        record = _apply(list(order) + list(order))  # every event twice
        records[json.dumps(record, sort_keys=True)] = order
    assert len(records) == 1, list(records)
    (record,) = (json.loads(r) for r in records)
    assert record["status"] == "Stopped" and record["status_source"] == "sagemaker"
    assert (record["batch_job_id"], record["training_job_arn"]) == ("j-1", ARN)
    assert (record["queued_ms"], record["dequeued_ms"]) == (1000, 5000)
    assert "queue_reason" not in record


def test_late_queue_event_does_not_requeue_a_running_job():
    record = {"status": "InProgress", "status_source": "sagemaker"}
    late = from_service_job(detail("RUNNABLE")).fields()
    out = merge(record, late)
    assert "status" not in out and "queue_reason" not in out
    assert out["batch_status"] == "RUNNABLE"  # Batch's own view is kept apart


def test_sagemaker_terminal_is_final():
    record = {"status": "Completed", "status_source": "sagemaker"}
    batch = from_service_job(detail("FAILED", attempts=[attempt()])).fields()
    assert "status" not in merge(record, batch)


def test_newer_queue_reason_replaces_older():
    record = {
        "status": "Queued",
        "status_source": "batch",
        "status_observed_ms": 10,
        "queue_reason": "waiting for capacity",
    }
    newer = {
        "status": "Queued",
        "status_source": "batch",
        "status_observed_ms": 20,
        "queue_reason": "over quota",
    }
    older = {**newer, "status_observed_ms": 5, "queue_reason": "behind 3 jobs"}
    assert merge(record, newer)["queue_reason"] == "over quota"
    assert merge(record, older) == {}
