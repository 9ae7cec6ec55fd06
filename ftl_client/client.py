"""A Python client for the deployed launcher (boto3 only).

It finds the launcher from the ``ftl-launcher`` stack's outputs (or an explicit function name
or HTTP API URL), calls it through either door of the contract, and turns the contract's error
object into :class:`LauncherError`.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from jobmodel.contract import TERMINAL_STATUSES
from jobmodel.errors import ERROR_TYPES, HTTP_STATUS
from jobmodel.names import TRAINING_LOG_GROUP
from jobmodel.routes import route_for

DEFAULT_STACK = "ftl-launcher"
TRANSPORTS = ("invoke", "http")
SUCCEEDED = "Completed"
LOG_GROUP = TRAINING_LOG_GROUP
INTERRUPTED = "Interrupted"

# Errors the caller can fix by changing the request or the client's configuration.
CLIENT_ERRORS = frozenset(
    {name for name, error in ERROR_TYPES.items() if error.caller_fixable} | {"ConfigError"}
)

_API_REGION_RE = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com", re.IGNORECASE)


class LauncherError(Exception):
    """A failure reported by the launcher (the contract's error object) or by the client.

    ``type`` is the contract's error type (``ValidationError``, ``NotFound``, ...) or, for
    failures before the launcher answered, ``ConfigError`` (the launcher cannot be found or
    called as configured), ``AwsError`` (an AWS call failed), ``ConnectionError``,
    ``Forbidden`` (the HTTP API refused the signature) or ``FunctionError`` (the function
    crashed instead of answering).
    """

    def __init__(
        self,
        type: str,
        message: str,
        field: str | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.type = type
        self.message = message
        self.field = field
        self.http_status = http_status if http_status is not None else HTTP_STATUS.get(type)

    @property
    def is_client_error(self) -> bool:
        """True when the caller can fix it (bad request, unknown name, configuration)."""
        return self.type in CLIENT_ERRORS

    def line(self) -> str:
        """One line: ``error: <type>: <message> (field: <field>)``."""
        text = f"error: {self.type}: {self.message}"
        if self.field:
            text += f" (field: {self.field})"
        return text

    def __str__(self) -> str:
        return self.line()[len("error: ") :]

    def __repr__(self) -> str:
        return (
            f"LauncherError(type={self.type!r}, message={self.message!r}, "
            f"field={self.field!r}, http_status={self.http_status!r})"
        )

    @classmethod
    def from_body(cls, body: Any, http_status: int | None = None) -> LauncherError | None:
        """The error in a contract response body, or None when the body is not an error."""
        if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
            return None
        err = body["error"]
        return cls(
            str(err.get("type") or "UpstreamError"),
            str(err.get("message") or "the launcher gave no message"),
            err.get("field"),
            http_status,
        )


@dataclass
class Progress:
    """What a watcher knows about a job so far; passed to ``on_update`` after each poll."""

    job: dict[str, Any]
    started_at: datetime
    interruptions: int = 0
    polls: int = 0
    changed: bool = True
    history: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.job.get("job_name", ""))

    @property
    def status(self) -> str:
        return str(self.job.get("status") or "Unknown")

    @property
    def secondary_status(self) -> str | None:
        return self.job.get("secondary_status")

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def succeeded(self) -> bool:
        return self.status == SUCCEEDED

    def elapsed(self, now: datetime | None = None) -> float:
        """Seconds since the job was created (or since watching began when that is unknown)."""
        now = now or datetime.now(UTC)
        return max(0.0, (now - self.started_at).total_seconds())

    def observe(self, job: dict[str, Any]) -> None:
        """Take one poll's describe result; count transitions into ``Interrupted``."""
        before = (self.status, self.secondary_status) if self.polls else None
        self.job = job
        self.polls += 1
        now = (self.status, self.secondary_status)
        self.changed = now != before
        if self.changed:
            if now[1] == INTERRUPTED and (before is None or before[1] != INTERRUPTED):
                self.interruptions += 1
            self.history.append(now)


def metrics_of(described: dict[str, Any] | None) -> dict[str, float]:
    """``FinalMetricDataList`` of a DescribeTrainingJob response as ``{name: value}``."""
    return {
        m["MetricName"]: float(m["Value"])
        for m in (described or {}).get("FinalMetricDataList", [])
        if "MetricName" in m and "Value" in m
    }


def interruptions_of(described: dict[str, Any] | None) -> int:
    """How many times SageMaker's ``SecondaryStatusTransitions`` entered ``Interrupted``."""
    transitions = (described or {}).get("SecondaryStatusTransitions", [])
    count, previous = 0, None
    for t in transitions:
        status = t.get("Status")
        if status == INTERRUPTED and previous != INTERRUPTED:
            count += 1
        previous = status
    return count


def parse_time(text: Any) -> datetime | None:
    """An ISO-8601 timestamp (``...Z`` allowed) as an aware datetime, or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class LauncherClient:
    """Calls the deployed launcher by direct Lambda Invoke (default) or its IAM-authorised
    HTTP API.

    Where the launcher is, first match wins: ``function_name`` / ``api_url`` arguments, the
    ``stack_name`` argument, the ``FTL_FUNCTION_NAME`` / ``FTL_API_URL`` environment variables,
    then the outputs of the stack named by ``FTL_STACK`` (default ``ftl-launcher``).
    ``clients`` takes ready-made boto3 clients by service name (``"lambda"``, ``"logs"``, ...).
    """

    def __init__(
        self,
        stack_name: str | None = None,
        *,
        function_name: str | None = None,
        api_url: str | None = None,
        transport: str | None = None,
        region: str | None = None,
        session: boto3.session.Session | None = None,
        clients: dict[str, Any] | None = None,
    ) -> None:
        transport = transport or os.environ.get("FTL_VIA") or "invoke"
        if transport not in TRANSPORTS:
            raise LauncherError(
                "ConfigError", f"transport must be one of {', '.join(TRANSPORTS)}, got {transport}"
            )
        self.transport = transport
        try:
            self.session = session or boto3.session.Session(region_name=region)
        except BotoCoreError as exc:  # e.g. AWS_PROFILE names a profile that does not exist
            raise LauncherError("ConfigError", str(exc)) from None
        self.region = region or self.session.region_name
        if not self.region:
            raise LauncherError(
                "ConfigError", "no AWS region configured; pass --region or set AWS_REGION"
            )
        if stack_name is None and function_name is None and api_url is None:
            function_name = os.environ.get("FTL_FUNCTION_NAME") or None
            api_url = os.environ.get("FTL_API_URL") or None
        self.stack_name = stack_name or os.environ.get("FTL_STACK") or DEFAULT_STACK
        self._function_name = function_name
        self._api_url = api_url
        self._outputs: dict[str, str] | None = None
        self._clients: dict[str, Any] = dict(clients or {})

    # ------------------------------------------------------------- discovery
    def stack_outputs(self) -> dict[str, str]:
        """The launcher stack's outputs (``OutputKey -> OutputValue``), read once."""
        if self._outputs is None:
            cfn = self._client("cloudformation")
            try:
                stacks = cfn.describe_stacks(StackName=self.stack_name)["Stacks"]
            except ClientError as exc:
                if "does not exist" in _message(exc):
                    raise LauncherError(
                        "ConfigError",
                        f"stack {self.stack_name} not found in {self.region}; deploy the "
                        "platform, or point the client at the launcher with --stack NAME, "
                        "--function NAME or --api-url URL",
                    ) from None
                raise _aws_error(exc, "cloudformation:DescribeStacks") from None
            except BotoCoreError as exc:
                raise _aws_error(exc, "cloudformation:DescribeStacks") from None
            outputs = stacks[0].get("Outputs", []) if stacks else []
            self._outputs = {o["OutputKey"]: o["OutputValue"] for o in outputs}
        return self._outputs

    def _output(self, key: str) -> str:
        value = self.stack_outputs().get(key)
        if not value:
            raise LauncherError(
                "ConfigError", f"stack {self.stack_name} has no output {key}; is it the launcher?"
            )
        return value

    @property
    def function_name(self) -> str:
        if self._function_name is None:
            self._function_name = self._output("TriggerFunctionName")
        return self._function_name

    @property
    def api_url(self) -> str:
        if self._api_url is None:
            self._api_url = self._output("JobApiUrl")
        return self._api_url

    # --------------------------------------------------------------- actions
    def templates(self) -> list[dict[str, Any]]:
        """The deployed catalog: every template's public view."""
        return self._call("templates", {})["templates"]

    def submit(self, template: str, **fields: Any) -> dict[str, Any]:
        """Start a job from ``template``; ``fields`` are the contract's submit fields
        (``hyperparameters``, ``instance_count``, ``spot``, ``inputs``, ``tags``, ...).

        Fields that are None are left out. Without a ``client_token`` one is generated, so a
        retried call never starts a second job.
        """
        request = {k: v for k, v in fields.items() if v is not None}
        request["template"] = template
        if not request.get("dry_run"):
            request.setdefault("client_token", f"ftl-{uuid.uuid4().hex}")
        return self._call("submit", request)

    def whoami(self) -> dict[str, Any]:
        """The caller's team, whether it is an admin, the team's limits and current use."""
        return self._call("whoami", {})

    def describe(self, name: str) -> dict[str, Any]:
        return self._call("describe", {"job_name": name})

    def stop(self, name: str) -> dict[str, Any]:
        """Ask SageMaker to stop the job; a job that has already ended is returned as is."""
        return self._call("stop", {"job_name": name})

    def list_jobs(
        self,
        template: str | None = None,
        status: str | None = None,
        *,
        limit: int | None = None,
        team: str | None = None,
    ) -> list[dict[str, Any]]:
        """Jobs from the ledger, newest first; follows pages until ``limit`` jobs (or all).
        ``team`` filters by team (admins only)."""
        jobs: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {
                "template": template,
                "status": status,
                "team": team,
                "next_token": token,
            }
            if limit is not None:
                params["limit"] = max(1, min(100, limit - len(jobs)))
            params = {k: v for k, v in params.items() if v is not None}
            page = self._call("list", params)
            jobs.extend(page.get("jobs", []))
            token = page.get("next_token")
            if not token or (limit is not None and len(jobs) >= limit):
                return jobs[:limit] if limit is not None else jobs

    def wait(
        self,
        name: str,
        poll_seconds: float = 15.0,
        on_update: Callable[[Progress], None] | None = None,
        *,
        timeout: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Progress:
        """Poll ``describe`` until the job ends; returns the last :class:`Progress`.

        ``on_update`` is called after every poll. Stopping the wait (an exception, Ctrl-C,
        ``timeout``) never stops the job.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.describe(name)
        progress = Progress(
            job=job, started_at=parse_time(job.get("created_at")) or datetime.now(UTC)
        )
        while True:
            progress.observe(job)
            if on_update is not None:
                on_update(progress)
            if progress.done:
                return progress
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {name} is still {progress.status} after {timeout}s")
            sleep(poll_seconds)
            job = self.describe(name)

    def training_job(self, name: str) -> dict[str, Any] | None:
        """SageMaker's own DescribeTrainingJob, or None when the caller may not read it."""
        try:
            return self._client("sagemaker").describe_training_job(TrainingJobName=name)
        except (ClientError, BotoCoreError):
            return None

    def final_metrics(self, name: str) -> dict[str, float]:
        """The job's final metrics (``FinalMetricDataList``); empty when none or unreadable."""
        return metrics_of(self.training_job(name))

    def logs(
        self,
        name: str,
        *,
        follow: bool = False,
        poll_seconds: float = 5.0,
        start_time: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[dict[str, Any]]:
        """The job's CloudWatch log events (``/aws/sagemaker/TrainingJobs``, streams
        ``<job name>/...``), oldest first, as ``{"timestamp", "stream", "message"}``.

        With ``follow`` it keeps polling until the job has ended and no new lines arrive.
        """
        logs = self._client("logs")
        seen: set[str] = set()
        since = start_time
        while True:
            fresh = 0
            for event in self._log_events(logs, name, since):
                if event["eventId"] in seen:
                    continue
                seen.add(event["eventId"])
                fresh += 1
                since = max(since or 0, event["timestamp"])
                yield {
                    "timestamp": event["timestamp"],
                    "stream": event["logStreamName"],
                    "message": event["message"].rstrip("\n"),
                }
            if not follow:
                return
            if not fresh and self.describe(name).get("status") in TERMINAL_STATUSES:
                # One last look: lines may land between the poll and the status change.
                late = [e for e in self._log_events(logs, name, since) if e["eventId"] not in seen]
                for event in late:
                    yield {
                        "timestamp": event["timestamp"],
                        "stream": event["logStreamName"],
                        "message": event["message"].rstrip("\n"),
                    }
                return
            sleep(poll_seconds)

    def _log_events(self, logs: Any, name: str, since: int | None) -> list[dict[str, Any]]:
        prefix = f"{name}/"
        try:
            streams: list[str] = []
            kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": prefix}
            while True:
                page = logs.describe_log_streams(**kwargs)
                streams += [s["logStreamName"] for s in page.get("logStreams", [])]
                if not page.get("nextToken"):
                    break
                kwargs["nextToken"] = page["nextToken"]
            streams = [s for s in streams if s.startswith(prefix)]
            events: list[dict[str, Any]] = []
            for i in range(0, len(streams), 100):  # FilterLogEvents takes 100 names at most
                kwargs = {"logGroupName": LOG_GROUP, "logStreamNames": streams[i : i + 100]}
                if since is not None:
                    kwargs["startTime"] = since
                while True:
                    page = logs.filter_log_events(**kwargs)
                    events += page.get("events", [])
                    if not page.get("nextToken"):
                        break
                    kwargs["nextToken"] = page["nextToken"]
        except ClientError as exc:
            if _code(exc) == "ResourceNotFoundException":
                return []  # no job has logged anything in this account and region yet
            raise _aws_error(exc, "logs:FilterLogEvents") from None
        except BotoCoreError as exc:
            raise _aws_error(exc, "logs:FilterLogEvents") from None
        events.sort(key=lambda e: (e["timestamp"], e.get("ingestionTime", 0)))
        return [e for e in events if e.get("logStreamName", "").startswith(prefix)]

    # ------------------------------------------------------------- transport
    def _call(self, action: str, params: dict[str, Any]) -> Any:
        if self.transport == "http":
            route = route_for(action)
            return self._http(route.method, route.url_path(params), route.body(params))
        return self._invoke({"action": action, **params})

    def _invoke(self, event: dict[str, Any]) -> Any:
        name = self.function_name
        try:
            reply = self._client("lambda").invoke(
                FunctionName=name, Payload=json.dumps(event).encode("utf-8")
            )
            raw = reply["Payload"].read()
        except ClientError as exc:
            if _code(exc) == "ResourceNotFoundException":
                raise LauncherError(
                    "ConfigError", f"launcher function {name} not found in {self.region}"
                ) from None
            raise _aws_error(exc, "lambda:Invoke") from None
        except NoCredentialsError:
            raise _no_credentials() from None
        except BotoCoreError as exc:
            raise _aws_error(exc, "lambda:Invoke") from None
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if reply.get("FunctionError"):
            detail = body if isinstance(body, dict) else {}
            raise LauncherError(
                "FunctionError",
                f"the launcher function {name} failed: "
                f"{detail.get('errorType', 'Unhandled')}: {detail.get('errorMessage', raw[:200])}",
            )
        error = LauncherError.from_body(body)
        if error is not None:
            raise error
        if not isinstance(body, dict):
            raise LauncherError("UpstreamError", f"the launcher answered with {raw[:200]!r}")
        return body

    def _http(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        url = self.api_url.rstrip("/") + path
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"content-type": "application/json"} if data is not None else {}
        credentials = self.session.get_credentials()
        if credentials is None:
            raise _no_credentials()
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", self._api_region()).add_auth(
            request
        )
        prepared = request.prepare()
        http_request = urllib.request.Request(
            url, data=data, headers=dict(prepared.headers.items()), method=method
        )
        try:
            with urllib.request.urlopen(http_request, timeout=120) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise LauncherError("ConnectionError", f"could not reach {url}: {reason}") from None
        try:
            parsed = json.loads(raw or b"null")
        except ValueError:
            parsed = None
        if 200 <= status < 300 and isinstance(parsed, dict):
            return parsed
        error = LauncherError.from_body(parsed, status)
        if error is not None:
            raise error
        message = parsed.get("message") if isinstance(parsed, dict) else None
        message = message or raw[:200].decode("utf-8", "replace") or "no body"
        kind = {403: "Forbidden", 401: "Forbidden", 404: "NotFound"}.get(status, "UpstreamError")
        where = path.split("?")[0]
        raise LauncherError(kind, f"HTTP {status} from {method} {where}: {message}", None, status)

    def _api_region(self) -> str:
        match = _API_REGION_RE.search(self.api_url)
        return match.group(1) if match else str(self.region)

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            config = Config(retries={"mode": "standard", "max_attempts": 3}, read_timeout=120)
            try:
                self._clients[service] = self.session.client(
                    service, region_name=self.region, config=config
                )
            except NoRegionError:
                raise LauncherError("ConfigError", "no AWS region configured") from None
        return self._clients[service]


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", ""))


def _no_credentials() -> LauncherError:
    return LauncherError(
        "ConfigError", "no AWS credentials found; configure a profile or set AWS_PROFILE"
    )


def _aws_error(exc: Exception, call: str) -> LauncherError:
    if isinstance(exc, NoCredentialsError):
        return _no_credentials()
    if isinstance(exc, ClientError):
        return LauncherError("AwsError", f"{call} failed: {_code(exc)}: {_message(exc)}")
    return LauncherError("AwsError", f"{call} failed: {exc}")
