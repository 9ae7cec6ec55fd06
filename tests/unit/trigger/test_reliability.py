"""Idempotency under concurrency, AWS error mapping, retries and recovery from a crash."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from tests.lambda_support import http_event


def _ledger(launcher):
    return {i["pk"]["S"]: i for i in launcher.ledger_items()}


def test_concurrent_duplicates_create_exactly_one_job(launcher, prefix):
    request = {"template": "distilbert-spot", "job_name": prefix, "client_token": prefix}
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(lambda _: launcher(dict(request)), range(24)))
    names = {r["job_name"] for r in results}
    assert len(names) == 1, results
    assert launcher.jobs_named(prefix) == [names.pop()]
    ledger = _ledger(launcher)
    assert sorted(k.split("#")[0] for k in ledger) == ["job", "token"]


def _stub_create_error(launcher, code, message="boom", http=400):
    stub = Stubber(launcher.module.RUNTIME.sagemaker)
    stub.add_client_error(
        "create_training_job",
        service_error_code=code,
        service_message=message,
        http_status_code=http,
    )
    return stub


@pytest.mark.parametrize(
    ("code", "http", "error_type", "status"),
    [
        ("ThrottlingException", 400, "Throttled", 429),
        ("ResourceLimitExceeded", 400, "CapacityError", 503),
        ("InternalFailure", 500, "UpstreamError", 502),
        ("AccessDeniedException", 400, "UpstreamError", 502),
    ],
)
def test_create_failures_map_to_contract_errors_and_leave_a_failed_record(
    launcher, prefix, code, http, error_type, status, monkeypatch
):
    looked = []
    # After a 5xx the job may exist anyway, so the launcher looks it up by name before
    # failing; here SageMaker has no such job.
    backend = launcher.module.LAUNCHER.backend
    monkeypatch.setattr(backend, "_exists", lambda name: looked.append(name) or False)
    with _stub_create_error(launcher, code, "ml.p4d.24xlarge for spot training job usage", http):
        resp = launcher(
            http_event(
                "POST",
                "/jobs",
                {"template": "distilbert-spot", "job_name": prefix, "client_token": prefix},
            )
        )
    assert resp["statusCode"] == status
    err = json.loads(resp["body"])["error"]
    assert err["type"] == error_type
    assert "CreateTrainingJob" in err["message"]
    if error_type == "CapacityError":
        assert "ml.p4d.24xlarge for spot training job usage" in err["message"]
    ledger = _ledger(launcher)
    # The job is recorded as failed to start (not a dangling "Submitting") and the token is
    # released so the same request can be retried.
    (job,) = ledger.values()
    assert job["status"]["S"] == "FailedToStart"
    assert job["error_type"]["S"] == error_type
    assert not any(k.startswith("token#") for k in ledger)
    assert len(looked) == (1 if http >= 500 else 0)


def test_a_retry_after_a_failed_start_creates_the_job(launcher, prefix):
    request = {"template": "distilbert-spot", "job_name": prefix, "client_token": prefix}
    with _stub_create_error(launcher, "ResourceLimitExceeded"):
        assert launcher(dict(request))["error"]["type"] == "CapacityError"
    resp = launcher(dict(request))
    assert resp["status"] == "InProgress"
    assert launcher.jobs_named(prefix) == [resp["job_name"]]


def test_resource_in_use_for_a_foreign_job_is_a_conflict(launcher, prefix):
    with _stub_create_error(launcher, "ResourceInUse") as stub:
        stub.add_client_error("describe_training_job", service_error_code="ResourceNotFound")
        resp = launcher({"template": "distilbert-spot", "job_name": prefix})
    assert resp["error"]["type"] == "Conflict"


class _Throttle:
    """Answer the first ``n`` CreateTrainingJob HTTP sends with a throttling error."""

    def __init__(self, n):
        self.n = n
        self.sent = 0

    def __call__(self, request, **kwargs):
        if "CreateTrainingJob" not in request.headers.get("X-Amz-Target", b"").decode():
            return None
        self.sent += 1
        if self.sent > self.n:
            return None
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"})
        return AWSResponse(
            request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(body.encode())
        )


class _Raw:
    def __init__(self, data):
        self.data = data

    def stream(self, **kwargs):
        yield self.data


@pytest.mark.parametrize(("throttled", "created"), [(2, True), (99, False)])
def test_throttling_is_retried_with_backoff_then_reported(
    launcher, prefix, monkeypatch, throttled, created
):
    monkeypatch.setattr("time.sleep", lambda s: None)  # botocore's backoff, not the launcher
    sm = launcher.module.RUNTIME.sagemaker
    hook = _Throttle(throttled)
    sm.meta.events.register_first("before-send.sagemaker.CreateTrainingJob", hook)
    try:
        resp = launcher({"template": "distilbert-spot", "job_name": prefix})
    finally:
        sm.meta.events.unregister("before-send.sagemaker.CreateTrainingJob", hook)
    if created:
        assert resp["status"] == "InProgress" and hook.sent == 3
    else:
        assert resp["error"]["type"] == "Throttled"
        assert hook.sent == 5  # total_max_attempts


def test_capacity_errors_are_not_retried(launcher, prefix):
    calls = []
    sm = launcher.module.RUNTIME.sagemaker

    def capacity(request, **kwargs):
        calls.append(1)
        body = json.dumps({"__type": "ResourceLimitExceeded", "message": "quota"})
        return AWSResponse(request.url, 400, {}, _Raw(body.encode()))

    sm.meta.events.register_first("before-send.sagemaker.CreateTrainingJob", capacity)
    try:
        resp = launcher({"template": "distilbert-spot", "job_name": prefix})
    finally:
        sm.meta.events.unregister("before-send.sagemaker.CreateTrainingJob", capacity)
    assert resp["error"]["type"] == "CapacityError" and len(calls) == 1


def test_crash_between_ledger_write_and_create_is_finished_by_the_retry(
    launcher, prefix, monkeypatch
):
    """The first call dies after claiming the token; the retry creates exactly one job."""
    from ftl_trigger import submit_flow as submit

    monkeypatch.setattr(submit, "WAIT_FOR_PEER_S", 0.05)
    request = {"template": "distilbert-spot", "job_name": prefix, "client_token": prefix}
    sm = launcher.module.RUNTIME.sagemaker
    real_create = sm.create_training_job

    def crash(**kwargs):
        raise SystemExit("container killed")  # not an Exception: nothing catches it

    monkeypatch.setattr(sm, "create_training_job", crash)
    with pytest.raises(SystemExit):
        launcher(dict(request))
    (job,) = [i for i in launcher.ledger_items() if i["pk"]["S"].startswith("job#")]
    assert job["status"]["S"] == "Submitting"
    assert launcher.jobs_named(prefix) == []

    monkeypatch.setattr(sm, "create_training_job", real_create)
    resp = launcher(dict(request))
    assert resp["status"] == "InProgress"
    assert resp["job_name"] == job["job_name"]["S"]
    assert launcher.jobs_named(prefix) == [resp["job_name"]]
    assert launcher(dict(request))["job_name"] == resp["job_name"]
    (job,) = [i for i in launcher.ledger_items() if i["pk"]["S"].startswith("job#")]
    assert job["status"]["S"] == "InProgress"


def test_the_retry_sends_the_same_rendered_request(launcher, prefix, monkeypatch):
    from ftl_trigger import submit_flow as submit

    monkeypatch.setattr(submit, "WAIT_FOR_PEER_S", 0.05)
    sm = launcher.module.RUNTIME.sagemaker
    sent = []
    real_create = sm.create_training_job

    def record_then_crash(**kwargs):
        sent.append(kwargs)
        if len(sent) == 1:
            raise SystemExit("killed")
        return real_create(**kwargs)

    monkeypatch.setattr(sm, "create_training_job", record_then_crash)
    request = {"template": "bert-large-qa", "job_name": prefix, "client_token": prefix}
    with pytest.raises(SystemExit):
        launcher(dict(request))
    launcher(dict(request))
    assert sent[0] == sent[1]
