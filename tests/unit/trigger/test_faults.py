"""Fault injection on the launcher against moto: what AWS can do to a submit, and what is left.

Faults are injected at the HTTP layer (botocore ``before-send`` hooks on the handler's own
clients), so botocore's retry policy runs as configured: a canned error response, a raised
timeout, or a *lost response* (the request reaches moto and changes it, then the caller sees a
timeout). ``SageMakerNames`` gives moto SageMaker's real name uniqueness (moto overwrites a
duplicate name silently; SageMaker answers ResourceInUse).

Covered elsewhere (``test_reliability.py``): throttling and ResourceLimitExceeded mapping,
retries with backoff, a crash between the ledger write and the SageMaker call, concurrent
duplicates. Here: 5xx, timeouts, ambiguous timeouts, ResourceInUse for our own job, DynamoDB
conditional-check failures and throttling, and recovery by retrying with the same token.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import urllib3
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from bench.load import sagemaker_jobs
from tests.lambda_support import client, http_event

SAGEMAKER_ATTEMPTS = 5  # runtime.SAGEMAKER_CONFIG total_max_attempts
DYNAMODB_ATTEMPTS = 4  # runtime.DYNAMODB_CONFIG total_max_attempts


# ---------------------------------------------------------------------------------- helpers
class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        yield self.data


def aws_error(request, status: int, code: str, message: str = "injected", **extra) -> AWSResponse:
    """An error response in the service's JSON protocol (SageMaker 1.1, DynamoDB 1.0)."""
    dynamodb = "DynamoDB" in request.headers.get("X-Amz-Target", b"").decode()
    kind = f"com.amazonaws.dynamodb.v20120810#{code}" if dynamodb else code
    body = json.dumps({"__type": kind, "message": message, **extra}).encode()
    content_type = f"application/x-amz-json-{'1.0' if dynamodb else '1.1'}"
    return AWSResponse(request.url, status, {"Content-Type": content_type}, _Raw(body))


def target(request) -> str:
    return request.headers.get("X-Amz-Target", b"").decode().rsplit(".", 1)[-1]


class Inject:
    """before-send on one operation: the first ``times`` sends get ``fault(request)``.

    ``fault`` returns an AWSResponse (an error answer) or raises (a network failure).
    """

    def __init__(self, launcher, service: str, operation: str, fault, times: int = 10**6):
        self.client = getattr(launcher.module.RUNTIME, service)
        self.event = f"before-send.{service}.{operation}"
        self.fault = fault
        self.times = times
        self.sent = 0

    def __call__(self, request, **_):
        self.sent += 1
        if self.sent <= self.times:
            return self.fault(request)
        return None

    def __enter__(self):
        self.client.meta.events.register_first(self.event, self)
        return self

    def __exit__(self, *exc):
        self.client.meta.events.unregister(self.event, self)


def read_timeout(request):
    raise ReadTimeoutError(endpoint_url=request.url)


def connect_timeout(request):
    raise ConnectTimeoutError(endpoint_url=request.url)


_HTTP = urllib3.PoolManager()


def lost_response(request):
    """The request reaches the service and takes effect; its answer never comes back."""
    _HTTP.request(
        request.method, request.url, body=request.body, headers=dict(request.headers)
    ).close()
    raise ReadTimeoutError(endpoint_url=request.url)


def sequence(*faults):
    """A fault that applies ``faults`` in turn, the last one from then on."""
    calls = []

    def fault(request):
        calls.append(1)
        return faults[min(len(calls), len(faults)) - 1](request)

    return fault


class SageMakerNames:
    """SageMaker's name uniqueness for moto: CreateTrainingJob of an existing name is
    answered with ResourceInUse, as SageMaker does."""

    def __init__(self, launcher):
        self.launcher = launcher
        self.in_use = 0

    def __call__(self, request, **_):
        name = json.loads(request.body)["TrainingJobName"]
        if name in jobs(self.launcher, name):
            self.in_use += 1
            return aws_error(request, 400, "ResourceInUse", f"Training job {name} already exists")
        return None

    def __enter__(self):
        events = self.launcher.module.RUNTIME.sagemaker.meta.events
        events.register_first("before-send.sagemaker.CreateTrainingJob", self)
        return self

    def __exit__(self, *exc):
        events = self.launcher.module.RUNTIME.sagemaker.meta.events
        events.unregister("before-send.sagemaker.CreateTrainingJob", self)


def jobs(launcher, prefix: str) -> list[str]:
    """Training jobs whose names start with ``prefix`` (every page: moto pages before filtering)."""
    return sagemaker_jobs(launcher.sagemaker, prefix)


def ledger(launcher) -> dict[str, dict]:
    return {i["pk"]["S"]: i for i in launcher.ledger_items()}


def jobs_in_ledger(launcher) -> list[dict]:
    return [v for k, v in ledger(launcher).items() if k.startswith("job#")]


def request_for(prefix: str, *, token: bool = True) -> dict:
    body = {"template": "distilbert-spot", "job_name": prefix}
    return {**body, "client_token": prefix} if token else body


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    """botocore's retry backoff sleeps; the launcher's own waits are patched per test."""
    monkeypatch.setattr("time.sleep", lambda s: None)


# ------------------------------------------------------------------------- SageMaker faults
@pytest.mark.parametrize(
    ("status", "code"), [(500, "InternalFailure"), (503, "ServiceUnavailable"), (502, "BadGateway")]
)
def test_5xx_on_create_is_retried_and_the_job_starts(launcher, prefix, status, code):
    fault = Inject(launcher, "sagemaker", "CreateTrainingJob", lambda r: aws_error(r, status, code))
    fault.times = 2
    with fault:
        resp = launcher(request_for(prefix))
    assert resp["status"] == "InProgress", resp
    assert fault.sent == 3
    assert jobs(launcher, prefix) == [resp["job_name"]]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] == "InProgress"


def test_5xx_that_persists_is_an_upstream_error_and_a_retry_recovers(launcher, prefix):
    unavailable = lambda r: aws_error(r, 503, "ServiceUnavailable")  # noqa: E731
    fault = Inject(launcher, "sagemaker", "CreateTrainingJob", unavailable)
    with fault:
        resp = launcher(http_event("POST", "/jobs", request_for(prefix)))
    assert resp["statusCode"] == 502
    err = json.loads(resp["body"])["error"]
    assert err["type"] == "UpstreamError" and "CreateTrainingJob" in err["message"]
    assert fault.sent == SAGEMAKER_ATTEMPTS
    assert jobs(launcher, prefix) == []
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] == "FailedToStart"
    assert not any(k.startswith("token#") for k in ledger(launcher))
    # The caller retries with the same token: one job, and the ledger says so.
    again = launcher(request_for(prefix))
    assert again["status"] == "InProgress"
    assert jobs(launcher, prefix) == [again["job_name"]]
    statuses = sorted(j["status"]["S"] for j in jobs_in_ledger(launcher))
    assert statuses == ["FailedToStart", "InProgress"]


@pytest.mark.parametrize("fault", [read_timeout, connect_timeout], ids=["read", "connect"])
def test_a_timeout_on_one_attempt_is_retried(launcher, prefix, fault):
    with Inject(launcher, "sagemaker", "CreateTrainingJob", fault, times=1) as inject:
        resp = launcher(request_for(prefix))
    assert resp["status"] == "InProgress" and inject.sent == 2
    assert jobs(launcher, prefix) == [resp["job_name"]]


@pytest.mark.parametrize(
    ("fault", "name"),
    [(read_timeout, "ReadTimeoutError"), (connect_timeout, "ConnectTimeoutError")],
    ids=["read", "connect"],
)
def test_timeouts_on_every_attempt_are_an_upstream_error_naming_the_call(
    launcher, prefix, fault, name
):
    with Inject(launcher, "sagemaker", "CreateTrainingJob", fault) as inject:
        resp = launcher(http_event("POST", "/jobs", request_for(prefix)))
    assert inject.sent == SAGEMAKER_ATTEMPTS
    assert resp["statusCode"] == 502
    err = json.loads(resp["body"])["error"]
    assert err["type"] == "UpstreamError"
    assert "CreateTrainingJob" in err["message"] and name in err["message"]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] == "FailedToStart"
    assert job["error_type"]["S"] == "UpstreamError"
    assert jobs(launcher, prefix) == []


def test_a_lost_create_response_is_retried_into_resource_in_use_and_adopted(launcher, prefix):
    """SageMaker created the job but the answer was lost: botocore's retry gets ResourceInUse
    for the same name, and the launcher adopts the job it had claimed."""
    with (
        SageMakerNames(launcher) as names,
        Inject(launcher, "sagemaker", "CreateTrainingJob", lost_response, times=1),
    ):
        resp = launcher(request_for(prefix))
    assert names.in_use == 1
    assert "error" not in resp, resp
    assert jobs(launcher, prefix) == [resp["job_name"]]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] in ("InProgress", "Completed")  # moto finishes jobs at once
    assert job["job_arn"]["S"].endswith(resp["job_name"])


def test_an_ambiguous_timeout_then_a_retry_leaves_exactly_one_job(launcher, prefix):
    """Every attempt times out after SageMaker created the job: the launcher describes the
    claimed name, finds the job and answers with it; a retry returns that same job."""
    fault = sequence(lost_response, read_timeout)
    with SageMakerNames(launcher):
        with Inject(launcher, "sagemaker", "CreateTrainingJob", fault):
            first = launcher(request_for(prefix))
        assert "error" not in first, first
        assert jobs(launcher, prefix) == [first["job_name"]]  # SageMaker did create it
        again = launcher(request_for(prefix))  # the network is back; same token
        assert again["job_name"] == first["job_name"]
    assert "error" not in again, again
    assert jobs(launcher, prefix) == [again["job_name"]]


def test_resource_in_use_for_our_own_claimed_job_is_adopted(launcher, prefix):
    """A peer finishing the same claimed job created it first: ResourceInUse, then the
    launcher describes the name and answers with that job instead of an error."""
    side = client("sagemaker", launcher.endpoint)

    def peer_created_it(request):
        side.create_training_job(**json.loads(request.body))  # JSON members = boto3 params
        return aws_error(request, 400, "ResourceInUse", "Training job already exists")

    with Inject(launcher, "sagemaker", "CreateTrainingJob", peer_created_it, times=1) as inject:
        resp = launcher(http_event("POST", "/jobs", request_for(prefix)))
    assert inject.sent == 1  # ResourceInUse is not retried
    assert resp["statusCode"] == 201, resp
    name = json.loads(resp["body"])["job_name"]
    assert jobs(launcher, prefix) == [name]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] != "Submitting"


# -------------------------------------------------------------------------- DynamoDB faults
def _pin_name(launcher, monkeypatch, suffixes):
    """Fix the clock and the random suffix so generated job names collide on purpose."""
    rt = launcher.module.RUNTIME
    moment = datetime(2026, 11, 22, 1, 53, tzinfo=UTC)
    monkeypatch.setattr(rt, "now", lambda: moment)
    it = iter(suffixes)
    monkeypatch.setattr(rt, "random_hex", lambda: next(it))


@pytest.mark.parametrize("token", [True, False], ids=["transaction", "put-item"])
def test_a_job_name_collision_in_the_ledger_draws_another_name(
    launcher, prefix, monkeypatch, token
):
    """ConditionalCheckFailed on the job item (same name, same minute, same suffix): the
    launcher draws a new suffix and claims again; both jobs start, nothing is overwritten."""
    _pin_name(launcher, monkeypatch, ["a1b2", "a1b2", "c3d4"])
    first = launcher(request_for(prefix, token=token))
    second = launcher({**request_for(prefix + "-2", token=token), "job_name": prefix})
    assert first["job_name"].endswith("-a1b2") and second["job_name"].endswith("-c3d4")
    assert sorted(jobs(launcher, prefix)) == sorted([first["job_name"], second["job_name"]])
    assert all(j["status"]["S"] == "InProgress" for j in jobs_in_ledger(launcher))


def test_three_name_collisions_are_an_upstream_error_and_start_nothing(
    launcher, prefix, monkeypatch
):
    _pin_name(launcher, monkeypatch, ["a1b2"] * 4)
    launcher(request_for(prefix, token=False))
    before = ledger(launcher)
    with Inject(launcher, "sagemaker", "CreateTrainingJob", read_timeout) as create:
        resp = launcher(request_for(prefix + "x", token=True) | {"job_name": prefix})
    assert resp["error"]["type"] == "UpstreamError"
    assert "unique job name" in resp["error"]["message"]
    assert create.sent == 0
    assert ledger(launcher) == before  # the token was not left claimed either


def test_a_lost_token_race_where_the_winner_freed_the_token_claims_again(launcher, prefix):
    """TransactWriteItems cancelled on the token (a peer held it), but the peer failed to
    start and freed it before we looked: the launcher claims again and starts the job."""

    def token_taken(request):
        reasons = [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}]
        return aws_error(
            request, 400, "TransactionCanceledException", "cancelled", CancellationReasons=reasons
        )

    with Inject(launcher, "dynamodb", "TransactWriteItems", token_taken, times=1) as inject:
        resp = launcher(request_for(prefix))
    assert inject.sent == 2
    assert resp["status"] == "InProgress"
    assert jobs(launcher, prefix) == [resp["job_name"]]
    assert sorted(k.split("#")[0] for k in ledger(launcher)) == ["job", "token"]


def test_a_failed_status_condition_after_create_still_answers_with_the_job(launcher, prefix):
    """The conditional write of the start fails as if another writer had moved the job on
    first: the one writer reads the job again and plans again (here nothing had moved, so the
    second write applies), and the caller gets the job it started."""
    fault = Inject(
        launcher,
        "dynamodb",
        "UpdateItem",
        lambda r: aws_error(r, 400, "ConditionalCheckFailedException", "status moved on"),
        times=1,
    )
    with fault:
        resp = launcher(request_for(prefix))
    assert fault.sent == 2
    assert resp["status"] == "InProgress"
    assert jobs(launcher, prefix) == [resp["job_name"]]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] == "InProgress" and job["revision"]["N"] == "1"


@pytest.mark.parametrize(
    ("operation", "code"),
    [
        ("TransactWriteItems", "ProvisionedThroughputExceededException"),
        ("TransactWriteItems", "ThrottlingException"),
        ("GetItem", "ProvisionedThroughputExceededException"),
        ("PutItem", "RequestLimitExceeded"),
    ],
)
def test_dynamodb_throttling_before_the_claim_is_throttled_and_starts_nothing(
    launcher, prefix, operation, code
):
    token = operation != "PutItem"  # a submit without a token claims with PutItem
    fault = Inject(launcher, "dynamodb", operation, lambda r: aws_error(r, 400, code))
    with fault, Inject(launcher, "sagemaker", "CreateTrainingJob", read_timeout) as create:
        resp = launcher(http_event("POST", "/jobs", request_for(prefix, token=token)))
    assert resp["statusCode"] == 429, resp
    err = json.loads(resp["body"])["error"]
    assert err["type"] == "Throttled" and "DynamoDB" in err["message"]
    assert fault.sent == DYNAMODB_ATTEMPTS
    assert create.sent == 0
    assert ledger(launcher) == {}
    # Throttling passes; the same request then starts exactly one job.
    again = launcher(request_for(prefix, token=token))
    assert again["status"] == "InProgress"
    assert jobs(launcher, prefix) == [again["job_name"]]


def test_transient_dynamodb_throttling_is_retried(launcher, prefix):
    code = "ProvisionedThroughputExceededException"
    fault = Inject(launcher, "dynamodb", "TransactWriteItems", lambda r: aws_error(r, 400, code))
    fault.times = 2
    with fault:
        resp = launcher(request_for(prefix))
    assert resp["status"] == "InProgress" and fault.sent == 3


def test_a_transaction_cancelled_for_throttling_starts_nothing(launcher, prefix):
    """DynamoDB can cancel a transaction for throttling (a reason, not an error code): an
    error object, nothing started, nothing recorded, and the retry works."""

    def cancelled(request):
        reasons = [{"Code": "ThrottlingError"}, {"Code": "None"}]
        return aws_error(
            request, 400, "TransactionCanceledException", "cancelled", CancellationReasons=reasons
        )

    with Inject(launcher, "dynamodb", "TransactWriteItems", cancelled):
        resp = launcher(request_for(prefix))
    assert resp["error"]["type"] in ("Throttled", "UpstreamError"), resp
    assert jobs(launcher, prefix) == [] and ledger(launcher) == {}
    assert launcher(request_for(prefix))["status"] == "InProgress"


def test_a_lost_claim_response_is_recovered_by_the_retry(launcher, prefix, monkeypatch):
    """The claim transaction was applied but its answer was lost (every attempt): the caller
    gets an error; the retry with the same token finds the claimed job still Submitting,
    waits, then starts it under the claimed name: one job, consistent ledger."""
    from ftl_trigger import submit_flow as submit

    monkeypatch.setattr(submit, "WAIT_FOR_PEER_S", 0.05)
    fault = sequence(lost_response, read_timeout)
    with Inject(launcher, "dynamodb", "TransactWriteItems", fault):
        first = launcher(request_for(prefix))
    assert first["error"]["type"] == "UpstreamError"
    assert jobs(launcher, prefix) == []
    (claimed,) = jobs_in_ledger(launcher)
    assert claimed["status"]["S"] == "Submitting"
    with SageMakerNames(launcher):
        again = launcher(request_for(prefix))
    assert again["job_name"] == claimed["job_name"]["S"]
    assert jobs(launcher, prefix) == [again["job_name"]]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] == "InProgress"


def test_ledger_throttled_after_the_job_started_is_recovered_by_the_retry(
    launcher, prefix, monkeypatch
):
    """CreateTrainingJob succeeded, then the ledger update was throttled on every attempt.
    The replay with the same token re-sends the same name, SageMaker says ResourceInUse, the
    launcher adopts the job: exactly one job and an InProgress ledger."""
    from ftl_trigger import submit_flow as submit

    monkeypatch.setattr(submit, "WAIT_FOR_PEER_S", 0.05)
    code = "ProvisionedThroughputExceededException"
    with Inject(launcher, "dynamodb", "UpdateItem", lambda r: aws_error(r, 400, code)):
        first = launcher(request_for(prefix))
    assert "error" not in first, first  # the job is running, so the caller gets it
    (started,) = jobs(launcher, prefix)
    assert first["job_name"] == started
    with SageMakerNames(launcher) as names:
        again = launcher(request_for(prefix))
    assert names.in_use == 1
    assert again["job_name"] == started
    assert jobs(launcher, prefix) == [started]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] != "Submitting"


def test_ledger_throttled_after_the_job_started_still_answers_with_the_job(launcher, prefix):
    code = "ProvisionedThroughputExceededException"
    with Inject(launcher, "dynamodb", "UpdateItem", lambda r: aws_error(r, 400, code)):
        resp = launcher(request_for(prefix, token=False))
    assert "error" not in resp, resp
    assert jobs(launcher, prefix) == [resp["job_name"]]


def test_a_job_left_submitting_by_a_failed_ledger_write_is_repaired_by_describe(
    launcher, prefix, monkeypatch
):
    """CreateTrainingJob succeeded, the ledger update failed on every attempt, and nobody
    replays the request: once the grace has passed, describe asks SageMaker for the job by
    its name and repairs the record, so describe and stop stop answering from a stale
    ``Submitting``."""
    from datetime import timedelta

    from ftl_trigger import actions

    code = "ProvisionedThroughputExceededException"
    with Inject(launcher, "dynamodb", "UpdateItem", lambda r: aws_error(r, 400, code)):
        first = launcher(request_for(prefix, token=False))
    name = first["job_name"]
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] == "Submitting"
    assert launcher({"action": "describe", "job_name": name})["status"] == "Submitting"
    runtime = launcher.module.RUNTIME
    later = runtime.now() + timedelta(seconds=actions.SUBMIT_GRACE_S + 1)
    monkeypatch.setattr(runtime, "now", lambda: later)
    described = launcher({"action": "describe", "job_name": name})
    assert described["status"] == "Completed", described  # moto ends jobs at once
    assert described["job_arn"].endswith(name)
    (job,) = jobs_in_ledger(launcher)
    assert job["status"]["S"] == "Completed" and job["job_arn"]["S"] == described["job_arn"]
    assert launcher({"action": "stop", "job_name": name})["status"] == "Completed"
