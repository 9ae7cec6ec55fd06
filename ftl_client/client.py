"""A Python client for the deployed launcher (boto3 only).

It finds the launcher from the ``ftl-launcher`` stack's outputs (or an explicit function name
or HTTP API URL), calls it through either door of the contract, and turns the contract's error
object into :class:`LauncherError`.
"""

from __future__ import annotations

import math
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

from ftl_client import transport
from ftl_client.errors import LauncherError, aws_code, aws_error, aws_message
from ftl_client.progress import Progress, parse_time
from jobmodel.contract.names import TRAINING_LOG_GROUP
from jobmodel.contract.routes import route_for
from jobmodel.contract.statuses import TERMINAL_STATUSES

DEFAULT_STACK = "ftl-launcher"
TRANSPORTS = ("invoke", "http")
LOG_GROUP = TRAINING_LOG_GROUP

_API_REGION_RE = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com", re.IGNORECASE)
QUEUED = "Queued"


def queue_order(job: dict[str, Any]) -> tuple[bool, int, float, str]:
    """Sort key of a queued job: by ``queue_position`` (1 = next), jobs without one after
    those with one, then oldest first (``queued_at``, else ``queued_seconds``)."""
    position = job.get("queue_position")
    known = isinstance(position, int) and not isinstance(position, bool)
    since = parse_time(job.get("queued_at"))
    waited = job.get("queued_seconds")
    if since is not None:
        since_s = since.timestamp()
    elif isinstance(waited, int | float) and not isinstance(waited, bool):
        since_s = time.time() - float(waited)
    else:
        since_s = math.inf
    return (not known, position if known else 0, since_s, str(job.get("job_name", "")))


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
        # botocore reads AWS_DEFAULT_REGION (and the profile); AWS_REGION, which the AWS CLI v2
        # and the other SDKs read, is honoured too.
        self.region = region or self.session.region_name or os.environ.get("AWS_REGION") or None
        if not self.region:
            raise LauncherError(
                "ConfigError",
                "no AWS region configured; pass --region, set AWS_DEFAULT_REGION, or set "
                "region in your AWS profile",
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
                if "does not exist" in aws_message(exc):
                    raise LauncherError(
                        "ConfigError",
                        f"stack {self.stack_name} not found in {self.region}; deploy the "
                        "platform, or point the client at the launcher with --stack NAME, "
                        "--function NAME or --api-url URL",
                    ) from None
                raise aws_error(exc, "cloudformation:DescribeStacks") from None
            except BotoCoreError as exc:
                raise aws_error(exc, "cloudformation:DescribeStacks") from None
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
        return self._call("submit", self._request(template, fields))

    def sweep(self, template: str, **fields: Any) -> dict[str, Any]:
        """Start a hyperparameter sweep of ``template`` (one SageMaker tuning job); ``fields``
        are the contract's sweep fields (``ranges``, ``objective``, ``max_trials``,
        ``cap_usd``, ...) and the submit fields a sweep takes (``hyperparameters``,
        ``instance_type``, ``tags``, ...). Like :meth:`submit`: fields that are None are left
        out, and without a ``client_token`` one is generated."""
        answer: dict[str, Any] = self._call("sweep", self._request(template, fields))
        return answer

    def whoami(self) -> dict[str, Any]:
        """The caller's team, whether it is an admin, the team's limits and current use."""
        return self._call("whoami", {})

    def models(
        self, template: str | None = None, *, limit: int | None = None, team: str | None = None
    ) -> list[dict[str, Any]]:
        """The model versions of the caller's team (an admin: every team's, or ``team``'s),
        newest first, each with its lineage."""
        params = {"template": template, "limit": limit, "team": team}
        return self._call("models", {k: v for k, v in params.items() if v is not None})["models"]

    def review(self, name: str, decision: str, description: str | None = None) -> dict[str, Any]:
        """An admin's ``Approved`` or ``Rejected`` of job ``name``'s model version."""
        params = {"job_name": name, "decision": decision}
        if description:
            params["description"] = description
        return self._call("review", params)

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

    def queue(self, team: str | None = None) -> list[dict[str, Any]]:
        """The jobs waiting in the job queue (status ``Queued``, every page) in queue order
        (:func:`queue_order`). ``team`` filters by team (admins only)."""
        return sorted(self.list_jobs(status=QUEUED, team=team), key=queue_order)

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

    def final_metrics(self, name: str) -> dict[str, float]:
        """The job's final metrics from ``describe`` (SageMaker's ``FinalMetricDataList`` as
        the launcher recorded it); empty while the job runs or when it reported none."""
        return dict(self.describe(name).get("final_metrics") or {})

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
        group = {"logGroupName": LOG_GROUP}
        try:
            pages = logs.get_paginator("describe_log_streams").paginate(
                **group, logStreamNamePrefix=prefix
            )
            streams = [
                s["logStreamName"]
                for page in pages
                for s in page.get("logStreams", [])
                if s["logStreamName"].startswith(prefix)
            ]
            events: list[dict[str, Any]] = []
            filtering = logs.get_paginator("filter_log_events")
            for i in range(0, len(streams), 100):  # FilterLogEvents takes 100 names at most
                since_arg = {} if since is None else {"startTime": since}
                for page in filtering.paginate(
                    **group, logStreamNames=streams[i : i + 100], **since_arg
                ):
                    events += page.get("events", [])
        except ClientError as exc:
            if aws_code(exc) == "ResourceNotFoundException":
                return []  # no job has logged anything in this account and region yet
            raise aws_error(exc, "logs:FilterLogEvents") from None
        except BotoCoreError as exc:
            raise aws_error(exc, "logs:FilterLogEvents") from None
        events.sort(key=lambda e: (e["timestamp"], e.get("ingestionTime", 0)))
        return [e for e in events if e.get("logStreamName", "").startswith(prefix)]

    # ------------------------------------------------------------- transport
    @staticmethod
    def _request(template: str, fields: dict[str, Any]) -> dict[str, Any]:
        """A submit's or sweep's request: the fields set, the template, and a client token
        (unless a dry run), so a retried call never starts a second job or sweep."""
        request = {k: v for k, v in fields.items() if v is not None}
        request["template"] = template
        if not request.get("dry_run"):
            request.setdefault("client_token", f"ftl-{uuid.uuid4().hex}")
        return request

    def _call(self, action: str, params: dict[str, Any]) -> Any:
        if self.transport == "http":
            route = route_for(action)
            return self._http(route.method, route.url_path(params), route.body(params))
        return self._invoke({"action": action, **params})

    def _invoke(self, event: dict[str, Any]) -> Any:
        return transport.invoke(self._client("lambda"), self.function_name, self.region, event)

    def _http(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        return transport.http(
            self.session.get_credentials(), self.api_url, self._api_region(), method, path, body
        )

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
