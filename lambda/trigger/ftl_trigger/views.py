"""The job object of the contract (docs/API.md, "The job object") made from a ledger record.

Every action that answers with a job uses :meth:`JobViews.view`: its cost once billable
seconds are known, the queue-mode fields (docs/API.md, "Queue mode") and a chain's attempts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from ftl_trigger.backends.host import RECORD_PENDING
from ftl_trigger.backends.queue.backend import epoch_ms, is_queued_job
from ftl_trigger.backends.queue.look import QueueSpot
from ftl_trigger.records import Clock
from jobmodel.after_training.tracking_job import run_view
from jobmodel.capacity.scheduler import SchedulerConfig, share_of
from jobmodel.contract.statuses import Status
from jobmodel.jobs import attempts as A
from jobmodel.jobs.job import DESCRIBE_FIELDS
from jobmodel.jobs.queue_state import BATCH_WAITING, classify_reason, waited_seconds
from jobmodel.money.pricing import cost_usd

__all__ = ["UNLOOKED", "JobViews"]

UNLOOKED = "the launcher could not look at the job queue (AWS Batch or its queue is unavailable)"


class ViewSettings(Protocol):
    """What a view reads of the runtime: the console's address and the share policy."""

    console_base: str
    scheduler: SchedulerConfig


class JobViews:
    def __init__(self, *, settings: ViewSettings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock

    def view(
        self,
        job: Mapping[str, Any],
        *,
        detail: bool = False,
        secondary: bool = True,
        position: QueueSpot | None = None,
    ) -> dict[str, Any]:
        view = {
            "job_name": job["job_name"],
            "job_arn": job.get("job_arn"),
            "template": job["template"],
            "status": job["status"],
            "instance_type": job["instance_type"],
            "instance_count": job["instance_count"],
            "spot": job["spot"],
            "checkpoint_s3_uri": job["checkpoint_s3_uri"],
            "output_s3_uri": job["output_s3_uri"],
            # The current attempt's training job (a chain's later attempts are <job>-a<n>).
            "console_url": self.settings.console_base + A.current_training_job(job),
            "team": job.get("team"),
            "estimated_max_cost_usd": job.get("estimated_max_cost_usd"),
        }
        if job.get("estimated_max_cost_usd") is None and job.get("price_unknown_reason"):
            view["estimate_unknown_reason"] = job["price_unknown_reason"]
        if detail:
            _cost(job, view)
            if secondary:
                view["secondary_status"] = job.get("secondary_status")
            view["created_at"] = job["created_at"]
            view["requested_by"] = job.get("requested_by")
            for key in DESCRIBE_FIELDS:
                if job.get(key) is not None:
                    view[key] = job[key]
            tracking = run_view(json.loads(job.get("rendered") or "{}").get("Environment", {}))
            if tracking is not None:  # the MLflow run it logs to (issue 27)
                view["tracking"] = tracking
        if job.get(RECORD_PENDING):  # started, and the ledger not written yet
            view[RECORD_PENDING] = True
        self._queue_fields(job, view, detail=detail, position=position)
        if A.chained(job):
            view.update(A.view_fields(job))
        return view

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
        view["share"] = share_of(job.get("team"), self.settings.scheduler.share_policy)
        view["queued_at"] = job.get("queued_at")
        if job.get("training_job_name"):
            view["console_url"] = self.settings.console_base + job["training_job_name"]
        if not detail:
            return
        if job.get("training_job_name"):
            view["training_job_name"] = job["training_job_name"]
        if job["status"] == Status.QUEUED:
            raw = job.get("batch_status_reason")
            waiting = job.get("batch_status") in BATCH_WAITING
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
        now_ms = epoch_ms(self.clock.now()) if job["status"] == Status.QUEUED else None
        seconds = waited_seconds(job, now_ms=now_ms)
        return None if seconds is None else round(seconds, 3)


def _cost(job: Mapping[str, Any], view: dict[str, Any]) -> None:
    """``cost_usd`` once billable seconds are known; null with a reason if unpriced."""
    billable = job.get("billable_seconds")
    if billable is None:
        return
    cost = job.get("cost_usd")
    if cost is None:
        cost = cost_usd(job.get("price_usd_per_hour"), int(job["instance_count"]), billable)
        if cost is not None and job.get("prior_cost_usd"):  # a chain's ended attempts
            cost = round(cost + float(job["prior_cost_usd"]), 4)
    view["cost_usd"] = cost
    if cost is None:
        view["cost_unknown_reason"] = job.get("price_unknown_reason") or (
            f"no on-demand price for {job['instance_type']} was known at submit"
        )
