"""What a backend's start did, recorded: the host every backend is given (``backend.Host``).

A start that happened is recorded as the backend learned it (:meth:`StartRecorder.record_start`:
a ledger failure is logged, never returned, since the job exists whatever happens here); one
that failed ends the job as ``FailedToStart`` (token freed, the team's usage given back) or,
for a capacity chain's attempt that found no capacity, leaves the chain's next step pending
(:meth:`StartRecorder.record_failed`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ftl_ledger.job_codec import from_record
from ftl_trigger.records import Clock, Records
from ftl_trigger.remote import ambiguous, describe_training_job, map_aws_error
from jobmodel.contract.errors import CapacityError, JobModelError
from jobmodel.contract.statuses import Status
from jobmodel.jobs import attempts as A
from jobmodel.jobs.record import Change, ChangeFor

__all__ = ["RECORD_PENDING", "StartRecorder", "record_pending"]

LOG = logging.getLogger("ftl.trigger")
# The answer's flag for a job its backend has that the ledger has not recorded yet.
RECORD_PENDING = "record_pending"


def record_pending(job: Mapping[str, Any], learned: Mapping[str, Any]) -> dict[str, Any]:
    """The record as the ledger still holds it (``Submitting``), with what the start learned
    (``learned``: the job's ARN, its Batch job) and ``record_pending``: the answer says the
    record is still being written rather than a status the ledger does not hold."""
    return {**job, **{k: v for k, v in learned.items() if v is not None}, RECORD_PENDING: True}


class StartRecorder:
    """The backends' host. ``runtime``: the container's clients and settings, which the
    backends read (SageMaker, Batch, the scheduler, the clock)."""

    def __init__(self, *, runtime: Any, records: Records, clock: Clock, queue: Any) -> None:
        self.rt = runtime
        self.records = records
        self.clock = clock
        self.queue = queue  # queue.flow.QueueFlow: the queue backend's refresh and stop

    def write(self, job: dict[str, Any], change: ChangeFor) -> dict[str, Any]:
        return self.records.write(job, change)

    def now_ms(self) -> int:
        return self.clock.ms()

    def describe_remote(self, name: str) -> dict[str, Any] | None:
        return describe_training_job(self.rt.sagemaker, name)

    def map_error(self, exc: Exception, call: str) -> JobModelError:
        return map_aws_error(exc, call)

    def ambiguous(self, exc: Exception) -> bool:
        return ambiguous(exc)

    def record_start(self, job: dict[str, Any], change: Change) -> dict[str, Any]:
        """Record that the backend has the claimed job. A ledger failure is logged, not
        returned: the answer is the record as the ledger holds it (``Submitting``) with
        ``record_pending`` (:func:`record_pending`), and the job events, a replay of the
        token or a look after the grace (``jobmodel.jobs.claims``) record the start."""
        try:
            return self.records.write(job, change)
        except JobModelError as err:
            name = from_record(job).job_name
            LOG.warning("job %s started but the ledger update failed: %s", name, err.message)
            arn = change.once.get("job_arn") or change.observation.get("job_arn")
            return record_pending(job, {"job_arn": arn})

    def record_failed(self, job: dict[str, Any], error: JobModelError) -> None:
        """Record a start that failed (``FailedToStart``), free the client token so the same
        request can be retried, and give the team's usage back: one write (the writer's).
        A chained job's start that found no capacity moves to its next step instead."""
        if self._chain_moves_on(job, error):
            return
        failed = Change.launcher(
            Status.FAILED_TO_START,
            self.clock.ms(),
            reason=error.message,
            also={"error_type": error.type},
            free_token=True,
        )
        self.records.write(job, failed)

    def _chain_moves_on(self, job: dict[str, Any], error: JobModelError) -> bool:
        """A chained attempt's failed start for want of capacity: close it and leave the
        next one pending (True), so the start moves on; False when no step is left."""
        typed = from_record(job)
        if not A.chained(typed) or not isinstance(error, CapacityError):
            return False
        change = A.failed_start_change(typed, error.message, self.clock.ms())
        if change is None:
            return False
        self.records.write(job, change)
        return True
