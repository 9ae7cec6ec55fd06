"""The launcher's public vocabulary (docs/API.md): job statuses (error types: ``errors``).

The trigger answers with these and the ``ftl`` client reads them, so both sides of the
contract take them from here.
"""

from __future__ import annotations

from .errors import HTTP_STATUS

__all__ = ["HTTP_STATUS", "JOB_STATUSES", "SAGEMAKER_STATUSES", "TERMINAL_STATUSES"]

# The statuses SageMaker reports for a training job (TrainingJobStatus); a job-events record
# with any other status is malformed.
SAGEMAKER_STATUSES: tuple[str, ...] = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")
# Every status a ledger record can hold; Submitting and FailedToStart are the launcher's own,
# Queued (waiting in the Batch job queue) and Scheduled (Batch handed it to SageMaker) exist
# only in queue mode (ftl:scheduler = queue).
JOB_STATUSES: tuple[str, ...] = (
    "Submitting",
    "Queued",
    "Scheduled",
    "InProgress",
    "Completed",
    "Failed",
    "Stopping",
    "Stopped",
    "FailedToStart",
)
# A job in one of these will not change again.
TERMINAL_STATUSES: frozenset[str] = frozenset({"Completed", "Failed", "Stopped", "FailedToStart"})
