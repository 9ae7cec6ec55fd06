"""Any attempt's ``CreateTrainingJob`` request, rendered whole by the job model.

A job is its attempts: a plain job has one (its request's own capacity,
``jobmodel.capacity.chain.plain_step``), a chained job one per step. Submit renders attempt 1,
the capacity chain each later one from the record (the stored request, its step); both call
``jobmodel.render.render_attempt`` with the runtime's templates, platform, team roles and
MLflow servers, and nothing patches the request afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from ftl_ledger.job_codec import from_record
from jobmodel import PlatformConfig, TemplateSpec
from jobmodel.after_training.tracking import TrackingConfig
from jobmodel.capacity.chain import Step, plain_step
from jobmodel.render import AttemptTracking, JobIdentity, render_attempt
from jobmodel.requests.submit import SubmitRequest

__all__ = ["RenderSettings", "attempt_request", "record_attempt_request"]


class RenderSettings(Protocol):
    """What rendering reads of the runtime."""

    catalog: Mapping[str, TemplateSpec]
    platform: PlatformConfig
    team_roles: Mapping[str, str]
    tracking: TrackingConfig  # the platform's MLflow servers (issue 27)


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
    it; None: the request's own capacity, a plain job)."""
    spec = settings.catalog[req.template]
    job = JobIdentity(
        name=job_name,
        attempt=attempt,
        team=team,
        requested_by=requested_by,
        role_arn=settings.team_roles.get(team) if team else None,
    )
    tracking = AttemptTracking(settings.tracking, estimate)
    capacity = plain_step(req, spec) if step is None else Step.from_dict(step)
    return render_attempt(req, spec, settings.platform, capacity, tracking, job=job)


def record_attempt_request(
    settings: RenderSettings, record: Mapping[str, Any], attempt: int
) -> dict[str, Any]:
    """A chained job's attempt ``attempt`` from its ledger record (read through the codec):
    the stored request and the attempt's step."""
    job = from_record(record)
    if not job.chain or not job.request:
        raise ValueError(f"job {job.job_name} has no chain to render attempt {attempt} of")
    estimate = job.estimated_max_cost_usd
    return attempt_request(
        settings,
        SubmitRequest.from_dict(json.loads(job.request)),
        job.chain[attempt - 1],
        job_name=str(job.job_name),
        attempt=attempt,
        team=job.team,
        requested_by=job.requested_by,
        estimate=None if estimate is None else float(estimate),
    )
