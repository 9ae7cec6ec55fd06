"""Queue mode (``FTL_SCHEDULER=queue``, docs/QUEUE.md) in the launcher's actions.

Submit claims the job exactly as in direct mode; the queue backend (``backend_queue``) hands
the rendered request to AWS Batch as a service job instead of calling CreateTrainingJob.
Describe refreshes a waiting job from
DescribeServiceJob and, once SageMaker has the job (named ``training_job_name`` by Batch),
follows it with DescribeTrainingJob. Stop terminates the service job. Every ledger write goes
through the one writer (``ftl_ledger.writer``: the order rules, conditional on the record
read), so the launcher and the job-events function can write in any order. ``QueueFlow`` is
mixed into ``actions.Launcher``, which provides ``rt``, ``ledger``, ``usage`` and the helpers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

# Aliased: the trimmed-model test reads ``batch.<call>(...)`` as a call on a Batch client.
from ftl_trigger import batch as service_jobs
from ftl_trigger.backend_queue import epoch_ms, is_queued_job
from ftl_trigger.identity import Caller
from ftl_trigger.queue_look import QueueLook, QueueSpot
from jobmodel import TERMINAL_STATUSES, NotFound, UpstreamError
from jobmodel.capacity.chain import capacity_failure, ledger_job_of_attempt
from jobmodel.capacity.scheduler import share_of
from jobmodel.contract.statuses import Status
from jobmodel.jobs import attempts as A
from jobmodel.jobs.queue_state import classify_reason, waited_seconds
from jobmodel.jobs.record import Change, ChangeFor
from jobmodel.jobs.training_state import from_training_job

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_trigger.dependencies import Runtime

LOG = logging.getLogger("ftl.trigger")
WAITING = ("Queued", "Scheduled")  # statuses Batch still decides
_BATCH_WAITING = frozenset({"SUBMITTED", "PENDING", "RUNNABLE"})
UNLOOKED = "the launcher could not look at the job queue (AWS Batch or its queue is unavailable)"


class QueueFlow:
    """Queue mode's steps; mixed into ``actions.Launcher``, which provides what is declared
    here."""

    rt: Runtime
    ledger: Ledger

    if TYPE_CHECKING:  # pragma: no cover - provided by actions.Launcher

        def _write(self, job: dict[str, Any], change: ChangeFor) -> dict[str, Any]: ...

        def _describe_remote(self, name: str) -> dict[str, Any] | None: ...

    # -------------------------------------------------------------- describe
    def _refresh_queued(self, job: dict[str, Any]) -> tuple[dict[str, Any], QueueSpot | None]:
        """Bring a queue-mode job up to date: from Batch while it waits (or until Batch names
        its training job), then from SageMaker. Returns the record and, while it is
        ``Queued``, its place in the queue with the estimated start."""
        position = None
        if not job.get("batch_job_id"):  # a chain's next attempt, its service job not yet known
            return job, None
        # A capacity chain's attempt is a service job of its own: always asked (module doc).
        asks_batch = job["status"] in WAITING or not job.get("training_job_name") or A.chained(job)
        if asks_batch and self.rt.batch is not None:  # None: the platform went back to direct
            try:
                state = service_jobs.describe(
                    self.rt.batch, job["batch_job_id"], observed_ms=epoch_ms(self.rt.now())
                )
            except NotFound:  # Batch forgot the job: the ledger is all there is
                LOG.warning("Batch has no job %s for %s", job["batch_job_id"], job["job_name"])
                return job, None
            batch_name = state.pop("job_name", None)
            if A.chained(job):
                return self._refresh_attempt(job, state, str(batch_name or "")), None
            job = self._write(job, Change(state, {"job_arn": state.get("training_job_arn")}))
            if job["status"] == "Queued":  # one snapshot: the position and the estimate
                position = QueueLook(self.rt, self.ledger).spot(job)
        name = job.get("training_job_name")
        if job["status"] in TERMINAL_STATUSES or job["status"] == "Queued" or not name:
            return job, position
        described = self._describe_remote(name)
        if described is not None:
            # Observed now: Batch's state of the same job was stamped when it was asked.
            update = {**from_training_job(described), "status_observed_ms": epoch_ms(self.rt.now())}
            job = self._write(job, Change(update))
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
        if name and state["status"] != "Queued":
            described = self._describe_remote(str(name))
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
        job = self._write(job, _chained(state, hint))
        if view is not None and not job.get("chain_pending"):
            if view["status"] == "Failed" and not ended:  # Batch may retry: its FAILED decides
                view["status"] = str(Status.IN_PROGRESS)
            job = self._write(job, _chained(view, hint))
        return job

    # ------------------------------------------------------------------ stop
    def _stop_queued(self, job: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """TerminateServiceJob: a waiting job ends Stopped and starts nothing; a started one
        is Stopping (Batch stops its training job)."""
        if self.rt.batch is None:
            raise UpstreamError(
                f"job {job['job_name']} was queued by AWS Batch but this platform no longer "
                "queues jobs (ftl:scheduler); stop it with TerminateServiceJob"
            )
        service_jobs.terminate(self.rt.batch, job["batch_job_id"], requested_by=caller.principal)

        def stopped(current: Mapping[str, Any]) -> Change:
            now = epoch_ms(self.rt.now())
            if current.get("status") == Status.QUEUED:
                return Change.launcher(Status.STOPPED, now, once={"dequeued_ms": now})
            return Change.launcher(Status.STOPPING, now)

        return self._write(job, stopped)

    # ------------------------------------------------------------------ list
    def _positions(self, items: list[Mapping[str, Any]]) -> dict[str, QueueSpot]:
        """Queued jobs' places by Batch job ARN: one look at the queue (``QueueLook``), only
        in queue mode and only for a page that holds a waiting job."""
        queued = [i for i in items if i.get("status") == "Queued" and i.get("batch_job_arn")]
        if not self.rt.scheduler.queued or self.rt.batch is None or not queued:
            return {}
        look = QueueLook(self.rt, self.ledger)
        return {str(i["batch_job_arn"]): look.spot(i) for i in queued}

    # ------------------------------------------------------------------ view
    def _queue_fields(
        self,
        job: Mapping[str, Any],
        view: dict[str, Any],
        *,
        detail: bool,
        position: QueueSpot | None,
    ) -> None:
        """The queue-mode fields of the job object (docs/API.md, Queue mode)."""
        if not is_queued_job(job):
            return
        view["batch_job_id"] = job.get("batch_job_id")
        view["priority"] = job.get("priority")
        view["share"] = share_of(job.get("team"), self.rt.scheduler.share_policy)
        view["queued_at"] = job.get("queued_at")
        if job.get("training_job_name"):
            view["console_url"] = self.rt.console_base + job["training_job_name"]
        if not detail:
            return
        if job.get("training_job_name"):
            view["training_job_name"] = job["training_job_name"]
        if job["status"] == "Queued":
            raw = job.get("batch_status_reason")
            waiting = job.get("batch_status") in _BATCH_WAITING
            place = None if position is None else position.position
            view["queue_reason"] = classify_reason(raw if waiting else None, place)
            if place is not None:
                view["queue_position"] = place
            # The estimated start (docs/API.md, Queue mode): null with the reason when the
            # queue could not be looked at.
            view.update(position.estimate if position is not None else {})
            if "estimated_start_by" not in view:
                view.update(estimated_start_by=None, sooner=[])
                view["estimated_start_unknown_reason"] = UNLOOKED
        seconds = self._queued_seconds(job)
        if seconds is not None:
            view["queued_seconds"] = seconds

    def _queued_seconds(self, job: Mapping[str, Any]) -> float | None:
        """Waited so far while Queued; the whole wait once the job left the queue."""
        now_ms = epoch_ms(self.rt.now()) if job["status"] == "Queued" else None
        seconds = waited_seconds(job, now_ms=now_ms)
        return None if seconds is None else round(seconds, 3)


def _chained(update: Mapping[str, Any], hint: Mapping[str, Any]) -> ChangeFor:
    """A chained job's observation through the chain's rules, with the training job's ARN
    set once as for every queued job."""

    def change(current: Mapping[str, Any]) -> Change:
        made = A.change_for(current, {**update, **hint})
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
