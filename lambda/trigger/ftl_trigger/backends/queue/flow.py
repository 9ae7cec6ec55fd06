"""Queue mode (``FTL_SCHEDULER=queue``, docs/QUEUE.md) in the launcher's actions.

Submit claims the job exactly as in direct mode; the queue backend (``backend``) hands
the rendered request to AWS Batch as a service job instead of calling CreateTrainingJob.
Describe refreshes a waiting job from DescribeServiceJob and, once SageMaker has the job
(named ``training_job_name`` by Batch), follows it with DescribeTrainingJob. Stop terminates
the service job. Every ledger write goes through the one writer (``records.Records``: the
order rules, conditional on the record read), so the launcher and the job-events function can
write in any order. :class:`QueueFlow` is given the runtime's Batch and SageMaker clients and
the queue's settings (``settings``), the ledger (a look at the queue reads other jobs' limits),
the records and the clock; it calls no other flow.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ftl_ledger.job_codec import from_record

# Aliased: the trimmed-model test reads ``batch.<call>(...)`` as a call on a Batch client.
from ftl_trigger.backends.queue import service_jobs
from ftl_trigger.backends.queue.backend import epoch_ms
from ftl_trigger.backends.queue.places import QueueLook, QueueSettings, QueueSpot
from ftl_trigger.identity import Caller
from ftl_trigger.records import Clock, Records
from ftl_trigger.remote import describe_training_job
from jobmodel import TERMINAL_STATUSES, NotFound, UpstreamError
from jobmodel.capacity.chain import capacity_failure, ledger_job_of_attempt
from jobmodel.contract.statuses import Status
from jobmodel.jobs import attempts as A
from jobmodel.jobs.record import Change, ChangeFor
from jobmodel.jobs.training_state import from_training_job

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger

LOG = logging.getLogger("ftl.trigger")
WAITING = (Status.QUEUED, Status.SCHEDULED)  # statuses Batch still decides


class QueueFlowSettings(QueueSettings, Protocol):
    """The runtime as this flow reads it: a look's settings, and the SageMaker client (a
    started job's state)."""

    sagemaker: Any


class QueueFlow:
    """Queue mode's refresh, stop and queue positions."""

    def __init__(
        self, *, settings: QueueFlowSettings, ledger: Ledger, records: Records, clock: Clock
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.records = records
        self.clock = clock

    # -------------------------------------------------------------- describe
    def refresh_queued(self, job: dict[str, Any]) -> tuple[dict[str, Any], QueueSpot | None]:
        """Bring a queue-mode job up to date: from Batch while it waits (or until Batch names
        its training job), then from SageMaker. Returns the record and, while it is
        ``Queued``, its place in the queue with the estimated start."""
        position = None
        seen = from_record(job)
        if not seen.batch_job_id:  # a chain's next attempt, its service job not yet known
            return job, None
        batch = self.settings.batch
        # A capacity chain's attempt is a service job of its own: always asked (module doc).
        chained = bool(seen.chain)
        asks_batch = seen.status in WAITING or not seen.training_job_name or chained
        if asks_batch and batch is not None:  # None: the platform went back to direct
            try:
                state = service_jobs.describe(
                    batch, seen.batch_job_id, observed_ms=epoch_ms(self.clock.now())
                )
            except NotFound:  # Batch forgot the job: the ledger is all there is
                LOG.warning("Batch has no job %s for %s", seen.batch_job_id, seen.job_name)
                return job, None
            batch_name = state.pop("job_name", None)
            if chained:
                return self._refresh_attempt(job, state, str(batch_name or "")), None
            job = self.records.write(job, Change(state, {"job_arn": state.get("training_job_arn")}))
            seen = from_record(job)
            if seen.status == Status.QUEUED:  # one snapshot: the position and the estimate
                position = QueueLook(self.settings, self.ledger).spot(seen)
        name = seen.training_job_name
        if seen.status in TERMINAL_STATUSES or seen.status == Status.QUEUED or not name:
            return job, position
        described = describe_training_job(self.settings.sagemaker, name)
        if described is not None:
            # Observed now: Batch's state of the same job was stamped when it was asked.
            update = {
                **from_training_job(described),
                "status_observed_ms": epoch_ms(self.clock.now()),
            }
            job = self.records.write(job, Change(update))
        return job, position

    def _refresh_attempt(
        self, job: dict[str, Any], state: dict[str, Any], batch_name: str
    ) -> dict[str, Any]:
        """A chained job's current service job (``state``: Batch's word on it), then the
        training job Batch made of it, each through the chain's rules (``jobmodel.jobs.attempts``).
        Batch's own retries stay: SageMaker's Failed of one try is not the attempt's end;
        Batch's FAILED is, and SageMaker's reason then says whether it was for want of
        capacity (Batch's reason may only say the training job failed)."""
        _, attempt = ledger_job_of_attempt(batch_name) if batch_name else (None, None)
        name = state.get("training_job_name")
        view = None
        if name and state["status"] != Status.QUEUED:
            described = describe_training_job(self.settings.sagemaker, str(name))
            if described is not None:
                view = {
                    **from_training_job(described),
                    "status_observed_ms": state["status_observed_ms"],
                }
        ended = state["status"] in TERMINAL_STATUSES
        if view is not None and ended:
            state = {**state, **_capacity_word(state, view)}
            state["billable_seconds"] = view.get("billable_seconds")  # the attempt's cost
        hint = {A.ATTEMPT_HINT: attempt} if attempt is not None else {}
        job = self.records.write(job, _chained(state, hint))
        if view is not None and not from_record(job).chain_pending:
            # Batch may retry: its FAILED decides.
            if view["status"] == Status.FAILED and not ended:
                view["status"] = str(Status.IN_PROGRESS)
            job = self.records.write(job, _chained(view, hint))
        return job

    # ------------------------------------------------------------------ stop
    def stop_queued(self, job: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """TerminateServiceJob: a waiting job ends Stopped and starts nothing; a started one
        is Stopping (Batch stops its training job)."""
        seen = from_record(job)
        if self.settings.batch is None:
            raise UpstreamError(
                f"job {seen.job_name} was queued by AWS Batch but this platform no longer "
                "queues jobs (ftl:scheduler); stop it with TerminateServiceJob"
            )
        service_jobs.terminate(
            self.settings.batch, str(seen.batch_job_id), requested_by=caller.principal
        )
        clock = self.clock

        def stopped(current: Mapping[str, Any]) -> Change:
            now = epoch_ms(clock.now())
            if from_record(current).status == Status.QUEUED:
                return Change.launcher(Status.STOPPED, now, once={"dequeued_ms": now})
            return Change.launcher(Status.STOPPING, now)

        return self.records.write(job, stopped)

    # ------------------------------------------------------------------ list
    def positions(self, items: Sequence[Mapping[str, Any]]) -> dict[str, QueueSpot]:
        """Queued jobs' places by Batch job ARN: one look at the queue (``QueueLook``), only
        in queue mode and only for a page that holds a waiting job."""
        jobs = [from_record(i) for i in items]
        queued = [j for j in jobs if j.status == Status.QUEUED and j.batch_job_arn]
        settings = self.settings
        if not settings.scheduler.queued or settings.batch is None or not queued:
            return {}
        look = QueueLook(settings, self.ledger)
        return {str(j.batch_job_arn): look.spot(j) for j in queued}


def _chained(update: Mapping[str, Any], hint: Mapping[str, Any]) -> ChangeFor:
    """A chained job's observation through the chain's rules, with the training job's ARN
    set once as for every queued job."""

    def change(current: Mapping[str, Any]) -> Change:
        made = A.change_for(from_record(current), {**update, **hint})
        arn = update.get("training_job_arn")
        return Change(
            made.observation, {"job_arn": arn} if arn else {}, made.also, spend=made.spend
        )

    return change


def _capacity_word(state: Mapping[str, Any], view: Mapping[str, Any]) -> dict[str, Any]:
    """What SageMaker says of an attempt Batch ended, when it ended for want of capacity
    (a spot wait that ran out, an insufficient-capacity failure): its reason and secondary
    status join Batch's word; nothing otherwise."""
    if capacity_failure(state) is not None or capacity_failure(view) is None:
        return {}
    # SageMaker's status too (Batch reports a stopped training job as FAILED), as its event
    # would have recorded it.
    out = {"status": view["status"], "secondary_status": view.get("secondary_status")}
    if view.get("failure_reason"):
        out["failure_reason"] = view["failure_reason"]
    return out
