"""The fleet's CloudWatch metrics, defined once (issue 10, dashboard).

Standard library only. The job-events function writes one CloudWatch Embedded Metric Format
(EMF) line per ledger transition it applied (:func:`emf_line`); CloudWatch Logs turns each
line into metric data points, so publishing costs no API call on the hot path. The
dashboard construct (``ftl_constructs/fleet_dashboard.py``) reads the same names from here.

Metrics, all in :data:`NAMESPACE`, each published under every dimension set in
:data:`DIMENSION_SETS` (``Platform``; ``Platform, Team``; ``Platform, Team, InstanceType``):

- ``JobsQueued``, ``JobsStarted``, ``JobsCompleted``, ``JobsFailed``, ``JobsStopped``
  (Count, value 1 per transition).
- ``InstancesRunningChange``, ``InstancesQueuedChange`` (Count, +n / -n instances when a
  job enters / leaves the running or queued states). The dashboard turns them into levels
  with ``RUNNING_SUM``; the level is counted from the start of the graph's time range.
- ``QueueWaitSeconds`` (Seconds): time from submit to leaving the queue (scheduled, stopped
  or cancelled at the head of the queue); the dashboard shows p50/p90.
- ``SpendUsd``, ``SpotSavingsUsd`` (None): a finished job's cost and what spot saved.
- ``MonthSpendUsd`` (None): the team's month-to-date spend after this job, when the caller
  knows it (the ledger's per-team counter); the budget alarms compare its maximum.

A transition is published once, by the writer that applied it: the ledger has two writers
(the job-events function, and the trigger, which records ``Queued`` at submit, a start, a
failed start, a stop and what its describe learns), and each prints :func:`job_line` only
for a conditional write of its own that succeeded, so a replayed or out-of-order event, or a
describe that lost the race, publishes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from .jobs.job import Job
from .jobs.queue_state import waited_seconds
from .money.pricing import spot_savings_usd

__all__ = [
    "DIMENSION_SETS",
    "METRICS",
    "NAMESPACE",
    "QUEUED_STATES",
    "RUNNING_STATES",
    "cost_metrics",
    "emf_line",
    "job_line",
    "job_spend",
    "transition_metrics",
]

NAMESPACE = "FineTuningLauncher/Fleet"
DIMENSION_SETS: tuple[tuple[str, ...], ...] = (
    ("Platform",),
    ("Platform", "Team"),
    ("Platform", "Team", "InstanceType"),
)
# Metric name -> CloudWatch unit.
METRICS: dict[str, str] = {
    "JobsQueued": "Count",
    "JobsStarted": "Count",
    "JobsCompleted": "Count",
    "JobsFailed": "Count",
    "JobsStopped": "Count",
    "InstancesRunningChange": "Count",
    "InstancesQueuedChange": "Count",
    "QueueWaitSeconds": "Seconds",
    "SpendUsd": "None",
    "SpotSavingsUsd": "None",
    "MonthSpendUsd": "None",
}
# Ledger statuses that hold instances (Batch counts capacity from SCHEDULED on).
RUNNING_STATES = frozenset({"Scheduled", "InProgress", "Stopping"})
QUEUED_STATES = frozenset({"Queued"})
# A job that never started (FailedToStart, e.g. cancelled at the head of the queue) is failed.
_ENDED = {
    "Completed": "JobsCompleted",
    "Failed": "JobsFailed",
    "Stopped": "JobsStopped",
    "FailedToStart": "JobsFailed",
}
DEFAULT_TEAM = "default"  # the Team dimension of a single-team deployment


def transition_metrics(
    old_status: str | None,
    new_status: str,
    *,
    instance_count: int,
    queued_seconds: float | None = None,
    cost_usd: float | None = None,
    spot_savings_usd: float | None = None,
    month_spend_usd: float | None = None,
) -> dict[str, float]:
    """The metric values one ledger transition ``old_status -> new_status`` publishes."""
    values: dict[str, float] = {}
    if old_status == new_status:
        return values
    n = float(instance_count)
    if new_status in QUEUED_STATES:
        values["JobsQueued"] = 1
        values["InstancesQueuedChange"] = n
    elif old_status in QUEUED_STATES:
        values["InstancesQueuedChange"] = -n
        if queued_seconds is not None:
            values["QueueWaitSeconds"] = max(0.0, float(queued_seconds))
    if new_status in RUNNING_STATES and old_status not in RUNNING_STATES:
        values["JobsStarted"] = 1
        values["InstancesRunningChange"] = n
    elif old_status in RUNNING_STATES and new_status not in RUNNING_STATES:
        values["InstancesRunningChange"] = -n
    if new_status in _ENDED:
        values[_ENDED[new_status]] = 1
        values.update(
            cost_metrics(
                cost_usd=cost_usd,
                spot_savings_usd=spot_savings_usd,
                month_spend_usd=month_spend_usd,
            )
        )
    return values


def cost_metrics(
    *,
    cost_usd: float | None,
    spot_savings_usd: float | None = None,
    month_spend_usd: float | None = None,
) -> dict[str, float]:
    """The spend values of a finished job (the known ones). Published with the job's end, or
    on their own when the cost becomes known after the end (Batch can report a job ended
    before SageMaker reports its billable time)."""
    values: dict[str, float] = {}
    for name, value in (
        ("SpendUsd", cost_usd),
        ("SpotSavingsUsd", spot_savings_usd),
        ("MonthSpendUsd", month_spend_usd),
    ):
        if value is not None:
            values[name] = float(value)
    return values


def emf_line(
    values: dict[str, float],
    *,
    platform: str,
    team: str | None,
    instance_type: str,
    timestamp_ms: int,
    job_name: str | None = None,
) -> str | None:
    """One EMF JSON line (no newline) for ``values``; ``None`` when there is nothing to publish.

    ``job_name`` is kept as a plain property (searchable in Logs Insights, not a dimension).
    """
    unknown = sorted(set(values) - set(METRICS))
    if unknown:
        raise ValueError(f"unknown fleet metric {unknown[0]!r}; known: {', '.join(METRICS)}")
    if not values:
        return None
    doc: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(timestamp_ms),
            "CloudWatchMetrics": [
                {
                    "Namespace": NAMESPACE,
                    "Dimensions": [list(d) for d in DIMENSION_SETS],
                    "Metrics": [{"Name": k, "Unit": METRICS[k]} for k in sorted(values)],
                }
            ],
        },
        "Platform": platform,
        "Team": team or DEFAULT_TEAM,
        "InstanceType": instance_type,
    }
    if job_name is not None:
        doc["JobName"] = job_name
    doc.update(values)
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def job_spend(job: Job, month_spend_usd: float | None = None) -> dict[str, Any]:
    """``cost_usd``, ``spot_savings_usd`` and ``month_spend_usd`` of a ledger job, for
    :func:`transition_metrics` and :func:`cost_metrics` (``None`` where unknown)."""
    savings = None
    if job.spot:
        price = job.price_usd_per_hour
        savings = spot_savings_usd(
            None if price is None else float(price),
            _instances(job),
            job.billable_seconds,
            job.training_seconds,
        )
    return {
        "cost_usd": job.cost_usd,
        "spot_savings_usd": savings,
        "month_spend_usd": month_spend_usd,
    }


def _instances(job: Job) -> int:
    """The instances a job holds: its claim's (a sweep's parallel trials'), else its count."""
    return int(job.instances_held or job.instance_count or 1)


def job_line(
    old_status: str | None,
    job: Job,
    *,
    platform: str,
    timestamp_ms: int,
    month_spend_usd: float | None = None,
) -> str | None:
    """The EMF line for a ledger job that moved from ``old_status`` to its ``status`` (the job
    as written); ``None`` when the move publishes nothing."""
    values = transition_metrics(
        old_status,
        str(job.status),
        instance_count=_instances(job),
        queued_seconds=waited_seconds(job.queued_ms, job.dequeued_ms),
        **job_spend(job, month_spend_usd),
    )
    return emf_line(
        values,
        platform=platform,
        team=job.team,
        instance_type=str(job.instance_type or "unknown"),
        timestamp_ms=timestamp_ms,
        job_name=job.job_name,
    )


def change_line(
    before: Job,
    after: Job,
    *,
    late_cost: bool,
    platform: str,
    timestamp_ms: int,
    month_spend_usd: float | None = None,
) -> str | None:
    """The one EMF line of an applied write of a job from ``before`` to ``after``: its status
    transition's, or, for a job that had already ended, the cost that became known
    (``late_cost``); ``None`` when the write moves no metric."""
    old, new = before.status, after.status
    if old != new:
        return job_line(
            old,
            after,
            platform=platform,
            timestamp_ms=timestamp_ms,
            month_spend_usd=month_spend_usd,
        )
    if not late_cost:
        return None
    return emf_line(
        cost_metrics(**job_spend(after, month_spend_usd)),
        platform=platform,
        team=after.team,
        instance_type=str(after.instance_type or "unknown"),
        timestamp_ms=timestamp_ms,
        job_name=after.job_name,
    )
