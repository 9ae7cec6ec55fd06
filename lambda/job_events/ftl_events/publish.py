"""What a recorded observation tells the world: the SNS announcement of a job's end (the
fleet's metric lines are printed by the one writer, ``ftl_ledger.writer``).

It comes only from a ledger write that was applied (``apply.Outcome.applied``), so a replayed
or out-of-order event announces nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ftl_events.apply import Outcome

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
