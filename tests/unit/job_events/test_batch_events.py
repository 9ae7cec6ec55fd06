"""AWS Batch service-job state changes (queue mode) and the SageMaker events of the training
jobs Batch creates: mapping, stop while queued, cancellation at the head, usage, announcements."""

from __future__ import annotations

import json

import pytest

from jobmodel.jobs.queue_state import STOP_REASON
from tests.unit.job_events.sequences import (
    T0,
    batch,
    life,
    sagemaker,
    training_arn,
    training_name,
)

HEAD_REASON = (
    "Terminated by JobStateTimeLimit action due to reason: "
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
)


def test_a_runnable_job_is_queued_with_its_reason_and_time(events, queued):
    result = events(batch(queued, "RUNNABLE"))
    assert result["updated"] is True and result["queue_reason"] == "waiting for capacity"
    job = events.job(queued)
    assert job["status"] == "Queued" and job["status_source"] == "batch"
    assert job["batch_job_id"] == f"id-{queued}" and job["batch_status"] == "RUNNABLE"
    assert job["queued_ms"] == T0 and job["batch_status_reason"] == "Waiting for capacity"
    assert events.messages() == []


def test_leaving_the_queue_drops_the_reason_and_records_the_training_job(events, queued):
    events(batch(queued, "RUNNABLE"))
    events(batch(queued, "SCHEDULED"))
    job = events.job(queued)
    assert job["status"] == "Scheduled" and "queue_reason" not in job
    assert job["dequeued_ms"] == T0 + 60_000
    assert job["training_job_arn"] == training_arn(queued)


def test_sagemaker_events_of_batchs_training_job_update_the_ledger_job(events, queued):
    events(batch(queued, "SCHEDULED"))
    result = events(sagemaker(queued, "InProgress", "Training", T0 + 80_000))
    assert result["job_name"] == queued and result["updated"] is True
    job = events.job(queued)
    assert job["status"] == "InProgress" and job["secondary_status"] == "Training"
    # SageMaker's own spelling of the name, not the lower-case one in the ARN.
    assert job["training_job_name"] == training_name(queued)
    assert job["job_arn"] == training_arn(queued)


def test_sagemakers_event_before_batchs_scheduled_ends_the_wait_at_its_creation(events, queued):
    """SageMaker's event may arrive before Batch's SCHEDULED: the training job's creation
    time (Batch created it when the job left the queue) ends the wait, and Batch's own
    scheduledAt, arriving later, does not move it (queue times are set once)."""
    events(batch(queued, "RUNNABLE"))
    event = sagemaker(queued, "InProgress", "Starting", T0 + 80_000)
    event["detail"]["CreationTime"] = T0 + 55_000
    events(event)
    job = events.job(queued)
    assert job["status"] == "InProgress" and job["dequeued_ms"] == T0 + 55_000
    events(batch(queued, "SCHEDULED"))
    assert events.job(queued)["dequeued_ms"] == T0 + 55_000


@pytest.mark.parametrize(
    "tags",
    [
        lambda job: {"ftl:job-name": job, "ftl:team": "nlp"},  # SageMaker's events: an object
        lambda job: [{"Key": "ftl:job-name", "Value": job}],  # a describe's list, accepted too
    ],
)
def test_a_training_job_whose_name_batch_cut_is_found_by_its_job_name_tag(events, queued, tags):
    """Batch fits ``AWSBatch<name><32 hex>`` into SageMaker's 63 characters: a long job name
    is cut, and only the payload's ftl:job-name tag still names the ledger job."""
    cut = f"AWSBatch{queued[:10]}{'0' * 32}"
    event = sagemaker(queued, "Completed", "Completed", T0 + 90_000, BillableTimeInSeconds=600)
    event["detail"].update(TrainingJobName=cut, Tags=tags(queued))
    result = events(event)
    assert result["job_name"] == queued and result["updated"] is True
    job = events.job(queued)
    assert job["status"] == "Completed" and job["billable_seconds"] == 600
    assert job["training_job_name"] == cut
    # Without the tag the cut name leads nowhere: nothing is written.
    event["detail"].pop("Tags")
    assert events(event) == {"updated": False, "job_name": cut[8:-32]}


def test_a_job_stopped_while_queued_is_stopped_and_gives_its_usage_back_once(events, queued):
    events(batch(queued, "RUNNABLE"))
    stopped = batch(
        queued, "FAILED", statusReason=f"{STOP_REASON} requested by alice", stoppedAt=T0 + 9_000
    )
    assert events(stopped)["updated"] is True
    assert events(stopped)["updated"] is False
    job = events.job(queued)
    assert job["status"] == "Stopped" and "queue_reason" not in job and "failure_reason" not in job
    assert job["usage_released"] is True and job["usage_spend_usd"] == 0
    usage = events.usage("nlp")
    assert usage["instances"] == 0 and float(usage["reserved"]) == 0
    assert float(usage["spend"]) == 0
    (message,) = events.messages()
    assert message["status"] == "Stopped"


def test_a_job_cancelled_at_the_head_of_the_queue_failed_to_start_with_the_reason(events, queued):
    events(batch(queued, "RUNNABLE"))
    events(batch(queued, "FAILED", statusReason=HEAD_REASON, stoppedAt=T0 + 7_200_000))
    job = events.job(queued)
    assert job["status"] == "FailedToStart" and job["failure_reason"] == HEAD_REASON
    assert job["dequeued_ms"] == T0 + 7_200_000 and job["usage_released"] is True
    assert events.usage("nlp")["instances"] == 0
    (message,) = events.messages()
    assert message["status"] == "FailedToStart" and message["failure_reason"] == HEAD_REASON


def test_a_cost_known_only_after_batch_ended_the_job_is_added_to_the_spend_once(events, queued):
    *_, completed, succeeded = life(queued)
    events(succeeded)  # Batch first: the job ended, its cost is not known yet
    job = events.job(queued)
    assert job["status"] == "Completed" and "cost_usd" not in job
    assert job["usage_released"] is True and job["usage_spend_usd"] == 0
    assert float(events.usage("nlp")["spend"]) == 0
    events(completed)
    events(completed)
    job = events.job(queued)
    assert job["cost_usd"] == 20.0  # 1200 s x 2 x 30 USD / 3600
    assert job["usage_spend_usd"] == 20.0 and job["status_source"] == "sagemaker"
    usage = events.usage("nlp")
    assert float(usage["spend"]) == 20.0 and float(usage["committed"]) == 20.0
    assert len(events.messages()) == 1  # announced once, when Batch ended it


def test_a_failed_attempt_batch_retries_does_not_end_the_job(events, queued):
    events(batch(queued, "RUNNING"))
    failed = sagemaker(
        queued,
        "Failed",
        "Failed",
        T0 + 200_000,
        FailureReason="InternalServerError: We encountered an internal error.",
    )
    events(failed)
    job = events.job(queued)
    assert job["status"] == "InProgress" and job["secondary_status"] == "Failed"
    assert "usage_released" not in job and events.messages() == []
    reason = "Received status from SageMaker: AlgorithmError: exit 1"
    attempt = {"serviceResourceId": {"name": "TrainingJobArn", "value": training_arn(queued)}}
    ended = batch(queued, "FAILED", statusReason=reason, stoppedAt=T0 + 900_000)
    events({**ended, "detail": {**ended["detail"], "latestAttempt": attempt}})
    job = events.job(queued)
    assert job["status"] == "Failed" and job["failure_reason"] == reason
    assert job["usage_released"] is True


def test_an_event_of_another_batch_job_with_the_same_name_is_ignored(events, queued):
    events(batch(queued, "RUNNABLE"))
    other = batch(queued, "SUCCEEDED", jobId="someone-else")
    assert events(other)["updated"] is False
    assert events.job(queued)["status"] == "Queued"


def test_a_job_not_in_the_ledger_is_never_created(events, prefix):
    assert events(batch(prefix, "RUNNABLE"))["updated"] is False
    assert events.job(prefix) is None


@pytest.mark.parametrize(
    "change",
    [
        {"jobName": "bad name!"},
        {"jobName": None},
        {"jobId": ""},
        {"status": "DONE"},
    ],
)
def test_malformed_batch_events_are_dropped(events, queued, change):
    before = events.job(queued)
    event = batch(queued, "RUNNABLE")
    event["detail"].update(change)
    result = events(event)
    assert result["updated"] is False and result["dropped"]
    assert events.job(queued) == before


def test_the_handler_result_is_json(events, queued):
    json.dumps(events(batch(queued, "RUNNABLE")))
