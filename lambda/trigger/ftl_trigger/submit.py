"""Submit: validate, check the team's limits, claim the job in the ledger, start it.

Starting the claimed job is the backend's (``ftl_trigger.backend``: SageMaker's
``CreateTrainingJob`` in direct mode, an AWS Batch service job in queue mode), chosen once
from the scheduler configuration. Everything before it is the same.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ftl_ledger.ledger import LimitRace, NameTaken, TokenTaken
from ftl_trigger.errors import Conflict, Throttled, UpstreamError
from ftl_trigger.identity import Caller
from jobmodel import (
    JobModelError,
    ValidationError,
    checkpoint_s3_uri,
    make_job_name,
    output_s3_uri,
    render_create_training_job,
    request_hash,
    validate_submit,
)
from jobmodel.capacity import chain as C
from jobmodel.capacity.plans import SPOT
from jobmodel.contract.statuses import Status
from jobmodel.jobs import attempts as A
from jobmodel.jobs import claims as CL
from jobmodel.jobs.record import Change, ChangeFor
from jobmodel.money import limits as Q
from jobmodel.money.pricing import estimate_max_cost_usd
from jobmodel.requests.submit import SubmitRequest

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_ledger.usage import TeamUsage
    from ftl_trigger.backend import Backend
    from ftl_trigger.dependencies import Runtime

R = TypeVar("R")

LOG = logging.getLogger("ftl.trigger")
SUBMITTING = Status.SUBMITTING
# How long a duplicate waits for the first request of a client token to finish creating its
# job before it completes the creation itself (same job name, so never a second job).
WAIT_FOR_PEER_S = 5.0
NAME_ATTEMPTS = 3
# A claim that lost a race for the team's usage is checked and tried again, at most this often.
MAX_RACES = 50


# The answer's flag for a job its backend has that the ledger has not recorded yet.
RECORD_PENDING = "record_pending"


def record_pending(job: Mapping[str, Any], learned: Mapping[str, Any]) -> dict[str, Any]:
    """The record as the ledger still holds it (``Submitting``), with what the start learned
    (``learned``: the job's ARN, its Batch job) and ``record_pending``: the answer says the
    record is still being written rather than a status the ledger does not hold."""
    return {**job, **{k: v for k, v in learned.items() if v is not None}, RECORD_PENDING: True}


class SubmitFlow:
    """The submit action; mixed into ``actions.Launcher``, which provides what is declared
    here (so the type checker holds the launcher to it)."""

    rt: Runtime
    ledger: Ledger
    usage: TeamUsage
    backend: Backend

    if TYPE_CHECKING:  # pragma: no cover - provided by actions.Launcher

        def _view(self, job: Mapping[str, Any]) -> dict[str, Any]: ...

        def _ledger_call(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R: ...

        def _write(self, job: dict[str, Any], change: ChangeFor) -> dict[str, Any]: ...

        def _now_ms(self) -> int: ...

        def _look_after(self, job: dict[str, Any]) -> dict[str, Any]: ...

        def _backend_of(self, job: dict[str, Any]) -> Backend: ...

        def _plan_steps(
            self, req: SubmitRequest, spec: Any, team: str | None
        ) -> tuple[list[dict[str, Any]], list[str]]: ...

        def _worst_case(
            self, steps: list[dict[str, Any]], req: SubmitRequest
        ) -> tuple[float | None, str | None]: ...

        def _attempt_request(self, job: Mapping[str, Any], attempt: int) -> dict[str, Any]: ...

        def _start_chained(
            self, job: dict[str, Any], rendered: Mapping[str, Any]
        ) -> dict[str, Any]: ...

        def _record_failed_chained(self, job: dict[str, Any], error: JobModelError) -> bool: ...

        def _quota_gate(
            self, req: SubmitRequest, steps: list[dict[str, Any]]
        ) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]: ...

    # ---------------------------------------------------------------- submit
    def submit(self, params: Mapping[str, Any], caller: Caller) -> tuple[dict[str, Any], bool]:
        team = caller.submitting_team()
        req = validate_submit(
            params,
            self.rt.catalog,
            self.rt.platform,
            team=team,
            scheduler=self.rt.scheduler.scheduler,
            queue_capacity=self.rt.scheduler.capacity_instances,
        )
        fingerprint = req.fingerprint()
        team_name = caller.team_name
        if req.client_token is not None and not req.dry_run:
            existing = self._ledger_call(self.ledger.get_token, req.client_token, team_name)
            if existing is not None:
                return self._replay(existing, fingerprint), False
        price, reason = self.rt.prices.hourly(self.rt.platform.region, req.instance_type)
        estimate = estimate_max_cost_usd(price, req.instance_count, req.max_runtime_seconds)
        steps: list[dict[str, Any]] = []
        skipped: list[str] = []
        spec = self.rt.catalog[req.template]
        if spec.capacity_chain:
            steps, skipped = self._plan_steps(req, spec, team_name)
        # Refuse a job that can never start; a chain loses the steps whose quota is short.
        steps, short, quota_check = self._quota_gate(req, steps)
        skipped += short
        if steps:
            # A chain: attempt 1 is the first step's; the estimate its worst case.
            first = steps[0]
            price = first["prices"][first["instance_types"][0]]
            estimate, reason = self._worst_case(steps, req)
        checks = [quota_check, *self._check_limits(caller, req, estimate, reason)]
        if req.dry_run:
            dry = self._dry_run(req, caller, price, estimate, reason, checks, steps)
            if steps:
                dry["capacity_chain"] = steps
                dry["capacity_skipped"] = skipped
            return dry, False
        names = races = 0
        while names < NAME_ATTEMPTS:
            job, rendered, token = self._new_job(
                req, caller, fingerprint, price, estimate, reason, steps
            )
            self.backend.check(job, rendered)  # e.g. queue mode's 10 KiB, before any write
            usage = None
            if team is not None:
                # The check read only; a month the item still holds from before is started
                # now, just before the claim that expects this month.
                self._ledger_call(self.usage.roll, team.name)
                usage = Q.claim_update(
                    self.ledger.table,
                    team.name,
                    self.usage.month(),
                    team.limits,
                    count=req.instance_count,
                    estimate=estimate,
                )
            try:
                self._ledger_call(self.ledger.claim, job, token, usage)
            except NameTaken:
                names += 1
                continue  # a random suffix collided; draw another name
            except LimitRace:
                # Another submit took what was left (or the month turned): check again; the
                # check raises QuotaExceeded once nothing is left.
                races += 1
                if races > MAX_RACES:
                    raise Throttled(
                        f"team {team_name}'s usage changed on every one of {MAX_RACES} tries "
                        "(many concurrent submits); retry"
                    ) from None
                self._check_limits(caller, req, estimate, reason)
                continue
            except TokenTaken:
                existing = self._ledger_call(self.ledger.get_token, req.client_token, team_name)
                if existing is None:  # the winner failed to start and freed the token
                    continue
                return self._replay(existing, fingerprint), False
            return self._start(job, rendered), True
        raise UpstreamError(f"could not allocate a unique job name after {NAME_ATTEMPTS} attempts")

    def _check_limits(
        self, caller: Caller, req: SubmitRequest, estimate: float | None, reason: str | None
    ) -> list[dict[str, Any]]:
        team = caller.team
        if team is None:
            return []
        limits = team.limits
        if estimate is None and (
            limits.max_job_cost_usd is not None or limits.monthly_budget_usd is not None
        ):
            raise ValidationError(
                "instance_type",
                f"team {team.name} has a cost limit and the price of {req.instance_type} is "
                f"unknown ({reason}); choose a priced instance type or ask the platform team "
                "to add the price (ftl:prices)",
            )
        # Read only: a refused submit (or a dry run) writes nothing, not even the usage item.
        usage = self._ledger_call(self.usage.peek, team.name)
        return Q.check_limits(
            limits, usage, team=team.name, count=req.instance_count, estimate=estimate
        )

    def _new_job(
        self,
        req: SubmitRequest,
        caller: Caller,
        fingerprint: str,
        price: float | None,
        estimate: float | None,
        reason: str | None,
        steps: list[dict[str, Any]] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        """A fresh job name, its rendered request, its ledger item and its token item."""
        team = caller.team_name
        now = self.rt.now()
        name = make_job_name(
            req.job_name_prefix or req.template,
            now=now,
            rand_hex=self.rt.random_hex(),
            team=team,
            reserve=C.ATTEMPT_SUFFIX_LEN if steps else 0,
        )
        rendered = render_create_training_job(
            req,
            self.rt.catalog[req.template],
            self.rt.platform,
            job_name=name,
            requested_by=caller.principal,
            team=team,
            role_arn=self.rt.team_roles.get(team) if team else None,
        )
        created_at = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        job = {
            "job_name": name,
            "template": req.template,
            "status": SUBMITTING,
            "instance_type": req.instance_type,
            "instance_count": req.instance_count,
            "spot": req.spot,
            "checkpoint_s3_uri": checkpoint_s3_uri(self.rt.platform, name, team),
            "output_s3_uri": output_s3_uri(self.rt.platform, name, team),
            "requested_by": caller.principal,
            "team": team,
            "created_at": created_at,
            "updated_at": created_at,
            "client_token": req.client_token,
            "request": json.dumps(req.to_dict(), sort_keys=True),
            "request_fingerprint": fingerprint,
            "rendered": json.dumps(rendered, sort_keys=True),
            "rendered_hash": request_hash(rendered),
            "price_usd_per_hour": price,
            "estimated_max_cost_usd": estimate,
            "price_unknown_reason": reason,
            "priority": req.priority,  # queue mode only (None in direct mode)
            CL.CARE: CL.CARE_VALUE,  # claimed: in the sweep's index until it starts or ends
        }
        if steps:
            # A chained job: the base request, its steps and attempt 1; the job's rendered
            # request is the current attempt's (jobmodel.jobs.attempts).
            job.update(
                base_rendered=json.dumps(rendered, sort_keys=True),
                chain=steps,
                attempt=1,
                attempts=[A.first_attempt(steps[0], name)],
                spot=steps[0]["kind"] == SPOT,
                instance_type=steps[0]["instance_types"][0],
            )
            rendered = self._attempt_request(job, 1)
            job["rendered"] = json.dumps(rendered, sort_keys=True)
            job["rendered_hash"] = request_hash(rendered)
        token = None
        if req.client_token is not None:
            token = {
                "client_token": req.client_token,
                "job_name": name,
                "fingerprint": fingerprint,
                "created_at": created_at,
            }
        return job, rendered, token

    def _dry_run(
        self,
        req: SubmitRequest,
        caller: Caller,
        price: float | None,
        estimate: float | None,
        reason: str | None,
        checks: list[dict[str, Any]],
        steps: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        job, rendered, _ = self._new_job(
            req, caller, req.fingerprint(), price, estimate, reason, steps
        )
        self.backend.check(job, rendered)  # a real submit would refuse it here
        view = self._view({**job, "status": "DryRun"})
        for key in ("job_arn", "console_url", "batch_job_id", "queued_at"):
            view.pop(key, None)
        all_checks = [
            {"check": "validation", "ok": True},
            {"check": "team", "ok": True, "team": caller.team_name},
            {"check": "price", "ok": price is not None, "price_usd_per_hour": price}
            | ({"reason": reason} if reason else {}),
            *checks,
        ]
        return {
            **view,
            "dry_run": True,
            "checks": all_checks,
            "create_training_job": rendered,
        }

    # ------------------------------------------------------------------ start
    def _start(self, job: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
        """Start a claimed job with the backend it was claimed for."""
        if A.chained(job):
            return self._view(self._start_chained(job, rendered))
        return self._view(self._backend_of(job).start(job, rendered))

    def _record_failed(self, job: dict[str, Any], error: JobModelError) -> None:
        """Record a start that failed (``FailedToStart``), free the client token so the same
        request can be retried, and give the team's usage back: one write (the writer's).
        A chained job's start that found no capacity moves to its next step instead."""
        if self._record_failed_chained(job, error):
            return
        failed = Change.launcher(
            Status.FAILED_TO_START,
            self._now_ms(),
            reason=error.message,
            also={"error_type": error.type},
            free_token=True,
        )
        self._write(job, failed)

    def _record_start(self, job: dict[str, Any], change: Change) -> dict[str, Any]:
        """Record that the backend has the claimed job. The job exists whatever happens
        here, so a ledger failure is logged, not returned: the answer is the record as the
        ledger holds it (``Submitting``) with ``record_pending`` (:func:`record_pending`), and
        the job events, a replay of the token or a look after the grace
        (``jobmodel.jobs.claims``) record the start."""
        try:
            return self._write(job, change)
        except JobModelError as err:
            LOG.warning(
                "job %s started but the ledger update failed: %s", job["job_name"], err.message
            )
            arn = change.once.get("job_arn") or change.observation.get("job_arn")
            return record_pending(job, {"job_arn": arn})

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
                return self._view(self._look_after(job))  # owed end effects done
            if time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        if CL.claim_age_s(job, self.rt.now()) >= CL.REPLAY_START_S:
            # Too late to start it (a stale claim ends at the bound, jobmodel.jobs.claims): look
            # for it by name as describe does.
            return self._view(self._look_after(job))
        # The first request stopped between its ledger write and SageMaker's (or Batch's)
        # answer, or is slow: finish its work with the very same rendered request and job name.
        return self._start(job, json.loads(job["rendered"]))
