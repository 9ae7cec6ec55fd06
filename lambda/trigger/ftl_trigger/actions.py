"""The launcher's actions: submit (``submit.py``), describe, stop, list, templates, whoami."""

from __future__ import annotations

import logging
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

from ftl_ledger.ledger import Ledger
from ftl_ledger.notify import BudgetWatch
from ftl_ledger.writer import Contended, JobWriter
from ftl_trigger.adapters import Call
from ftl_trigger.backend import BACKENDS, Backend, choose
from ftl_trigger.backend_queue import is_queued_job
from ftl_trigger.care_flow import CareFlow
from ftl_trigger.chain_flow import ChainFlow
from ftl_trigger.dependencies import Runtime
from ftl_trigger.identity import Caller
from ftl_trigger.paging import Signer
from ftl_trigger.queue_flow import QueueFlow
from ftl_trigger.queue_look import QueueSpot
from ftl_trigger.service_quotas import QuotaGate
from ftl_trigger.submit import RECORD_PENDING, SUBMITTING, SubmitFlow
from jobmodel import (
    TERMINAL_STATUSES,
    JobModelError,
    NotFound,
    ValidationError,
)
from jobmodel import attempts as A
from jobmodel import effects as E
from jobmodel.claims import CLAIM_BOUND_S, SUBMIT_GRACE_S
from jobmodel.contract import Status
from jobmodel.errors import CapacityError, Conflict, UpstreamError, aws_error
from jobmodel.job import Change, ChangeFor
from jobmodel.names import JOB_INDEX, TEAM_INDEX
from jobmodel.pricing import cost_usd
from jobmodel.queries import DESCRIBE_FIELDS, only_fields, validate_job_action, validate_list
from jobmodel.training_state import from_training_job

LOG = logging.getLogger("ftl.trigger")
# Added to a CapacityError (direct mode: only CreateTrainingJob raises it).
QUEUE_HINT = "deploy with ftl:scheduler=queue to queue jobs until capacity frees"
__all__ = ["SUBMIT_GRACE_S", "Launcher", "map_aws_error"]
_WRITE_ATTEMPTS = 3  # conditional writes of one change before leaving the job as it is


class Launcher(SubmitFlow, QueueFlow, ChainFlow, QuotaGate, CareFlow):
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.ledger = Ledger(runtime.dynamodb, runtime.table_name)
        # The one writer of existing job records (ftl_ledger.writer); the lambdas read the
        # runtime's clock and platform when called (tests replace them).
        self.writer = JobWriter(
            self.ledger,
            platform=lambda: self.rt.platform.platform_name,
            now=lambda: self.rt.now(),
            attempts=_WRITE_ATTEMPTS,
            on_spend=BudgetWatch(
                lambda: self.rt.notifier(), self.ledger, lambda: self.usage.month()
            ),
        )
        self.usage = self.writer.usage
        self.signer = Signer(self.ledger.paging_key)
        # How claimed jobs get capacity: chosen once, from the scheduler configuration.
        self.backend: Backend = choose(self, runtime.scheduler)

    def dispatch(self, call: Call) -> tuple[Any, bool]:
        """Run one action; returns the contract object and whether a new job was created."""
        caller = call.caller
        if call.action == "submit":
            return self.submit(call.params, caller)
        if call.action == "templates":
            only_fields(call.params, frozenset())
            return {"templates": self._templates(caller)}, False
        if call.action == "whoami":
            only_fields(call.params, frozenset())
            return self.whoami(caller), False
        if call.action == "list":
            return self.list_jobs(call.params, caller), False
        if call.action == "sweep":  # the schedule's door only (adapters)
            only_fields(call.params, frozenset())
            return self.sweep(), False
        name = validate_job_action(call.params)
        if call.action == "advance":  # the job-events function's door only (adapters)
            return self.advance(name), False
        if call.action == "describe":
            return self.describe(name, caller), False
        return self.stop(name, caller), False

    def _templates(self, caller: Caller) -> list[dict[str, Any]]:
        """Each template's view, with its channels' default data under the caller's team
        prefix (no default URI for a caller without a team in a teams deployment)."""
        lost = caller.teams_mode and caller.team_name is None
        bucket = None if lost else self.rt.platform.data_bucket
        return [
            t.public_view(data_bucket=bucket, team=caller.team_name)
            for t in self.rt.catalog.values()
        ]

    # ---------------------------------------------------------------- whoami
    def whoami(self, caller: Caller) -> dict[str, Any]:
        team = caller.team
        usage = None
        if team is not None:
            usage = self._ledger_call(self.usage.peek, team.name).to_view()
        return {
            "team": caller.team_name,
            "admin": caller.admin,
            "principal": caller.principal,
            "teams": caller.teams_mode,
            "limits": team.limits.to_dict() if team is not None else {},
            "usage": usage,
        }

    # -------------------------------------------------------------- describe
    def describe(self, name: str, caller: Caller) -> dict[str, Any]:
        job, position = self._fresh(name, caller)
        return self._view(job, detail=True, position=position)

    def _fresh(
        self, name: str, caller: Caller, *, advance: bool = True
    ) -> tuple[dict[str, Any], QueueSpot | None]:
        """The caller's job brought up to date from AWS, and its queue position (queue mode,
        while Batch reports one). ``advance``: start a capacity chain's pending attempt (a
        stop does not: it stops the job between the two attempts)."""
        job = self._ledger_call(self.ledger.get_job, name)
        if job is None or not caller.sees(job):
            # Another team's job reads exactly like a job that does not exist.
            raise NotFound(f"no job named {name} was started by this platform", field="job_name")
        job = self._look_after(job)  # a stale claim resolved, owed end effects done
        if advance and job.get("chain_pending") and job["status"] not in TERMINAL_STATUSES:
            job = self._advance(job)  # a capacity chain's next attempt not started yet
        if job["status"] in TERMINAL_STATUSES or job["status"] == SUBMITTING:
            return job, None
        if is_queued_job(job):
            job, position = self._refresh_queued(job)
            if advance and job.get("chain_pending"):  # it ended for want of capacity
                return self._advance(job), None
            return job, position
        described = self._describe_remote(A.current_training_job(job))
        if described is not None:
            update = from_training_job(described)
            job = self._write(job, lambda current: A.change_for(current, update))
            if advance and job.get("chain_pending"):
                job = self._advance(job)
        return job, None

    def _describe_remote(self, name: str) -> dict[str, Any] | None:
        try:
            described: dict[str, Any] = self.rt.sagemaker.describe_training_job(
                TrainingJobName=name
            )
            return described
        except ClientError as exc:
            # AWS says ResourceNotFound; moto says ValidationException.
            if _code(exc) in ("ResourceNotFound", "ValidationException"):
                return None
            raise map_aws_error(exc, "DescribeTrainingJob") from None
        except BotoCoreError as exc:
            raise map_aws_error(exc, "DescribeTrainingJob") from None

    # ------------------------------------------------------------------ stop
    def stop(self, name: str, caller: Caller) -> dict[str, Any]:
        job, position = self._fresh(name, caller, advance=False)
        if job["status"] in TERMINAL_STATUSES or job["status"] == "Stopping":
            return self._view(job, detail=True, position=position)
        if job["status"] == SUBMITTING:
            # Its start may still be in flight; a claim that never started is ended as
            # FailedToStart at the bound (jobmodel.claims), so this answer does not last.
            raise Conflict(
                f"job {name} is still starting; retry the stop in a few seconds (a job whose "
                f"start never happened ends as FailedToStart {int(CLAIM_BOUND_S)} seconds "
                "after its submit)",
                field="job_name",
            )
        if A.chained(job):
            stopped = self._stop_chained(job)
            if stopped is not None:  # between two attempts: nothing runs, the job stopped
                return self._view(stopped, detail=True)
        if is_queued_job(job):
            return self._view(self._stop_queued(job, caller), detail=True)
        try:
            self.rt.sagemaker.stop_training_job(TrainingJobName=A.current_training_job(job))
        except (ClientError, BotoCoreError) as exc:
            raise map_aws_error(exc, "StopTrainingJob") from None
        # By the order rules: the job may have ended (and its end been recorded and published
        # by another writer) while the stop call was in flight; Stopping never replaces it.
        stopping = Change.launcher(Status.STOPPING, self._now_ms())
        return self._view(self._write(job, stopping), detail=True)

    # ------------------------------------------------------------------ list
    def list_jobs(self, params: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
        query = validate_list(
            params,
            catalog=self.rt.catalog,
            teams=self.rt.teams,
            own_team=caller.team_name if caller.teams_mode and not caller.admin else None,
            admin=caller.admin,
        )
        team, next_token = query.team, query.next_token
        # The listing a token continues: the index and, on the team index, which team's jobs
        # (an admin's token for one team's list does not page another team's).
        index, start = f"{TEAM_INDEX}:{team}" if team else JOB_INDEX, None
        if next_token is not None:
            token_index, start = self._ledger_call(self.signer.verify, caller.scope, next_token)
            if token_index != index:
                raise ValidationError("next_token", "next_token belongs to another listing")
        items, last = self._ledger_call(
            self.ledger.list_jobs,
            template=query.template,
            status=query.status,
            limit=query.limit,
            start=start,
            team=team,
        )
        token = self._ledger_call(self.signer.sign, caller.scope, index, last) if last else None
        # A stale claim on the page is looked for, and owed end effects done (a failed look
        # leaves the job as listed).
        items = [self._look_after_quietly(i) if _needs_look(i) else i for i in items]
        positions = self._positions(items)
        result: dict[str, Any] = {
            "jobs": [
                self._view(
                    i,
                    detail=True,
                    secondary=False,
                    position=positions.get(i.get("batch_job_arn") or ""),
                )
                for i in items
            ]
        }
        if token:
            result["next_token"] = token
        return result

    # --------------------------------------------------------------- helpers
    def _view(
        self,
        job: Mapping[str, Any],
        *,
        detail: bool = False,
        secondary: bool = True,
        position: QueueSpot | None = None,
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
            # The current attempt's training job (a chain's later attempts are <job>-a<n>).
            "console_url": self.rt.console_base + A.current_training_job(job),
            "team": job.get("team"),
            "estimated_max_cost_usd": job.get("estimated_max_cost_usd"),
        }
        if job.get("estimated_max_cost_usd") is None and job.get("price_unknown_reason"):
            view["estimate_unknown_reason"] = job["price_unknown_reason"]
        if detail:
            self._cost(job, view)
        if detail:
            if secondary:
                view["secondary_status"] = job.get("secondary_status")
            view["created_at"] = job["created_at"]
            view["requested_by"] = job.get("requested_by")
            for key in DESCRIBE_FIELDS:
                if job.get(key) is not None:
                    view[key] = job[key]
        if job.get(RECORD_PENDING):  # started, and the ledger not written yet
            view[RECORD_PENDING] = True
        self._queue_fields(job, view, detail=detail, position=position)
        if A.chained(job):
            view.update(A.view_fields(job))
        return view

    @staticmethod
    def _cost(job: Mapping[str, Any], view: dict[str, Any]) -> None:
        """``cost_usd`` once billable seconds are known; null with a reason if unpriced."""
        billable = job.get("billable_seconds")
        if billable is None:
            return
        cost = job.get("cost_usd")
        if cost is None:
            cost = cost_usd(job.get("price_usd_per_hour"), int(job["instance_count"]), billable)
            if cost is not None and job.get("prior_cost_usd"):  # a chain's ended attempts
                cost = round(cost + float(job["prior_cost_usd"]), 4)
        view["cost_usd"] = cost
        if cost is None:
            view["cost_unknown_reason"] = job.get("price_unknown_reason") or (
                f"no on-demand price for {job['instance_type']} was known at submit"
            )

    def _map_error(self, exc: Exception, call: str) -> JobModelError:
        return map_aws_error(exc, call)

    @staticmethod
    def _ambiguous(exc: Exception) -> bool:
        return _ambiguous(exc)

    def _now_ms(self) -> int:
        return int(self.rt.now().timestamp() * 1000)

    def _backend_of(self, job: dict[str, Any]) -> Backend:
        """The backend a claimed job was claimed for: this platform's, or (a claim from
        before the platform changed its scheduler) the one that owns it."""
        if self.backend.owns(job):
            return self.backend
        for kind in BACKENDS.values():
            other = kind(self)
            if other.owns(job):
                return other
        raise UpstreamError(f"no backend starts job {job['job_name']}")  # pragma: no cover

    def _write(self, job: dict[str, Any], change: ChangeFor) -> dict[str, Any]:
        """Apply ``change`` through the one writer; the record as the ledger now has it (as
        another writer left it when the job kept changing)."""
        return self._apply(job, change)[0]

    def _apply(self, job: dict[str, Any], change: ChangeFor) -> tuple[dict[str, Any], bool]:
        """:meth:`_write`, and whether this change was written (False when it was not
        needed, or the job kept changing under other writers)."""
        try:
            done = self._ledger_call(self.writer.apply, job, change)
        except Contended:
            LOG.warning("job %s kept changing; left as another writer left it", job["job_name"])
            fresh = self._ledger_call(self.ledger.get_job, job["job_name"])
            return (fresh if fresh is not None else job), False
        # A write that ended the job owes its end effects: done now (or left owed, logged).
        return self._complete_effects(dict(done.after)), done.applied

    def _ledger_call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise map_aws_error(exc, "DynamoDB " + getattr(fn, "__name__", "call")) from None


def map_aws_error(exc: Exception, call: str) -> JobModelError:
    """Map an AWS failure to the contract's error types (``jobmodel.errors.aws_error``); the
    message names the call, and a capacity error says how to queue instead."""
    if not isinstance(exc, ClientError):
        return UpstreamError(f"{call} failed: {type(exc).__name__}: {exc}")
    error = exc.response.get("Error", {})
    reasons = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]
    mapped = aws_error(
        call, error.get("Code", ""), error.get("Message", ""), cancellation_codes=reasons
    )
    if isinstance(mapped, CapacityError):
        return CapacityError(f"{mapped.message}; retry later, or {QUEUE_HINT}")
    return mapped


def _needs_look(job: Mapping[str, Any]) -> bool:
    """A listed job a look may change: a claim past the grace, or owed end effects."""
    if job.get("status") == SUBMITTING:
        return bool(job.get("created_at"))
    return bool(E.owed(job))


def _ambiguous(exc: Exception) -> bool:
    """True when the request may have reached SageMaker although no answer came back."""
    if isinstance(exc, ClientError):
        return bool(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500)
    return not isinstance(
        exc,
        ConnectTimeoutError | EndpointConnectionError | NoCredentialsError | ParamValidationError,
    )


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""
