"""Admission (issue 35): a submit's whole decision, one call into the job model.

The trigger first reads what a submit depends on and hands it over as :class:`Looked`: the
price table, the account's SageMaker service quotas and the team's usage this month. Then one
call, :func:`admit`, decides everything that needs no further read:

- plans a chained template's steps, each with its candidate types' prices
  (``ValidationError`` on ``capacity`` when no step is left);
- applies the quotas (``capacity.service_quotas.gate``);
- prices the job (a chain: its worst case);
- checks the team's limits (``money.limits``), refusing an unknown price under a cost limit.

:func:`claim` names the job, renders attempt 1 (:func:`attempt_request`, the one renderer of
any attempt: ``render.render_attempt`` on the attempt's step) and builds its first record
(``jobs.job.Job.claim``). Nothing here reads or writes AWS. The loop over fresh names and
usage races stays the trigger's, because only the ledger can say a name or the usage was taken:
after a lost race it reads the usage again and calls :func:`limit_checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .after_training.tracking import TrackingConfig
from .capacity import chain as C
from .capacity import service_quotas as SQ
from .capacity.plans import CapacityConfig
from .contract.errors import ValidationError
from .evaluation.additions import EvaluationAdditions
from .jobs.job import Job
from .locations import make_job_name
from .money import limits as Q
from .money.pricing import PriceTable, estimate_max_cost_usd
from .platform import PlatformConfig
from .render import AttemptTracking, JobIdentity, render_attempt, request_hash
from .requests.submit import SubmitRequest
from .teams import Team
from .templates.spec import TemplateSpec

__all__ = [
    "AdmissionSettings",
    "Admitted",
    "Looked",
    "RenderSettings",
    "admit",
    "attempt_request",
    "claim",
    "limit_checks",
]


class RenderSettings(Protocol):
    """What rendering an attempt reads of the deployment."""

    catalog: Mapping[str, TemplateSpec]
    platform: PlatformConfig
    team_roles: Mapping[str, str]
    tracking: TrackingConfig  # the platform's MLflow servers (issue 27)


class AdmissionSettings(RenderSettings, Protocol):
    """What admission reads of the deployment besides rendering: the training plans and the
    teams' evaluation additions."""

    capacity: CapacityConfig
    evaluation: EvaluationAdditions


@dataclass(frozen=True, kw_only=True)
class Looked:
    """What a submit depends on, read by the trigger before admission."""

    prices: PriceTable  # the deployment's, with the Price List's stored prices over it
    quotas: SQ.AccountQuotas | None  # None: not read
    quotas_unread: str = "not configured"  # why ``quotas`` is None
    usage: Q.Usage | None = None  # the team's this month (None: no team)


@dataclass(frozen=True, kw_only=True)
class Admitted:
    """A submit that may be claimed: its steps, its price and worst case, the checks made."""

    req: SubmitRequest
    steps: list[dict[str, Any]]  # a chain's steps as the record keeps them; empty: not chained
    skipped: list[str]  # why chosen steps were left out
    price: float | None  # attempt 1's hourly price
    estimate: float | None  # the worst case
    reason: str | None  # why a price is unknown
    checks: list[dict[str, Any]]  # the service-quota check, then each team limit's


def admit(
    req: SubmitRequest,
    settings: AdmissionSettings,
    *,
    team: Team | None,
    looked: Looked,
    now: datetime,
) -> Admitted:
    """Admit a validated submit, or raise the contract's error (``ValidationError`` on the
    field, ``QuotaExceeded`` on the limit)."""
    region = settings.platform.region
    spec = settings.catalog[req.template]
    steps, skipped = (
        _plan(req, spec, settings, team, looked.prices, now) if spec.capacity_chain else ([], [])
    )
    # Refuse a job that can never start; a chain loses the steps whose quota is short.
    steps, short, quota_check = SQ.gate(
        looked.quotas,
        looked.quotas_unread,
        instance_type=req.instance_type,
        count=req.instance_count,
        spot=req.spot,
        steps=steps,
    )
    if steps:
        # A chain: attempt 1 is the first step's; the estimate its worst case.
        first = steps[0]
        price = first["prices"][first["instance_types"][0]]
        estimate, reason = C.worst_case_usd(
            [C.Step.from_dict(s) for s in steps],
            lambda t: looked.prices.hourly(region, t),
            req.max_runtime_seconds,
        )
    else:
        price, reason = looked.prices.hourly(region, req.instance_type)
        estimate = estimate_max_cost_usd(price, req.instance_count, req.max_runtime_seconds)
    checks = [quota_check, *limit_checks(req, team, looked.usage, estimate, reason)]
    return Admitted(
        req=req,
        steps=steps,
        skipped=skipped + short,
        price=price,
        estimate=estimate,
        reason=reason,
        checks=checks,
    )


def _plan(
    req: SubmitRequest,
    spec: TemplateSpec,
    settings: AdmissionSettings,
    team: Team | None,
    prices: PriceTable,
    now: datetime,
) -> tuple[list[dict[str, Any]], list[str]]:
    """A chained job's steps (each with its candidate types' prices) and why chosen steps
    were left out."""
    team_name = None if team is None else team.name
    plan = settings.capacity.usable(
        team=team_name, template=spec.name, count=req.instance_count, now=now
    )
    steps, skipped = C.plan_chain(
        spec,
        instance_type=req.instance_type,
        count=req.instance_count,
        chosen=req.capacity,
        spot=req.spot,
        plan=plan,
    )
    if not steps:
        raise ValidationError(
            "capacity", "no step of the capacity chain can run this job: " + "; ".join(skipped)
        )
    region = settings.platform.region
    out = []
    for step in steps:
        entry = step.to_dict()
        entry["prices"] = {t: prices.hourly(region, t)[0] for t in step.instance_types}
        out.append(entry)
    return out, skipped


def limit_checks(
    req: SubmitRequest,
    team: Team | None,
    usage: Q.Usage | None,
    estimate: float | None,
    reason: str | None,
) -> list[dict[str, Any]]:
    """The team's limits for one more job like ``req``: an unknown price under a cost limit
    is refused on ``instance_type``, a broken limit raises ``QuotaExceeded``."""
    if team is None:
        return []
    Q.require_price(
        team.limits,
        estimate,
        field="instance_type",
        what=f"team {team.name}",
        instance_type=req.instance_type,
        reason=reason,
    )
    return Q.check_limits(
        team.limits,
        usage or Q.Usage(),
        team=team.name,
        count=req.instance_count,
        estimate=estimate,
    )


def claim(
    admitted: Admitted,
    settings: AdmissionSettings,
    *,
    team: str | None,
    requested_by: str | None,
    now: datetime,
    rand_hex: str,
) -> tuple[Job, dict[str, Any]]:
    """The job's first record under a fresh name, and attempt 1's request (a plain job's one
    step, or the chain's first)."""
    req, steps = admitted.req, admitted.steps
    name = make_job_name(
        req.job_name_prefix or req.template,
        now=now,
        rand_hex=rand_hex,
        team=team,
        reserve=C.ATTEMPT_SUFFIX_LEN if steps else 0,
    )
    rendered = attempt_request(
        settings,
        req,
        steps[0] if steps else None,
        job_name=name,
        attempt=1,
        team=team,
        requested_by=requested_by,
        estimate=admitted.estimate,
    )
    job = Job.claim(
        req,
        job_name=name,
        rendered=rendered,
        rendered_hash=request_hash(rendered),
        platform=settings.platform,
        requested_by=requested_by,
        team=team,
        now=now,
        price=admitted.price,
        estimate=admitted.estimate,
        price_reason=admitted.reason,
        steps=steps,
        # Issue 36: the policy it is evaluated by once Completed (the team's additions applied).
        evaluation_policy=settings.evaluation.policy(settings.catalog[req.template], team),
    )
    return job, rendered


def attempt_request(
    settings: RenderSettings,
    req: SubmitRequest,
    step: Mapping[str, Any] | None,
    *,
    job_name: str,
    attempt: int,
    team: str | None,
    requested_by: str | None,
    estimate: float | None,
) -> dict[str, Any]:
    """Attempt ``attempt`` of job ``job_name`` on ``step`` (a chain's step as the record keeps
    it; None: the request's own capacity, a plain job), rendered whole."""
    spec = settings.catalog[req.template]
    job = JobIdentity(
        name=job_name,
        attempt=attempt,
        team=team,
        requested_by=requested_by,
        role_arn=settings.team_roles.get(team) if team else None,
    )
    tracking = AttemptTracking(settings.tracking, estimate)
    capacity = C.plain_step(req, spec) if step is None else C.Step.from_dict(step)
    return render_attempt(req, spec, settings.platform, capacity, tracking, job=job)
