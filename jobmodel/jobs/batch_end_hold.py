"""Batch's end of a capacity chain's attempt (queue mode) that nothing yet says why.

Standard library only. EventBridge does not order events: Batch's ``FAILED`` of an attempt
may reach the job-events function before SageMaker's event of the same end, and Batch's
reason may say only that the training job failed. Taking it as the job's end would end a
job whose attempt found no capacity. So the job-events function *holds* it
(``jobmodel.jobs.attempts.change_for(..., hold_batch_end=True)``): the record keeps Batch's end
(``batch_status`` ``FAILED``) and the job's status, and asks the launcher to look
(``advance``: DescribeServiceJob, DescribeTrainingJob); SageMaker's own event of the end, or
any later describe, decides too (:func:`after_held_end`, the launcher's refresh).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contract.statuses import TERMINAL_STATUSES, Status
from .job import Job
from .record import Change

__all__ = ["after_held_end", "held_end", "hold", "unexplained_batch_end"]

# SageMaker's secondary statuses of a training job that ended (its view says why).
SAGEMAKER_ENDS = frozenset(
    {"Completed", "Failed", "Stopped", "MaxRuntimeExceeded", "MaxWaitTimeExceeded"}
)


def unexplained_batch_end(job: Job, update: Mapping[str, Any]) -> bool:
    """Batch's FAILED of a started attempt while the record holds no SageMaker end of it:
    EventBridge does not order events, and SageMaker's may yet say it was for want of
    capacity."""
    if update.get("status_source") != "batch" or update.get("status") != str(Status.FAILED):
        return False
    return job.secondary_status not in SAGEMAKER_ENDS


def hold(update: Mapping[str, Any]) -> Change:
    """Record Batch's end of the attempt (its status, reason and training job) and leave the
    job's status as it is: the launcher (DescribeTrainingJob) or SageMaker's own event of the
    end decides (:func:`held_end`)."""
    batch = {k: update.get(k) for k in ("batch_status", "batch_status_reason", "batch_observed_ms")}
    once = {k: update.get(k) for k in ("training_job_arn", "training_job_name", "dequeued_ms")}
    return Change(once=once, also=batch)


def held_end(job: Job) -> bool:
    """A chained queue-mode job whose current attempt Batch ended (``FAILED``) with nothing
    yet saying why: the job's status waits for the launcher's look or SageMaker's event."""
    return (
        bool(job.chain)
        and job.batch_status == "FAILED"
        and job.status not in TERMINAL_STATUSES
        and not job.chain_pending
    )


def after_held_end(job: Job, update: Mapping[str, Any]) -> Mapping[str, Any]:
    """SageMaker's word on the end of an attempt whose Batch end is held: the attempt's end
    (SageMaker's ``Failed`` of a training job Batch created reads as ``InProgress`` while
    Batch may retry; Batch's ``FAILED`` says it did not)."""
    ended = update.get("secondary_status") in SAGEMAKER_ENDS
    if not held_end(job) or update.get("status_source") != "sagemaker" or not ended:
        return update
    if update.get("status") in TERMINAL_STATUSES:
        return update
    return {**update, "status": str(Status.FAILED)}
