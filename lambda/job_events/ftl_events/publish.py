"""What a recorded observation tells the world: the SNS announcement of a job's end and the
fleet's metrics as CloudWatch Embedded Metric Format lines (``jobmodel.fleet_metrics``).

Both come only from a ledger write that was applied (``apply.Outcome.applied``), so a replayed
or out-of-order event announces and publishes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ftl_events.apply import Outcome
from jobmodel import fleet_metrics as FM
from jobmodel.pricing import spot_savings_usd

# The ledger attributes the announcement and the handler's result carry.
PUBLIC_FIELDS = (
    "status",
    "secondary_status",
    "failure_reason",
    "billable_seconds",
    "training_seconds",
    "spot_savings_percent",
    "cost_usd",
    "final_metrics",
    "spot_interruptions",
    "queue_reason",
    "batch_job_id",
    "training_job_name",
    "team",
    "template",
    "updated_at",
)


def public_view(job: Mapping[str, Any]) -> dict[str, Any]:
    return {k: job[k] for k in PUBLIC_FIELDS if job.get(k) is not None}


def announcement(outcome: Outcome) -> dict[str, Any] | None:
    """SNS ``publish`` parameters (without ``TopicArn``) when this write ended the job."""
    if not outcome.ended:
        return None
    status = outcome.new_status
    message = {"job_name": outcome.job_name, **public_view(outcome.after)}
    return {
        "Subject": f"Training job {status}: {outcome.job_name}"[:100],
        "Message": json.dumps(message, indent=2),
        "MessageAttributes": {"status": {"DataType": "String", "StringValue": str(status)}},
    }


def metric_line(outcome: Outcome, *, platform: str, timestamp_ms: int) -> str | None:
    """The EMF line for the transition this write applied (None when it publishes nothing)."""
    if not outcome.applied:
        return None
    job = outcome.after
    count = int(job.get("instance_count") or 1)
    price = job.get("price_usd_per_hour")
    savings = None
    if job.get("spot"):
        savings = spot_savings_usd(
            None if price is None else float(price),
            count,
            job.get("billable_seconds"),
            job.get("training_seconds"),
        )
    spend = {
        "cost_usd": job.get("cost_usd"),
        "spot_savings_usd": savings,
        "month_spend_usd": outcome.month_spend_usd,
    }
    if outcome.old_status != outcome.new_status:
        values = FM.transition_metrics(
            outcome.old_status,
            str(outcome.new_status),
            instance_count=count,
            queued_seconds=_queued_seconds(job),
            **spend,
        )
    elif outcome.late_cost:
        values = FM.cost_metrics(**spend)
    else:
        return None
    return FM.emf_line(
        values,
        platform=platform,
        team=job.get("team"),
        instance_type=str(job.get("instance_type") or "unknown"),
        timestamp_ms=timestamp_ms,
        job_name=outcome.job_name,
    )


def _queued_seconds(job: Mapping[str, Any]) -> float | None:
    queued, dequeued = job.get("queued_ms"), job.get("dequeued_ms")
    if queued is None or dequeued is None:
        return None
    return max(0, int(dequeued) - int(queued)) / 1000
