"""Queue mode's Batch calls (lambda/trigger/ftl_trigger/backends/queue/service_jobs.py) against
botocore's Stubber."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from ftl_trigger.backends.queue import service_jobs as batch
from jobmodel import NotFound, ValidationError
from jobmodel.contract.errors import Conflict, Throttled, UpstreamError
from jobmodel.jobs.queue_state import STOP_REASON

QUEUE = "arn:aws:batch:us-east-1:123456789012:job-queue/ftl-training"
JOB_ARN = "arn:aws:batch:us-east-1:123456789012:service-job/j-1"
RENDERED = {"TrainingJobName": "team-a-job1", "ResourceConfig": {"InstanceCount": 2}}


@pytest.fixture
def stubbed():
    client = boto3.client("batch", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def request(**over):
    args = {
        "job_queue": QUEUE,
        "job_name": "team-a-job1",
        "client_token": "tok-1",
        "team": "team-a",
        "priority": 50,
        "tags": {"ftl:team": "team-a"},
    }
    return batch.service_job_request(RENDERED, **{**args, **over})


def test_request_shape_matches_the_batch_model(stubbed):
    client, stub = stubbed
    req = request()
    assert req["serviceJobType"] == "SAGEMAKER_TRAINING"
    # The rendered request, plus the tag that leads the training job back to its job.
    tag = {"Key": "ftl:job-name", "Value": "team-a-job1"}
    assert json.loads(req["serviceRequestPayload"]) == {
        **RENDERED,
        "Tags": [*RENDERED.get("Tags", []), tag],
    }
    # A fair-share identifier is alphanumeric (Batch's ShareAttributes): team-a is teamXa.
    assert req["shareIdentifier"] == "teamXa" and "quotaShareName" not in req
    assert req["clientToken"] == batch.batch_client_token("team-a", "tok-1")
    assert len(req["clientToken"]) == 64
    rules = req["retryStrategy"]["evaluateOnExit"]
    assert len(rules) <= 5 and rules[-1] == {"action": "EXIT", "onStatusReason": "*"}
    assert {r["action"] for r in rules if "InternalServerError" in r["onStatusReason"]} == {"RETRY"}
    # the Stubber validates every parameter against botocore's batch model
    stub.add_response(
        "submit_service_job",
        {"jobId": "j-1", "jobName": "team-a-job1", "jobArn": JOB_ARN},
        req,
    )
    assert batch.submit(client, req) == {
        "jobId": "j-1",
        "jobName": "team-a-job1",
        "jobArn": JOB_ARN,
    }


def test_the_payload_carries_exactly_one_job_name_tag():
    tags = [{"Key": "ftl:job-name", "Value": "x"}, {"Key": "a", "Value": "b"}]
    rendered = {**RENDERED, "Tags": tags}
    assert batch.batch_payload(rendered, "team-a-job1")["Tags"] == [
        {"Key": "a", "Value": "b"},
        {"Key": "ftl:job-name", "Value": "team-a-job1"},
    ]


def test_quota_share_mode_names_the_quota_share():
    req = request(share_policy="quotashare", team=None)
    assert req["quotaShareName"] == "default" and "shareIdentifier" not in req


def test_client_token_is_scoped_per_team():
    assert batch.batch_client_token("a", "t") != batch.batch_client_token("b", "t")


def test_payload_over_10_kib_is_refused_before_sending():
    big = {**RENDERED, "HyperParameters": {"x": "y" * 10_300}}
    with pytest.raises(ValidationError) as err:
        batch.service_job_request(
            big, job_queue=QUEUE, job_name="n", client_token="t", team="a", priority=1
        )
    assert err.value.field == "request" and "10240 bytes" in err.value.message


@pytest.mark.parametrize("priority", [-1, 10_000, True, "5"])
def test_priority_out_of_range(priority):
    with pytest.raises(ValidationError) as err:
        request(priority=priority)
    assert err.value.field == "priority"


def test_repeated_token_returns_the_first_job(stubbed):
    client, stub = stubbed
    req = request()
    stub.add_client_error(
        "submit_service_job", "ClientException", "Idempotent parameter mismatch for clientToken"
    )
    stub.add_response(
        "list_service_jobs",
        {
            "jobSummaryList": [
                {
                    "jobId": "j-1",
                    "jobName": "team-a-job1",
                    "jobArn": JOB_ARN,
                    "serviceJobType": "SAGEMAKER_TRAINING",
                }
            ]
        },
        {"jobQueue": QUEUE, "filters": [{"name": "JOB_NAME", "values": ["team-a-job1"]}]},
    )
    assert batch.submit(client, req)["jobId"] == "j-1"


@pytest.mark.parametrize(
    ("code", "message", "status", "error"),
    [
        ("ClientException", "Job queue does not exist", 400, UpstreamError),
        ("ClientException", "clientToken already used", 400, Conflict),
        ("ServerException", "internal", 500, UpstreamError),
        ("TooManyRequestsException", "slow down", 429, Throttled),
    ],
)
def test_submit_errors_map_to_the_contract(stubbed, code, message, status, error):
    client, stub = stubbed
    stub.add_client_error("submit_service_job", code, message, http_status_code=status)
    if error is Conflict:  # a token reuse first looks for the job it queued
        stub.add_response("list_service_jobs", {"jobSummaryList": []})
    with pytest.raises(error):
        batch.submit(client, request())


def test_describe_queued_job_and_its_position(stubbed):
    client, stub = stubbed
    stub.add_response(
        "describe_service_job",
        {
            "jobId": "j-1",
            "jobName": "team-a-job1",
            "jobArn": JOB_ARN,
            "jobQueue": QUEUE,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "status": "RUNNABLE",
            "startedAt": 0,
            "createdAt": 1000,
            "statusReason": "Waiting for capacity",
        },
        {"jobId": "j-1"},
    )
    stub.add_response(
        "get_job_queue_snapshot",
        {
            "frontOfQueue": {
                "jobs": [
                    {"jobArn": "other", "earliestTimeAtPosition": 1},
                    {"jobArn": JOB_ARN, "earliestTimeAtPosition": 2},
                ]
            }
        },
        {"jobQueue": QUEUE},
    )
    out = batch.describe(client, "j-1")
    assert out["status"] == "Queued" and "queue_position" not in out
    # The position: one snapshot, read once per request (ftl_trigger.backends.queue.places).
    assert batch.positions_of(batch.queue_order(client, QUEUE) or [])[JOB_ARN] == 2
    assert out["queue_reason"] == "waiting for capacity" and out["batch_job_id"] == "j-1"


def test_describe_scheduled_job_names_the_training_job(stubbed):
    client, stub = stubbed
    tj = "arn:aws:sagemaker:us-east-1:123456789012:training-job/AWSBatchteam-a-job1" + "f" * 32
    stub.add_response(
        "describe_service_job",
        {
            "jobId": "j-1",
            "jobName": "team-a-job1",
            "jobQueue": QUEUE,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "status": "SCHEDULED",
            "startedAt": 0,
            "createdAt": 1000,
            "scheduledAt": 3000,
            "latestAttempt": {"serviceResourceId": {"name": "TrainingJobArn", "value": tj}},
        },
        {"jobId": "j-1"},
    )
    out = batch.describe(client, "j-1")
    assert out["status"] == "Scheduled" and out["training_job_arn"] == tj
    assert "queue_position" not in out


def test_describe_unknown_job_is_not_found(stubbed):
    client, stub = stubbed
    stub.add_client_error("describe_service_job", "ClientException", "Job j-9 not found")
    with pytest.raises(NotFound):
        batch.describe(client, "j-9")


def test_list_and_terminate(stubbed):
    client, stub = stubbed
    stub.add_response(
        "list_service_jobs",
        {"jobSummaryList": [], "nextToken": "n2"},
        {
            "jobQueue": QUEUE,
            "maxResults": 100,
            "jobStatus": "RUNNABLE",
            "filters": [{"name": "SHARE_IDENTIFIER", "values": ["teamXa"]}],
        },
    )
    assert batch.list_jobs(client, QUEUE, status="RUNNABLE", share="teamXa") == {
        "jobs": [],
        "next_token": "n2",
    }
    stub.add_response(
        "terminate_service_job",
        {},
        {"jobId": "j-1", "reason": f"{STOP_REASON} requested by alice"},
    )
    batch.terminate(client, "j-1", requested_by="alice")
