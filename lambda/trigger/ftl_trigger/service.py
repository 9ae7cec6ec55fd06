"""The launcher's actions: submit, describe, stop, list and templates."""

from __future__ import annotations

import json
import logging
import time
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

from ftl_trigger.doors import Call
from ftl_trigger.errors import CapacityError, Conflict, Throttled, UpstreamError
from ftl_trigger.ledger import Ledger, NameTaken, TokenTaken
from ftl_trigger.runtime import Runtime
from jobmodel import (
    JOB_STATUSES,
    TERMINAL_STATUSES,
    JobModelError,
    NotFound,
    ValidationError,
    checkpoint_s3_uri,
    make_job_name,
    output_s3_uri,
    render_create_training_job,
    request_hash,
    validate_job_name,
    validate_submit,
)

LOG = logging.getLogger("ftl.trigger")
SUBMITTING = "Submitting"
THROTTLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    }
)
LIST_FIELDS = frozenset({"template", "status", "limit", "next_token"})
# How long a duplicate waits for the first request of a client token to finish creating its
# job before it completes the creation itself (same job name, so never a second job).
WAIT_FOR_PEER_S = 5.0


class Launcher:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.ledger = Ledger(runtime.dynamodb, runtime.table_name)

    def dispatch(self, call: Call) -> tuple[Any, bool]:
        """Run one action; returns the contract object and whether a new job was created."""
        if call.action == "submit":
            return self.submit(call.params, requested_by=call.requested_by)
        if call.action == "templates":
            _only(call.params, frozenset())
            return {"templates": [t.public_view() for t in self.rt.catalog.values()]}, False
        if call.action == "list":
            return self.list_jobs(call.params), False
        _only(call.params, frozenset({"job_name"}))
        name = validate_job_name(call.params.get("job_name"))
        if call.action == "describe":
            return self.describe(name), False
        return self.stop(name), False

    # ---------------------------------------------------------------- submit
    def submit(self, params: Mapping[str, Any], *, requested_by: str) -> tuple[dict, bool]:
        req = validate_submit(params, self.rt.catalog, self.rt.platform)
        fingerprint = req.fingerprint()
        if req.client_token is not None:
            existing = self._ledger_call(self.ledger.get_token, req.client_token)
            if existing is not None:
                return self._replay(existing, fingerprint), False

        template = self.rt.catalog[req.template]
        for _ in range(3):
            now = self.rt.now()
            name = make_job_name(
                req.job_name_prefix or req.template, now=now, rand_hex=self.rt.random_hex()
            )
            rendered = render_create_training_job(
                req, template, self.rt.platform, job_name=name, requested_by=requested_by
            )
            created_at = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            job = {
                "job_name": name,
                "template": req.template,
                "status": SUBMITTING,
                "instance_type": req.instance_type,
                "instance_count": req.instance_count,
                "spot": req.spot,
                "checkpoint_s3_uri": checkpoint_s3_uri(self.rt.platform, name),
                "output_s3_uri": output_s3_uri(self.rt.platform, name),
                "requested_by": requested_by,
                "created_at": created_at,
                "updated_at": created_at,
                "client_token": req.client_token,
                "request": json.dumps(req.to_dict(), sort_keys=True),
                "request_fingerprint": fingerprint,
                "rendered": json.dumps(rendered, sort_keys=True),
                "rendered_hash": request_hash(rendered),
            }
            token = None
            if req.client_token is not None:
                token = {
                    "client_token": req.client_token,
                    "job_name": name,
                    "fingerprint": fingerprint,
                    "created_at": created_at,
                }
            try:
                self._ledger_call(self.ledger.claim, job, token)
            except NameTaken:
                continue  # a random suffix collided; draw another name
            except TokenTaken:
                existing = self._ledger_call(self.ledger.get_token, req.client_token)
                if existing is None:  # the winner failed to start and freed the token
                    continue
                return self._replay(existing, fingerprint), False
            return self._create(job, rendered), True
        raise UpstreamError("could not allocate a unique job name after 3 attempts")

    def _create(self, job: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
        name = job["job_name"]
        try:
            arn = self.rt.sagemaker.create_training_job(**rendered)["TrainingJobArn"]
        except (ClientError, BotoCoreError) as exc:
            if _code(exc) == "ResourceInUse":
                # Only a peer completing the same claimed job can have taken this name.
                return self._adopt_existing(job)
            error = map_aws_error(exc, "CreateTrainingJob")
            if _ambiguous(exc):
                # A timeout or 5xx may hide a job SageMaker did create: look before failing.
                try:
                    described = self._describe_remote(name)
                except JobModelError:
                    # Cannot tell: keep the claim, so a replay of the token finishes it with
                    # the same job name (and never starts a second job).
                    raise error from None
                if described is not None:
                    return self._adopt_existing(job, described)
            self._ledger_call(
                self.ledger.fail_job,
                name,
                {
                    "status": "FailedToStart",
                    "error_type": error.type,
                    "failure_reason": error.message,
                    "updated_at": self._stamp(),
                },
                job.get("client_token"),
            )
            raise error from None
        job.update(status="InProgress", job_arn=arn, updated_at=self._stamp())
        self._record_started(job)
        return self._view(job)

    def _record_started(self, job: dict[str, Any]) -> None:
        """Mark the claimed job started. The job exists whatever happens here, so a ledger
        failure is logged, not returned: the job-events handler and any replay of the token
        bring the record up to date."""
        try:
            self._ledger_call(
                self.ledger.update_job,
                job["job_name"],
                {
                    "status": job["status"],
                    "job_arn": job["job_arn"],
                    "updated_at": job["updated_at"],
                },
                expect_status=SUBMITTING,
            )
        except JobModelError as err:
            LOG.warning(
                "job %s started but the ledger update failed: %s", job["job_name"], err.message
            )

    def _adopt_existing(
        self, job: dict[str, Any], described: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        described = described or self._describe_remote(job["job_name"])
        if described is None:
            raise Conflict(f"job name {job['job_name']} is in use by another job", field="job_name")
        job.update(
            status=described["TrainingJobStatus"],
            job_arn=described["TrainingJobArn"],
            updated_at=self._stamp(),
        )
        self._record_started(job)
        return self._view(job)

    def _replay(self, token: Mapping[str, Any], fingerprint: str) -> dict[str, Any]:
        if token["fingerprint"] != fingerprint:
            raise Conflict(
                f"client_token {token['client_token']} was already used for a "
                f"different request (job {token['job_name']})",
                field="client_token",
            )
        deadline = time.monotonic() + WAIT_FOR_PEER_S
        delay = 0.02
        while True:
            job = self._ledger_call(self.ledger.get_job, token["job_name"])
            if job is None:
                raise UpstreamError(
                    f"ledger has token {token['client_token']} but not job {token['job_name']}"
                )
            if job["status"] != SUBMITTING:
                return self._view(job)
            if time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        # The first request stopped between its ledger write and SageMaker's answer (or is
        # slow): finish its work with the very same rendered request and job name.
        return self._create(job, json.loads(job["rendered"]))

    # -------------------------------------------------------------- describe
    def describe(self, name: str) -> dict[str, Any]:
        job = self._ledger_call(self.ledger.get_job, name)
        if job is None:
            raise NotFound(f"no job named {name} was started by this platform", field="job_name")
        if job["status"] not in TERMINAL_STATUSES and job["status"] != SUBMITTING:
            described = self._describe_remote(name)
            if described is not None:
                changes = remote_fields(described)
                if any(job.get(k) != v for k, v in changes.items()):
                    changes["updated_at"] = self._stamp()
                    self._ledger_call(self.ledger.update_job, name, changes)
                job.update(changes)
        return self._view(job, detail=True)

    def _describe_remote(self, name: str) -> dict[str, Any] | None:
        try:
            return self.rt.sagemaker.describe_training_job(TrainingJobName=name)
        except ClientError as exc:
            # AWS says ResourceNotFound; moto says ValidationException.
            if _code(exc) in ("ResourceNotFound", "ValidationException"):
                return None
            raise map_aws_error(exc, "DescribeTrainingJob") from None
        except BotoCoreError as exc:
            raise map_aws_error(exc, "DescribeTrainingJob") from None

    # ------------------------------------------------------------------ stop
    def stop(self, name: str) -> dict[str, Any]:
        job = self.describe(name)
        if job["status"] in TERMINAL_STATUSES or job["status"] == "Stopping":
            return job
        try:
            self.rt.sagemaker.stop_training_job(TrainingJobName=name)
        except (ClientError, BotoCoreError) as exc:
            raise map_aws_error(exc, "StopTrainingJob") from None
        job["status"] = "Stopping"
        self._ledger_call(
            self.ledger.update_job, name, {"status": "Stopping", "updated_at": self._stamp()}
        )
        return job

    # ------------------------------------------------------------------ list
    def list_jobs(self, params: Mapping[str, Any]) -> dict[str, Any]:
        _only(params, LIST_FIELDS)
        template = params.get("template")
        if template is not None:
            if not isinstance(template, str):
                raise ValidationError("template", "template must be a string")
            if template not in self.rt.catalog:
                raise NotFound(f"no template named {template[:80]!r}", field="template")
        status = params.get("status")
        if status is not None and status not in JOB_STATUSES:
            raise ValidationError("status", f"status must be one of {', '.join(JOB_STATUSES)}")
        limit = params.get("limit", 50)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise ValidationError("limit", "limit must be an integer from 1 to 100")
        next_token = params.get("next_token")
        if next_token is not None and (not isinstance(next_token, str) or len(next_token) > 2048):
            raise ValidationError("next_token", "next_token is not one this launcher returned")
        items, token = self._ledger_call(
            self.ledger.list_jobs,
            template=template,
            status=status,
            limit=limit,
            next_token=next_token,
        )
        result: dict[str, Any] = {
            "jobs": [self._view(i, detail=True, secondary=False) for i in items]
        }
        if token:
            result["next_token"] = token
        return result

    # --------------------------------------------------------------- helpers
    def _view(
        self, job: Mapping[str, Any], *, detail: bool = False, secondary: bool = True
    ) -> dict[str, Any]:
        view = {
            "job_name": job["job_name"],
            "job_arn": job.get("job_arn"),
            "template": job["template"],
            "status": job["status"],
            "instance_type": job["instance_type"],
            "instance_count": job["instance_count"],
            "spot": job["spot"],
            "checkpoint_s3_uri": job["checkpoint_s3_uri"],
            "output_s3_uri": job["output_s3_uri"],
            "console_url": self.rt.console_base + job["job_name"],
        }
        if detail:
            if secondary:
                view["secondary_status"] = job.get("secondary_status")
            view["created_at"] = job["created_at"]
            view["requested_by"] = job.get("requested_by")
            for key in (
                "failure_reason",
                "billable_seconds",
                "training_seconds",
                "spot_savings_percent",
            ):
                if job.get(key) is not None:
                    view[key] = job[key]
        return view

    def _stamp(self) -> str:
        return self.rt.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _ledger_call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise map_aws_error(exc, "DynamoDB " + getattr(fn, "__name__", "call")) from None


def remote_fields(described: Mapping[str, Any]) -> dict[str, Any]:
    """Ledger fields from a DescribeTrainingJob response (or a state-change event detail)."""
    fields: dict[str, Any] = {
        "status": described.get("TrainingJobStatus"),
        "secondary_status": described.get("SecondaryStatus"),
    }
    if described.get("FailureReason"):
        fields["failure_reason"] = described["FailureReason"]
    billable = described.get("BillableTimeInSeconds")
    training = described.get("TrainingTimeInSeconds")
    if billable is not None:
        fields["billable_seconds"] = int(billable)
    if training is not None:
        fields["training_seconds"] = int(training)
    if billable is not None and training and described.get("EnableManagedSpotTraining"):
        fields["spot_savings_percent"] = round((1 - billable / training) * 100, 1)
    return {k: v for k, v in fields.items() if v is not None}


def map_aws_error(exc: Exception, call: str) -> JobModelError:
    """Map an AWS failure to the contract's error types; the message names the call."""
    if isinstance(exc, ClientError):
        code = _code(exc)
        message = exc.response.get("Error", {}).get("Message", "")
        reasons = {r.get("Code") for r in exc.response.get("CancellationReasons") or []}
        if code in THROTTLE_CODES or "ThrottlingError" in reasons:
            return Throttled(f"{call} was throttled by AWS after retries: {message}")
        if code == "ResourceLimitExceeded":
            return CapacityError(f"{call} hit a SageMaker quota or capacity limit: {message}")
        if code == "ResourceInUse":
            return Conflict(f"{call}: resource in use: {message}")
        return UpstreamError(f"{call} failed: {code}: {message}")
    return UpstreamError(f"{call} failed: {type(exc).__name__}: {exc}")


def _ambiguous(exc: Exception) -> bool:
    """True when the request may have reached SageMaker although no answer came back."""
    if isinstance(exc, ClientError):
        return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500
    return not isinstance(
        exc,
        ConnectTimeoutError | EndpointConnectionError | NoCredentialsError | ParamValidationError,
    )


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code", "")
    return ""


def _only(params: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(str(k) for k in params if k not in allowed)
    if unknown:
        raise ValidationError(
            unknown[0],
            f"unknown field {unknown[0][:80]!r}; allowed: {', '.join(sorted(allowed)) or 'none'}",
        )
