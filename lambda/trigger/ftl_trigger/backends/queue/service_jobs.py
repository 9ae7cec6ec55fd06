"""Queue mode (``FTL_SCHEDULER=queue``): training jobs go through AWS Batch service jobs.

boto3 only. The launcher validates and renders the CreateTrainingJob request exactly as in
direct mode; here it becomes a ``SubmitServiceJob`` (``serviceJobType`` ``SAGEMAKER_TRAINING``)
on the platform's job queue. Batch checks none of the payload and creates the training job
with its own service-linked role, so the launcher's validation stays the gate and the
payload limit (10 KiB) is checked here before anything is sent.

Parameter names and shapes follow botocore's ``batch`` model (2016-08-10): SubmitServiceJob,
DescribeServiceJob, ListServiceJobs, TerminateServiceJob, GetJobQueueSnapshot.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
)

from ftl_trigger.errors import Conflict, Throttled, UpstreamError
from jobmodel import JobModelError, NotFound, ValidationError
from jobmodel.capacity.scheduler import PRIORITY_LIMITS, share_of
from jobmodel.contract.errors import THROTTLE_CODES
from jobmodel.contract.names import DEFAULT_SHARE, JOB_NAME_TAG_KEY
from jobmodel.jobs.queue_state import BATCH_HOLDING, STOP_REASON, from_service_job

MAX_PAYLOAD_BYTES = 10 * 1024  # Batch's limit on serviceRequestPayload
PRIORITY_RANGE = PRIORITY_LIMITS  # SubmitServiceJob schedulingPriority (higher runs first)
SERVICE_JOB_TYPE = "SAGEMAKER_TRAINING"
# Retry what a second attempt can fix; a user error fails at once. Batch retries
# insufficient-capacity failures by itself without using an attempt; the CapacityError rule
# covers a capacity failure reported after the job started. At most 5 rules.
RETRY_STRATEGY: dict[str, Any] = {
    "attempts": 3,
    "evaluateOnExit": [
        {
            "action": "RETRY",
            "onStatusReason": "Received status from SageMaker: InternalServerError*",
        },
        {"action": "RETRY", "onStatusReason": "Received status from SageMaker: CapacityError*"},
        {
            "action": "EXIT",
            "onStatusReason": "Received status from SageMaker: ValidationException*",
        },
        {"action": "EXIT", "onStatusReason": "Received status from SageMaker: AlgorithmError*"},
        {"action": "EXIT", "onStatusReason": "*"},
    ],
}
# Failures that happen before a request reaches Batch: it cannot have queued anything.
_NOT_SENT = (ConnectTimeoutError, EndpointConnectionError, NoCredentialsError, ParamValidationError)


class SubmitUncertain(UpstreamError):
    """SubmitServiceJob failed in a way that may hide a job Batch did queue (a 5xx after
    botocore's retries, or no answer): look it up by name before calling the submit failed."""


def batch_client_token(team: str | None, client_token: str | None, job_name: str = "") -> str:
    """Batch's ``clientToken`` (1-64 chars) for a caller's token, scoped to the team; for a
    job submitted without one, derived from the job's name in a space of its own (its hashed
    text starts with ``[``, a caller's with the team name), so no caller's token can collide
    with the launcher's."""
    share = team or DEFAULT_SHARE
    if client_token is None:
        key = json.dumps(["job", share, job_name]).encode()
    else:
        key = f"{share}\x00{client_token}".encode()
    return hashlib.sha256(key).hexdigest()  # 64 hex characters


def service_job_request(
    rendered: Mapping[str, Any],
    *,
    job_queue: str,
    job_name: str,
    client_token: str | None,
    team: str | None,
    priority: int,
    tags: Mapping[str, str] | None = None,
    share_policy: str = "fairshare",
) -> dict[str, Any]:
    """The SubmitServiceJob parameters; raises ``ValidationError`` before anything is sent."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValidationError("priority", "priority must be an integer")
    low, high = PRIORITY_RANGE
    if not low <= priority <= high:
        raise ValidationError("priority", f"priority must be from {low} to {high}")
    payload = json.dumps(batch_payload(rendered, job_name), separators=(",", ":"), sort_keys=True)
    size = len(payload.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise ValidationError(
            "request",
            f"the rendered training request is {size} bytes; AWS Batch accepts at most "
            f"{MAX_PAYLOAD_BYTES} bytes (10 KiB) in a service job, so shorten the "
            "hyperparameters, environment or tags",
        )
    share = share_of(team, share_policy)
    request: dict[str, Any] = {
        "jobName": job_name,
        "jobQueue": job_queue,
        "serviceJobType": SERVICE_JOB_TYPE,
        "serviceRequestPayload": payload,
        "schedulingPriority": priority,
        "retryStrategy": RETRY_STRATEGY,
        "clientToken": batch_client_token(team, client_token, job_name),
    }
    if share_policy == "quotashare":
        request["quotaShareName"] = share
    else:
        request["shareIdentifier"] = share
    if tags:
        request["tags"] = dict(list(tags.items())[:50])
    return request


def batch_payload(rendered: Mapping[str, Any], job_name: str) -> dict[str, Any]:
    """The CreateTrainingJob request Batch gets: the rendered one with the ``ftl:job-name``
    tag, so the training job Batch creates (and renames) leads back to its ledger job."""
    tags = [t for t in rendered.get("Tags", []) if t.get("Key") != JOB_NAME_TAG_KEY]
    return {**rendered, "Tags": [*tags, {"Key": JOB_NAME_TAG_KEY, "Value": job_name}]}


def submit(client: Any, request: Mapping[str, Any]) -> dict[str, str]:
    """Submit; ``{"jobId", "jobName", "jobArn"}``. A repeated clientToken returns the job
    it queued the first time (found by name) instead of an error. Raises the contract's
    errors; :class:`SubmitUncertain` when the job may exist although no answer said so."""
    try:
        out = client.submit_service_job(**request)
    except ClientError as exc:
        if _is_token_reuse(exc):
            found = _find_by_name(client, request["jobQueue"], request["jobName"])
            if found is not None:
                return found
        error = map_error(exc, "SubmitServiceJob")
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
            raise SubmitUncertain(error.message) from None
        raise error from None
    except BotoCoreError as exc:
        message = f"AWS Batch SubmitServiceJob failed: {exc}"
        if isinstance(exc, _NOT_SENT):
            raise UpstreamError(message) from None
        raise SubmitUncertain(message) from None
    return {"jobId": out["jobId"], "jobName": out["jobName"], "jobArn": out.get("jobArn", "")}


def find_by_name(client: Any, job_queue: str, job_name: str) -> dict[str, str] | None:
    """The queue's job named ``job_name`` (``{"jobId", "jobName", "jobArn"}``), or ``None``
    when Batch has none; raises the contract's errors when Batch cannot be asked."""
    try:
        out = client.list_service_jobs(
            jobQueue=job_queue, filters=[{"name": "JOB_NAME", "values": [job_name]}]
        )
    except ClientError as exc:
        raise map_error(exc, "ListServiceJobs") from None
    except BotoCoreError as exc:
        raise UpstreamError(f"AWS Batch ListServiceJobs failed: {exc}") from None
    for summary in out.get("jobSummaryList", []):
        if summary.get("jobName") == job_name:
            arn = summary.get("jobArn", "")
            return {"jobId": summary["jobId"], "jobName": job_name, "jobArn": arn}
    return None


def describe(client: Any, job_id: str, *, observed_ms: int | None = None) -> dict[str, Any]:
    """Ledger-shaped state of a service job (a waiting job's place in the queue is
    ``queue_order``'s, read once per request: ``ftl_trigger.backends.queue.places``).
    ``observed_ms``: when it was asked (default: the job's latest timestamp). Batch changes a
    waiting job's reason without a new timestamp or event, so only an observation stamped with
    the time it was made can replace an older reason in the ledger."""
    try:
        described = client.describe_service_job(jobId=job_id)
    except ClientError as exc:
        raise map_error(exc, "DescribeServiceJob") from None
    except BotoCoreError as exc:
        raise UpstreamError(f"AWS Batch DescribeServiceJob failed: {exc}") from None
    update = from_service_job(described, observed_ms=observed_ms)
    out = update.fields()
    out["job_name"] = described.get("jobName")
    return out


def positions_of(order: list[str]) -> dict[str, int]:
    """Job ARN -> 1-based position in ``order`` (a job listed twice keeps its first)."""
    positions: dict[str, int] = {}
    for index, arn in enumerate(order, start=1):
        positions.setdefault(arn, index)
    return positions


def queue_order(client: Any, job_queue: str) -> list[str] | None:
    """One GetJobQueueSnapshot: the ARNs of the jobs at the front of the queue (the first
    100), next first; None when Batch does not answer."""
    try:
        snap = client.get_job_queue_snapshot(jobQueue=job_queue)
    except (ClientError, BotoCoreError):
        return None  # position is a courtesy: never fail a describe or a list for it
    jobs = (snap.get("frontOfQueue") or {}).get("jobs") or []
    return [e["jobArn"] for e in jobs if isinstance(e.get("jobArn"), str)]


# Batch statuses of a job that holds its instances, and of one waiting its turn.
HOLDING = BATCH_HOLDING
READY = "RUNNABLE"
MAX_LIST_PAGES = 10  # per status: 1,000 jobs


def jobs_in(client: Any, job_queue: str, status: str) -> list[dict[str, Any]]:
    """Every summary of the queue's jobs in ``status`` (ListServiceJobs, at most
    :data:`MAX_LIST_PAGES` pages of 100); raises the contract's errors."""
    out: list[dict[str, Any]] = []
    token = None
    for _ in range(MAX_LIST_PAGES):
        page = list_jobs(client, job_queue, status=status, next_token=token)
        out += page["jobs"]
        token = page["next_token"]
        if not token:
            break
    return out


def list_jobs(
    client: Any,
    job_queue: str,
    *,
    status: str | None = None,
    share: str | None = None,
    next_token: str | None = None,
    max_results: int = 100,
) -> dict[str, Any]:
    """One page of ListServiceJobs: ``{"jobs": [...summaries], "next_token"}``."""
    params: dict[str, Any] = {"jobQueue": job_queue, "maxResults": max_results}
    if status is not None:
        params["jobStatus"] = status
    if share is not None:
        params["filters"] = [{"name": "SHARE_IDENTIFIER", "values": [share]}]
    if next_token:
        params["nextToken"] = next_token
    try:
        out = client.list_service_jobs(**params)
    except ClientError as exc:
        raise map_error(exc, "ListServiceJobs") from None
    except BotoCoreError as exc:
        raise UpstreamError(f"AWS Batch ListServiceJobs failed: {exc}") from None
    return {"jobs": out.get("jobSummaryList", []), "next_token": out.get("nextToken")}


def terminate(client: Any, job_id: str, *, requested_by: str) -> None:
    """Terminate a service job (a queued one starts nothing). The reason starts with
    ``STOP_REASON`` so the state mapping records ``Stopped``, not ``FailedToStart``."""
    reason = f"{STOP_REASON} requested by {requested_by}"[:1024]
    try:
        client.terminate_service_job(jobId=job_id, reason=reason)
    except ClientError as exc:
        raise map_error(exc, "TerminateServiceJob") from None
    except BotoCoreError as exc:
        raise UpstreamError(f"AWS Batch TerminateServiceJob failed: {exc}") from None


def map_error(exc: ClientError, operation: str) -> JobModelError:
    """A Batch error as the contract's error. Batch has two error codes: ClientException
    (4xx, the message says why) and ServerException (5xx)."""
    error = exc.response.get("Error", {})
    code = error.get("Code", "")
    message = error.get("Message", "") or code
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in THROTTLE_CODES or status == 429:
        return Throttled(f"AWS Batch is throttling {operation}; retry with backoff")
    if code == "ClientException":
        text = message.lower()
        # a job that is gone is the caller's NotFound; a missing queue is the platform's fault
        missing = "does not exist" in text or "not found" in text
        if missing and operation != "SubmitServiceJob":
            return NotFound(f"AWS Batch {operation}: {message}")
        if _is_token_reuse(exc):
            return Conflict(f"AWS Batch {operation}: {message}")
        return UpstreamError(f"AWS Batch refused {operation}: {message}")
    return UpstreamError(f"AWS Batch {operation} failed ({code or status}): {message}")


def _is_token_reuse(exc: ClientError) -> bool:
    message = (exc.response.get("Error", {}).get("Message") or "").lower()
    return exc.response.get("Error", {}).get("Code") == "ClientException" and (
        "clienttoken" in message or "idempoten" in message
    )


def _find_by_name(client: Any, job_queue: str, job_name: str) -> dict[str, str] | None:
    try:
        return find_by_name(client, job_queue, job_name)
    except JobModelError:  # cannot look: the caller reports its own error
        return None
