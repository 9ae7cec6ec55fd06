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
    job = {"job_name": outcome.job_name, **outcome.after}
    if outcome.old_status != outcome.new_status:
        return FM.job_line(
            outcome.old_status,
            job,
            platform=platform,
            timestamp_ms=timestamp_ms,
            month_spend_usd=outcome.month_spend_usd,
        )
    if not outcome.late_cost:
        return None
    return FM.emf_line(
        FM.cost_metrics(**FM.job_spend(job, outcome.month_spend_usd)),
        platform=platform,
        team=job.get("team"),
        instance_type=str(job.get("instance_type") or "unknown"),
        timestamp_ms=timestamp_ms,
        job_name=outcome.job_name,
    )
