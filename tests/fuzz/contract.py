"""What every answer of the launcher must be, whatever it was sent, and how to send it.

``send`` puts a payload through one door of the real handler and returns the contract object
it answered with, after checking the answer's shape:

* direct door: a JSON object (``allow_nan=False``, UTF-8 encodable) that is either a result
  or exactly ``{"error": {"type", "message", "field"?}}`` with a contract type;
* HTTP door: ``{"statusCode", "headers", "body"}`` with a JSON body of the same kind and the
  status the contract gives the error type (201/200 for a new/replayed job).

``WriteProbe`` counts what the handler asked AWS to change (DynamoDB writes and
CreateTrainingJob) so a test can assert a rejected request wrote nothing at all.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from jobmodel.contract.errors import HTTP_STATUS
from tests.expected import JOB_FIELDS
from tests.lambda_support import http_event

# What a caller can cause. UpstreamError (an AWS failure or the launcher's own internal error)
# and the capacity/throttling types must never come from input alone.
CALLER_ERRORS = frozenset({"ValidationError", "NotFound", "Conflict"})
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")


class WriteProbe:
    """Counts the handler's DynamoDB writes and CreateTrainingJob calls (with their params)."""

    def __init__(self, runtime: Any) -> None:
        self.writes = 0
        self.created: list[dict[str, Any]] = []
        for op in WRITES:
            runtime.dynamodb.meta.events.register(f"before-call.dynamodb.{op}", self._write)
        runtime.sagemaker.meta.events.register(
            "before-call.sagemaker.CreateTrainingJob", self._create
        )

    def _write(self, **_: Any) -> None:
        self.writes += 1

    def _create(self, params: Any = None, **_: Any) -> None:
        self.created.append(json.loads(params["body"]) if params else {})

    def mark(self) -> tuple[int, int]:
        return self.writes, len(self.created)


@dataclass
class Answer:
    """One answer: the contract object, the HTTP status (None for the direct door)."""

    body: dict[str, Any]
    status: int | None = None
    error: dict[str, Any] | None = field(default=None)

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else self.error["type"]


def http_raw(method: str, path: str, raw_body: str | None, *, b64: bool = False) -> dict:
    event = http_event(method, path)
    if raw_body is not None:
        if b64:
            raw_body = base64.b64encode(raw_body.encode("utf-8", "surrogatepass")).decode()
        event["body"] = raw_body
        event["isBase64Encoded"] = b64
    return event


def event_for(door: str, payload: Any, *, method: str = "POST", path: str = "/jobs") -> Any:
    """The Lambda event that carries ``payload`` through ``door`` ("direct" or "http")."""
    if door == "direct":
        return payload
    if door == "http":
        raw = None if payload is None else json.dumps(payload)
        return http_raw(method, path, raw)
    raise ValueError(door)


def check_answer(response: Any, *, http: bool) -> Answer:
    """Assert ``response`` is a contract object for its door; return it parsed."""
    assert isinstance(response, dict), f"not an object: {response!r:.300}"
    if http:
        assert set(response) == {"statusCode", "headers", "body"}, response
        assert response["headers"].get("content-type") == "application/json"
        text = response["body"]
        assert isinstance(text, str)
        text.encode("utf-8")  # the body must be sendable as UTF-8
        body = json.loads(text)
        status = response["statusCode"]
    else:
        body, status = response, None
    json.dumps(body, allow_nan=False, ensure_ascii=False).encode("utf-8")
    assert isinstance(body, dict), body
    if "error" not in body:
        if http:
            assert status in (200, 201), (status, body)
        return Answer(body, status)
    assert set(body) == {"error"}, body
    err = body["error"]
    assert isinstance(err, dict) and {"type", "message"} <= set(err) <= {
        "type",
        "message",
        "field",
    }, err
    assert err["type"] in HTTP_STATUS, err
    assert isinstance(err["message"], str) and err["message"], err
    assert "Traceback" not in err["message"] and 'File "' not in err["message"], err
    assert len(err["message"]) <= 2000, f"message of {len(err['message'])} characters"
    if "field" in err:
        assert isinstance(err["field"], str), err  # the offending key as sent (may be "")
    if http:
        assert status == HTTP_STATUS[err["type"]], (status, err)
    return Answer(body, status, err)


def send(launcher: Any, probe: WriteProbe, event: Any) -> tuple[Answer, int, int]:
    """Call the handler; return the checked answer, the writes and the creates it caused."""
    from ftl_trigger.adapters import is_http

    writes, creates = probe.mark()
    answer = check_answer(launcher(event), http=is_http(event))
    now_writes, now_creates = probe.mark()
    return answer, now_writes - writes, now_creates - creates


def assert_rejected_cleanly(answer: Answer, writes: int, creates: int) -> None:
    """A rejection by the caller's input: a caller error, and nothing written or started."""
    assert answer.error_type in CALLER_ERRORS, answer.body
    assert creates == 0, f"rejected request created {creates} job(s): {answer.body}"
    assert writes == 0, f"rejected request wrote {writes} ledger record(s): {answer.body}"


def assert_outcome(answer: Answer, writes: int, creates: int) -> None:
    """Either a clean rejection, or exactly one job started and reported."""
    if answer.error is not None:
        if answer.error_type == "Conflict":  # a reused token: nothing new may happen
            assert creates == 0 and writes == 0, answer.body
            return
        assert_rejected_cleanly(answer, writes, creates)
        return
    if isinstance(answer.body, dict) and answer.body.get("dry_run") is True:
        # docs/API.md: a dry run answers the job it would create, without job_arn or
        # console_url, and starts and writes nothing
        assert JOB_FIELDS - {"job_arn", "console_url"} <= set(answer.body), answer.body
        assert creates == 0 and writes == 0, (creates, writes)
        return
    if "job_name" in answer.body and "jobs" not in answer.body:
        assert JOB_FIELDS <= set(answer.body), answer.body
        assert creates <= 1, f"{creates} jobs for one request"


class Door:
    """The handler with a probe on its clients: ``door(event) -> (answer, writes, creates)``."""

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher
        self.probe = WriteProbe(launcher.module.RUNTIME)

    def __call__(self, event: Any) -> tuple[Answer, int, int]:
        return send(self.launcher, self.probe, event)
