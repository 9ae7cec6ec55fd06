"""The job object of the contract (docs/API.md, "The job object") made from a ledger record.

Every action that answers with a job uses :meth:`JobViews.view`. The rules are the job
model's (``jobmodel.jobs.view.job_view``, on the typed ``Job``); this module decodes the
record, reads the clock and passes the queue's look (``backends.queue.places``) in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ftl_ledger.job_codec import from_record
from ftl_trigger.backends.host import RECORD_PENDING
from ftl_trigger.backends.queue.backend import epoch_ms
from ftl_trigger.backends.queue.places import QueueSpot
from ftl_trigger.records import Clock
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.statuses import Status
from jobmodel.jobs.view import job_view

__all__ = ["JobViews"]


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
        record: Mapping[str, Any],
        *,
        detail: bool = False,
        secondary: bool = True,
        position: QueueSpot | None = None,
    ) -> dict[str, Any]:
        job = from_record(record)
        now_ms = epoch_ms(self.clock.now()) if job.status == Status.QUEUED else None
        view = job_view(
            job,
            console_base=self.settings.console_base,
            share_policy=self.settings.scheduler.share_policy,
            now_ms=now_ms,
            detail=detail,
            secondary=secondary,
            place=position,
        )
        if record.get(RECORD_PENDING):  # started, and the ledger not written yet
            view[RECORD_PENDING] = True
        return view
