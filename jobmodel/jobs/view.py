"""The job object of the contract (docs/API.md, "The job object") from a typed :class:`Job`.

Standard library only, and pure: what needs a call (the queue's look) comes in as a
:class:`QueuePlace`, read only for a ``Queued`` job that is described; the time comes in as
``now_ms``. The trigger's ``views`` decodes the record, looks at the queue and calls
:func:`job_view`. Issue 35 moved these rules here from the trigger, so they read the typed
attributes rather than the record's keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from ..after_training.tracking_job import run_view
from ..capacity.chain import attempt_name
from ..capacity.plans import SPOT
from ..capacity.scheduler import share_of
from ..contract.names import SWEEP_KIND, timestamp
from ..contract.statuses import Status
from ..money.pricing import cost_usd
from .job import DESCRIBE_FIELDS, Attempt, Job
from .queue_state import BATCH_WAITING, classify_reason

__all__ = ["UNLOOKED", "QueuePlace", "current_training_job", "job_view", "queued_job"]

UNLOOKED = "the launcher could not look at the job queue (AWS Batch or its queue is unavailable)"

# An attempt's fields as the job object shows them (``attempts``).
_ATTEMPT_SHOWN = (
    "attempt",
    "training_job_name",
    "capacity",
    "instance_type",
    "instance_count",
    "status",
    "billable_seconds",
    "cost_usd",
)


class QueuePlace(Protocol):
    """A queued job's place as the trigger looked it up: its position (None: not listed),
    and the estimated start's fields (looked up the first time they are read)."""

    position: int | None

    @property
    def estimate(self) -> Mapping[str, Any]: ...


def queued_job(job: Job) -> bool:
    """A job claimed in queue mode (it carries a Batch priority from its claim on)."""
    return job.priority is not None or job.batch_job_id is not None


def current_training_job(job: Job) -> str:
    """The training job of the job's current attempt (the job's name for unchained jobs)."""
    if not job.chain:
        return job.job_name
    return attempt_name(job.job_name, int(job.attempt or 1))


def job_view(
    job: Job,
    *,
    console_base: str,
    share_policy: str,
    now_ms: int | None = None,
    detail: bool = False,
    secondary: bool = True,
    place: QueuePlace | None = None,
) -> dict[str, Any]:
    """The job object: list's fields, and with ``detail`` describe's (cost, the described
    attributes, the MLflow run); a queued job's queue fields and a chain's attempts."""
    view: dict[str, Any] = {
        "job_name": job.job_name,
        "job_arn": job.job_arn,
        "template": job.template,
        "status": job.status,
        "instance_type": job.instance_type,
        "instance_count": job.instance_count,
        "spot": job.spot,
        "checkpoint_s3_uri": job.checkpoint_s3_uri,
        "output_s3_uri": job.output_s3_uri,
        # The current attempt's training job (a chain's later attempts are <job>-a<n>).
        "console_url": _console(job, console_base),
        "team": job.team,
        "estimated_max_cost_usd": job.estimated_max_cost_usd,
    }
    if job.estimated_max_cost_usd is None and job.price_unknown_reason:
        view["estimate_unknown_reason"] = job.price_unknown_reason
    if detail:
        view.update(_cost(job))
        if secondary:
            view["secondary_status"] = job.secondary_status
        view["created_at"] = job.created_at
        view["requested_by"] = job.requested_by
        for key in DESCRIBE_FIELDS:
            if getattr(job, key) is not None:
                view[key] = getattr(job, key)
        tracking = run_view(json.loads(job.rendered or "{}").get("Environment", {}))
        if tracking is not None:  # the MLflow run it logs to (issue 27)
            view["tracking"] = tracking
    if queued_job(job):
        view.update(_queue_fields(job, console_base, share_policy, now_ms, detail, place))
    if job.chain:
        view.update(_chain_fields(job))
    return view


def _console(job: Job, console_base: str) -> str:
    """The console page of the job's training job, or of a sweep's tuning job."""
    if job.kind == SWEEP_KIND:
        return console_base.replace("#/jobs/", "#/hyper-tuning-jobs/") + str(job.job_name)
    return console_base + current_training_job(job)


def _cost(job: Job) -> dict[str, Any]:
    """``cost_usd`` once billable seconds are known; null with a reason if unpriced."""
    if job.billable_seconds is None:
        return {}
    if job.kind == SWEEP_KIND:  # its trials, charged as each ended (``prior_cost_usd``)
        return {"cost_usd": job.cost_usd if job.cost_usd is not None else job.prior_cost_usd}
    cost = job.cost_usd
    if cost is None:
        cost = cost_usd(job.price_usd_per_hour, int(job.instance_count), job.billable_seconds)
        if cost is not None and job.prior_cost_usd:  # a chain's ended attempts
            cost = round(cost + float(job.prior_cost_usd), 4)
    if cost is not None:
        return {"cost_usd": cost}
    reason = job.price_unknown_reason or (
        f"no on-demand price for {job.instance_type} was known at submit"
    )
    return {"cost_usd": None, "cost_unknown_reason": reason}


def _queue_fields(
    job: Job,
    console_base: str,
    share_policy: str,
    now_ms: int | None,
    detail: bool,
    place: QueuePlace | None,
) -> dict[str, Any]:
    """The queue-mode fields of the job object (docs/API.md, Queue mode)."""
    view: dict[str, Any] = {
        "batch_job_id": job.batch_job_id,
        "priority": job.priority,
        "share": share_of(job.team, share_policy),
        "queued_at": job.queued_at,
    }
    if job.training_job_name:
        view["console_url"] = console_base + job.training_job_name
    if not detail:
        return view
    if job.training_job_name:
        view["training_job_name"] = job.training_job_name
    if job.status == Status.QUEUED:
        waiting = job.batch_status in BATCH_WAITING
        position = None if place is None else place.position
        view["queue_reason"] = classify_reason(
            job.batch_status_reason if waiting else None, position
        )
        if position is not None:
            view["queue_position"] = position
        # The estimated start (docs/API.md, Queue mode): null with the reason when the
        # queue could not be looked at.
        view.update(place.estimate if place is not None else {})
        if "estimated_start_by" not in view:
            view.update(estimated_start_by=None, sooner=[])
            view["estimated_start_unknown_reason"] = UNLOOKED
    seconds = _queued_seconds(job, now_ms if job.status == Status.QUEUED else None)
    if seconds is not None:
        view["queued_seconds"] = seconds
    return view


def _queued_seconds(job: Job, now_ms: int | None) -> float | None:
    """Waited so far while Queued (up to ``now_ms``); the whole wait once it left the queue."""
    end = job.dequeued_ms if job.dequeued_ms is not None else now_ms
    if job.queued_ms is None or end is None:
        return None
    return round(max(0, int(end) - int(job.queued_ms)) / 1000, 3)


def _chain_fields(job: Job) -> dict[str, Any]:
    """The contract's chain fields of a chained job (describe, list, status): its steps, the
    current attempt (its kind as ``capacity`` and ``spot``) and every attempt with its cost."""
    chain = job.chain or ()
    attempt = int(job.attempt or 1)
    kind = str(chain[min(attempt, len(chain)) - 1]["kind"])
    return {
        # the current attempt's kind, as the job's other top-level fields are the current
        # attempt's: ``spot`` is true only while the job runs (or waits) on spot
        "capacity": kind,
        "spot": kind == SPOT,
        "capacity_chain": [s["kind"] for s in chain],
        "attempt": job.attempt,
        "attempts": [_attempt_view(a, job.created_at) for a in job.attempts or ()],
        "training_job_name": current_training_job(job),
        "next_attempt_pending": bool(job.chain_pending),
    }


def _attempt_view(entry: Attempt, created_at: str | None) -> dict[str, Any]:
    shown = {k: getattr(entry, k) for k in _ATTEMPT_SHOWN}
    if entry.started_ms is not None:
        shown["started_at"] = _iso(int(entry.started_ms))
    if entry.ended_ms is not None:
        shown["ended_at"] = _iso(int(entry.ended_ms))
    if entry.attempt == 1 and "started_at" not in shown and created_at:
        shown["started_at"] = created_at  # attempt 1 starts with the job
    if entry.reason:
        shown["reason"] = entry.reason
    return shown


def _iso(ms: int) -> str:
    return timestamp(datetime.fromtimestamp(ms / 1000, tz=UTC))
