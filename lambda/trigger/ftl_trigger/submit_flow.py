"""Submit: validate, check the team's limits, claim the job in the ledger, start it.

Starting the claimed job is the backend's (``ftl_trigger.backends``: SageMaker's
``CreateTrainingJob`` in direct mode, an AWS Batch service job in queue mode), chosen once
from the scheduler configuration. Everything before it is the same.

:class:`SubmitFlow` is given the runtime's templates, platform, scheduler, prices, team roles
and name randomness (``settings``), the ledger (tokens and claims), the records, the team's
usage, the clock, and the parts of the launcher a submit calls: the job views, the backends,
the capacity chains, the quota gate and the recovery flow (a replay looks after its job).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ftl_ledger.job_codec import from_record, to_record
from ftl_ledger.ledger import LimitRace, NameTaken, TokenTaken
from ftl_trigger.attempt_request import RenderSettings, attempt_request
from ftl_trigger.backends import Backends
from ftl_trigger.chain_flow import ChainFlow
from ftl_trigger.errors import Throttled, UpstreamError
from ftl_trigger.identity import Caller
from ftl_trigger.quota_gate import QuotaGate
from ftl_trigger.records import Clock, Records, ledger_call, same_request
from ftl_trigger.recovery_flow import RecoveryFlow
from ftl_trigger.views import JobViews
from jobmodel import (
    make_job_name,
    request_hash,
    validate_submit,
)
from jobmodel.capacity import chain as C
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.statuses import Status
from jobmodel.evaluation.additions import EvaluationAdditions
from jobmodel.jobs import attempts as A
from jobmodel.jobs import claims as CL
from jobmodel.jobs.job import Job
from jobmodel.money import limits as Q
from jobmodel.money.pricing import estimate_max_cost_usd
from jobmodel.requests.submit import SubmitRequest

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_ledger.usage import TeamUsage

LOG = logging.getLogger("ftl.trigger")
SUBMITTING = Status.SUBMITTING
# How long a duplicate waits for the first request of a client token to finish creating its
# job before it completes the creation itself (same job name, so never a second job).
WAIT_FOR_PEER_S = 5.0
NAME_ATTEMPTS = 3
# A claim that lost a race for the team's usage is checked and tried again, at most this often.
MAX_RACES = 50


class SubmitSettings(RenderSettings, Protocol):
    """What a submit reads of the runtime (and what rendering reads,
    ``attempt_request.RenderSettings``)."""

    scheduler: SchedulerConfig
    prices: Any  # a PriceTable or LivePrices: ``hourly(region, instance_type)``
    evaluation: EvaluationAdditions

    @property
    def random_hex(self) -> Callable[[], str]: ...


class SubmitFlow:
    """The submit action."""

    def __init__(
        self,
        *,
        settings: SubmitSettings,
        ledger: Ledger,
        records: Records,
        usage: TeamUsage,
        clock: Clock,
        views: JobViews,
        backends: Backends,
        chains: ChainFlow,
        quotas: QuotaGate,
        recovery: RecoveryFlow,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.records = records
        self.usage = usage
        self.clock = clock
        self.views = views
        self.backends = backends
        self.chains = chains
        self.quotas = quotas
        self.recovery = recovery

    # ---------------------------------------------------------------- submit
    def submit(self, params: Mapping[str, Any], caller: Caller) -> tuple[dict[str, Any], bool]:
        rt = self.settings
        team = caller.submitting_team()
        req = validate_submit(
            params,
            rt.catalog,
            rt.platform,
            team=team,
            scheduler=rt.scheduler.scheduler,
            queue_capacity=rt.scheduler.capacity_instances,
            tracking=rt.tracking,
        )
        fingerprint, team_name = req.fingerprint(), caller.team_name
        if req.client_token is not None and not req.dry_run:
            existing = ledger_call(self.ledger.get_token, req.client_token, team_name)
            if existing is not None:
                return self._replay(existing, fingerprint), False
        price, reason = rt.prices.hourly(rt.platform.region, req.instance_type)
        estimate = estimate_max_cost_usd(price, req.instance_count, req.max_runtime_seconds)
        spec = rt.catalog[req.template]
        steps, skipped = (
            self.chains.plan_steps(req, spec, team_name) if spec.capacity_chain else ([], [])
        )
        # Refuse a job that can never start; a chain loses the steps whose quota is short.
        steps, short, quota_check = self.quotas.check(req, steps)
        skipped += short
        if steps:
            # A chain: attempt 1 is the first step's; the estimate its worst case.
            first = steps[0]
            price = first["prices"][first["instance_types"][0]]
            estimate, reason = self.chains.worst_case(steps, req)
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
            self.backends.chosen.check(job, rendered)  # e.g. queue mode's 10 KiB, before any write
            try:
                ledger_call(
                    self.usage.claim,
                    job,
                    token,
                    team,
                    count=req.instance_count,
                    estimate=estimate,
                )
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
                existing = ledger_call(self.ledger.get_token, req.client_token, team_name)
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
        Q.require_price(
            limits,
            estimate,
            field="instance_type",
            what=f"team {team.name}",
            instance_type=req.instance_type,
            reason=reason,
        )
        # Read only: a refused submit (or a dry run) writes nothing, not even the usage item.
        usage = ledger_call(self.usage.peek, team.name)
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
        rt = self.settings
        team = caller.team_name
        now = self.clock.now()
        name = make_job_name(
            req.job_name_prefix or req.template,
            now=now,
            rand_hex=rt.random_hex(),
            team=team,
            reserve=C.ATTEMPT_SUFFIX_LEN if steps else 0,
        )
        # Attempt 1: a plain job's one step, or the chain's first.
        rendered = attempt_request(
            rt,
            req,
            steps[0] if steps else None,
            job_name=name,
            attempt=1,
            team=team,
            requested_by=caller.principal,
            estimate=estimate,
        )
        # Issue 36: the policy it is evaluated by once Completed (the team's additions applied).
        policy = rt.evaluation.policy(rt.catalog[req.template], team)
        claimed = Job.claim(
            req,
            job_name=name,
            rendered=rendered,
            rendered_hash=request_hash(rendered),
            platform=rt.platform,
            requested_by=caller.principal,
            team=team,
            now=now,
            price=price,
            estimate=estimate,
            price_reason=reason,
            steps=steps or (),
            evaluation_policy=policy,
        )
        job = to_record(claimed)
        created_at = str(claimed.created_at)
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
        self.backends.chosen.check(job, rendered)  # a real submit would refuse it here
        view = self.views.view({**job, "status": "DryRun"})
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
            return self.views.view(self.chains.start_chained(job, rendered))
        return self.views.view(self.backends.of(job).start(job, rendered))

    def _replay(self, token: Mapping[str, Any], fingerprint: str) -> dict[str, Any]:
        same_request(token, fingerprint)
        deadline = time.monotonic() + WAIT_FOR_PEER_S
        delay = 0.02
        while True:
            job = ledger_call(self.ledger.get_job, token["job_name"])
            if job is None:
                raise UpstreamError(
                    f"ledger has token {token['client_token']} but not job {token['job_name']}"
                )
            if job["status"] != SUBMITTING:
                return self.views.view(self.recovery.look_after(job))  # owed end effects done
            if time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        if CL.claim_age_s(from_record(job), self.clock.now()) >= CL.REPLAY_START_S:
            # Too late to start it (a stale claim ends at the bound, jobmodel.jobs.claims): look
            # for it by name as describe does.
            return self.views.view(self.recovery.look_after(job))
        # The first request stopped between its ledger write and SageMaker's (or Batch's)
        # answer, or is slow: finish its work with the very same rendered request and job name.
        return self._start(job, json.loads(job["rendered"]))
