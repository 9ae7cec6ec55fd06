"""The launcher's public vocabulary (docs/API.md): job statuses (error types: ``errors``).

The trigger answers with these and the ``ftl`` client reads them, so both sides of the
contract take them from here. :class:`Status` is the one definition: its order is the rank
the job-record merge rules use (``queue_state``), and its terminal set says which statuses
never change again.
"""

from __future__ import annotations

from enum import StrEnum

from .errors import HTTP_STATUS

__all__ = [
    "HTTP_STATUS",
    "JOB_STATUSES",
    "SAGEMAKER_STATUSES",
    "TERMINAL_RANK",
    "TERMINAL_STATUSES",
    "Status",
]


class Status(StrEnum):
    """A job record's status. Submitting and FailedToStart are the launcher's own; Queued
    (waiting in the Batch job queue) and Scheduled (Batch handed it to SageMaker) exist only
    in queue mode (``ftl:scheduler = queue``); the rest are SageMaker's."""

    SUBMITTING = "Submitting"
    QUEUED = "Queued"
    SCHEDULED = "Scheduled"
    IN_PROGRESS = "InProgress"
    STOPPING = "Stopping"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    FAILED_TO_START = "FailedToStart"

    @property
    def terminal(self) -> bool:
        """A job in this status will not change again."""
        return self in _TERMINAL

    @property
    def rank(self) -> int:
        """Submitting < Queued < Scheduled < InProgress < Stopping < every terminal status
        (docs/API.md, "Order and repeats"): a record's status only moves up this order."""
        return TERMINAL_RANK if self.terminal else _ORDER.index(self)

    @classmethod
    def rank_of(cls, status: str | None) -> int:
        """The rank of a status as stored (-1 for none or one not in the contract)."""
        if status is None:
            return -1
        try:
            return cls(status).rank
        except ValueError:
            return -1


_ORDER = (
    Status.SUBMITTING,
    Status.QUEUED,
    Status.SCHEDULED,
    Status.IN_PROGRESS,
    Status.STOPPING,
)
TERMINAL_RANK = len(_ORDER)
_TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.STOPPED, Status.FAILED_TO_START})

# The statuses SageMaker reports for a training job (TrainingJobStatus); a job-events record
# with any other status is malformed.
SAGEMAKER_STATUSES: tuple[str, ...] = (
    Status.IN_PROGRESS,
    Status.COMPLETED,
    Status.FAILED,
    Status.STOPPING,
    Status.STOPPED,
)
# Every status a ledger record can hold, in the contract's order.
JOB_STATUSES: tuple[str, ...] = (
    Status.SUBMITTING,
    Status.QUEUED,
    Status.SCHEDULED,
    Status.IN_PROGRESS,
    Status.COMPLETED,
    Status.FAILED,
    Status.STOPPING,
    Status.STOPPED,
    Status.FAILED_TO_START,
)
# A job in one of these will not change again.
TERMINAL_STATUSES: frozenset[str] = frozenset(_TERMINAL)
