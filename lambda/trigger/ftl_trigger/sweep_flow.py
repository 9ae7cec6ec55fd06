"""Sweep (issue 37): one validated call runs a hyperparameter search on SageMaker's tuner.

A sweep is one job record of kind ``sweep`` whose trials are the tuner's
(``backends/tuner``). The request is a submit's fields (validated as a submit's: each trial
is the job that submit would start) plus the sweep's (``jobmodel.sweeps.request``). Before
anything is written:

* the template must be sweepable (``jobmodel.sweeps.render``: what the tuner cannot carry);
* the trial's instance type must have a price, and the worst case (trials x each trial's
  maximum cost at its instance count, on-demand) must fit the sweep's ``cap_usd``, the team's
  per-job cap and what is left of the team's month;
* the parallel trials' instances (``max_parallel`` x instance count) must fit the team's
  instance quota.

The claim then holds the worst case and those instances of the team's usage until the sweep
ends (its trials are charged to the month as each ends, ``jobmodel.sweeps.progress``). A dry
run shows the estimate, the checks, the tuning job's request and what the trials run without.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ftl_ledger.job_codec import from_record, to_record
from ftl_ledger.ledger import LimitRace, NameTaken, TokenTaken
from ftl_trigger.backends import Backends
from ftl_trigger.errors import Throttled, UpstreamError
from ftl_trigger.identity import Caller
from ftl_trigger.records import Clock, ledger_call, same_request
from ftl_trigger.views import JobViews
from jobmodel import ValidationError, make_job_name, request_hash, validate_submit
from jobmodel.admission import RenderSettings, attempt_request
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract import names
from jobmodel.contract.statuses import Status
from jobmodel.evaluation.additions import EvaluationAdditions
from jobmodel.jobs.job import Job
from jobmodel.money import limits as Q
from jobmodel.money.pricing import estimate_max_cost_usd
from jobmodel.sweeps import SWEEP_FIELDS, check_worst_case, parse_sweep, worst_case_usd
from jobmodel.sweeps.render import not_carried, render_tuning_job

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_ledger.usage import TeamUsage
    from ftl_trigger.job_flow import JobFlow

__all__ = ["MAX_NAME", "SweepFlow"]

MAX_NAME = 32  # HyperParameterTuningJobName: the sweep's job name is its tuning job's
NAME_ATTEMPTS = 3
MAX_RACES = 50


class SweepSettings(RenderSettings, Protocol):
    scheduler: SchedulerConfig
    prices: Any
    evaluation: EvaluationAdditions

    @property
    def random_hex(self) -> Callable[[], str]: ...


class SweepFlow:
    """The sweep action, and the job-events function's ``refresh`` of a sweep."""

    def __init__(
        self,
        *,
        settings: SweepSettings,
        ledger: Ledger,
        usage: TeamUsage,
        clock: Clock,
        views: JobViews,
        backends: Backends,
        jobs: JobFlow,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.usage = usage
        self.clock = clock
        self.views = views
        self.backends = backends
        self.jobs = jobs

    # ------------------------------------------------------------------ sweep
    def sweep(self, params: Mapping[str, Any], caller: Caller) -> tuple[dict[str, Any], bool]:
        rt = self.settings
        team = caller.submitting_team()
        req, sweep = self._validated(params, team)
        fingerprint = _fingerprint(req.fingerprint(), params)
        if req.client_token is not None and not req.dry_run:
            existing = ledger_call(self.ledger.get_token, req.client_token, caller.team_name)
            if existing is not None:
                return self._replay(existing, fingerprint), False
        price, reason = rt.prices.hourly(rt.platform.region, req.instance_type)
        if price is None:
            raise ValidationError(
                "instance_type",
                f"the price of {req.instance_type} is unknown ({reason}): a sweep's cap needs "
                "it; choose a priced instance type or ask the platform team to add the price "
                "(ftl:prices)",
            )
        per_trial = estimate_max_cost_usd(price, req.instance_count, req.max_runtime_seconds)
        worst = worst_case_usd(sweep, price, req.max_runtime_seconds)
        instances = sweep.max_parallel * req.instance_count
        checks = self._check_limits(caller, sweep, worst, instances)
        for _ in range(NAME_ATTEMPTS):
            name = make_job_name(
                req.job_name_prefix or req.template,
                now=self.clock.now(),
                rand_hex=rt.random_hex(),
                team=caller.team_name,
                reserve=63 - MAX_NAME,
            )
            trial = attempt_request(
                rt,
                req,
                None,
                job_name=name,
                attempt=1,
                team=caller.team_name,
                requested_by=caller.principal,
                estimate=per_trial,
            )
            tuning = render_tuning_job(sweep, trial, name=name)
            if req.dry_run:
                answer = {"job_name": name, "team": caller.team_name, "request": tuning}
                return self._dry_run(answer, req, sweep, trial, price, checks), False
            claimed = self._claimed(
                req, sweep, caller, name, trial, tuning, price, worst, instances, fingerprint
            )
            record = to_record(claimed)
            token = None
            if req.client_token is not None:
                token = {
                    "client_token": req.client_token,
                    "job_name": name,
                    "fingerprint": fingerprint,
                    "created_at": claimed.created_at,
                }
            try:
                self._claim(record, token, caller, sweep, worst, instances)
            except NameTaken:
                continue
            except TokenTaken:
                existing = ledger_call(self.ledger.get_token, req.client_token, caller.team_name)
                if existing is None:
                    continue
                return self._replay(existing, fingerprint), False
            started = self.backends.of(record).start(record, tuning)
            return self.views.view(started, detail=True), True
        raise UpstreamError(f"could not allocate a unique job name after {NAME_ATTEMPTS} attempts")

    def _validated(self, params: Mapping[str, Any], team: Any) -> tuple[Any, Any]:
        """The trials' submit request and the sweep's own fields, each validated (a refusal
        raises the contract's error and writes nothing)."""
        rt = self.settings
        if not rt.scheduler.sweeps:
            raise ValidationError(
                "action",
                "this platform schedules jobs through its AWS Batch queue, and a sweep's trials "
                "are SageMaker's tuner's, which the queue cannot see: sweeps are off here. The "
                "platform team can run them beside the queue (ftl:queueSweeps=outside-queue), "
                "admitted by each team's quota and budget",
            )
        base = {k: v for k, v in params.items() if k not in SWEEP_FIELDS}
        req = validate_submit(
            base,
            rt.catalog,
            rt.platform,
            team=team,
            scheduler=rt.scheduler.scheduler,
            queue_capacity=rt.scheduler.capacity_instances,
            tracking=rt.tracking,
        )
        spec = rt.catalog[req.template]
        if spec.capacity_chain:
            raise ValidationError(
                "template",
                f"template {spec.name} cannot be swept: its capacity chain moves a job between "
                "capacities, which the tuner cannot do",
            )
        sweep = parse_sweep(
            spec,
            {**params, "instance_type": req.instance_type, "instance_count": req.instance_count},
        )
        return req, sweep

    @staticmethod
    def _dry_run(
        answer: dict[str, Any],
        req: Any,
        sweep: Any,
        trial: dict[str, Any],
        price: float,
        checks: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """What a dry run shows: the estimate, the checks, the tuning request, what the
        trials run without."""
        per_trial = estimate_max_cost_usd(price, req.instance_count, req.max_runtime_seconds)
        return {
            "dry_run": True,
            "kind": names.SWEEP_KIND,
            "template": req.template,
            "price_usd_per_hour": price,
            "per_trial_max_usd": per_trial,
            "worst_case_usd": worst_case_usd(sweep, price, req.max_runtime_seconds),
            "cap_usd": sweep.cap_usd,
            "trials": sweep.max_trials,
            "parallel": sweep.max_parallel,
            "instances_held": sweep.max_parallel * req.instance_count,
            "checks": checks,
            "not_carried": not_carried(trial),
            **answer,
        }

    def refresh(self, name: str, caller: Caller) -> dict[str, Any]:
        """The job-events function's word that a sweep's tuning job or one of its trials
        changed: the sweep brought up to date (its ended trials charged, its end recorded)."""
        job, _ = self.jobs.fresh(name, caller)
        return {"job_name": name, "status": from_record(job).status}

    # ---------------------------------------------------------------- helpers
    def _check_limits(
        self, caller: Caller, sweep: Any, worst: float, instances: int
    ) -> list[dict[str, Any]]:
        """The worst case against the sweep's cap and the team's limits, and the parallel
        trials' instances against its quota (read only: a refusal writes nothing)."""
        team = caller.team
        if team is None:
            check_worst_case(sweep, worst, per_job_cap_usd=None, month_left_usd=None)
            return []
        limits = team.limits
        usage = ledger_call(self.usage.peek, team.name)
        month_left = None
        if limits.monthly_budget_usd is not None:
            month_left = round(limits.monthly_budget_usd - usage.committed, 4)
        check_worst_case(
            sweep, worst, per_job_cap_usd=limits.max_job_cost_usd, month_left_usd=month_left
        )
        return Q.check_limits(limits, usage, team=team.name, count=instances, estimate=worst)

    def _claimed(
        self,
        req: Any,
        sweep: Any,
        caller: Caller,
        name: str,
        trial: dict[str, Any],
        tuning: dict[str, Any],
        price: float,
        worst: float,
        instances: int,
        fingerprint: str,
    ) -> Job:
        rt = self.settings
        spec = rt.catalog[req.template]
        claimed = Job.claim(
            req,
            job_name=name,
            rendered=trial,
            rendered_hash=request_hash(tuning),
            platform=rt.platform,
            requested_by=caller.principal,
            team=caller.team_name,
            now=self.clock.now(),
            price=price,
            estimate=worst,
            price_reason=None,
            evaluation_policy=rt.evaluation.policy(spec, caller.team_name),
        )
        progress = {
            "tuning_job_name": name,
            "strategy": sweep.strategy,
            "objective": {"metric": sweep.objective, "direction": sweep.direction},
            "early_stopping": sweep.early_stopping,
            "trials": {"max": sweep.max_trials, "parallel": sweep.max_parallel},
            "trial_instance_count": req.instance_count,
            "best": None,
            "spend_usd": 0.0,
            "cap_usd": sweep.cap_usd,
            "worst_case_usd": worst,
        }
        return dataclasses.replace(
            claimed,
            kind=names.SWEEP_KIND,
            request_fingerprint=fingerprint,
            sweep=progress,
            sweep_trials={},
            instances_held=instances,
            tuning_request=json.dumps(tuning, sort_keys=True),
            prior_cost_usd=0.0,
        )

    def _claim(
        self,
        record: dict[str, Any],
        token: dict[str, Any] | None,
        caller: Caller,
        sweep: Any,
        worst: float,
        instances: int,
    ) -> None:
        """Write the claim, adding the worst case and the instances to the team's usage only
        while its limits hold (checked again after a lost race)."""
        for _ in range(MAX_RACES):
            try:
                ledger_call(
                    self.usage.claim, record, token, caller.team, count=instances, estimate=worst
                )
            except LimitRace:
                self._check_limits(caller, sweep, worst, instances)
                continue
            return
        raise Throttled(f"team {caller.team_name}'s usage changed on every try; retry the sweep")

    def _replay(self, token: Mapping[str, Any], fingerprint: str) -> dict[str, Any]:
        same_request(token, fingerprint)
        job = ledger_call(self.ledger.get_job, token["job_name"])
        if job is None:
            raise UpstreamError(
                f"ledger has token {token['client_token']} but not job {token['job_name']}"
            )
        typed = from_record(job)
        if typed.status == Status.SUBMITTING and typed.tuning_request:
            # The first request stopped between its claim and the tuner's answer: finish it
            # with the same request and name (never a second tuning job).
            job = self.backends.of(job).start(job, json.loads(typed.tuning_request))
        return self.views.view(job)


def _fingerprint(submit_fingerprint: str, params: Mapping[str, Any]) -> str:
    """A submit's fingerprint with the sweep's own fields: a token replays only the same sweep."""
    fields = {k: params[k] for k in SWEEP_FIELDS if k in params}
    raw = submit_fingerprint + json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()
