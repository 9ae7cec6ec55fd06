"""Apply one observation to its ledger job through the one writer (``ftl_ledger.writer``).

Here only what is the job-events function's own: the job must be in the ledger (events never
create items), the event's job must belong to the ledger job's team (``ownership``), and a
Batch event must be about the ledger's Batch job. The merge, the cost, the team's usage
(``jobmodel.jobs.settlement.settle``: given back once, with the first write that makes the status
terminal; a cost learned later added once), the conditional write on the job's revision,
the retries when another write came first and the metric line are the writer's, as for every
writer of the job record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ftl_events.ownership import foreign_reason
from ftl_events.parse import Observation
from ftl_ledger.job_codec import from_record
from ftl_ledger.ledger import Ledger
from ftl_ledger.writer import Applied, JobWriter, print_line
from jobmodel import TERMINAL_STATUSES
from jobmodel.jobs.attempts import change_for
from jobmodel.jobs.record import Change, JobRecord

LOG = logging.getLogger("ftl.job_events")
ATTEMPTS = 6  # reads and conditional writes per event before giving it back to EventBridge


@dataclass
class Outcome:
    """What recording one observation did."""

    job_name: str
    found: bool = True
    applied: bool = False
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    released: bool = False  # this write gave the team's usage back
    late_cost: bool = False  # this write added the cost of a job that had already ended
    month_spend_usd: float | None = None  # the team's month spend after this write

    @classmethod
    def of(cls, name: str, done: Applied) -> Outcome:
        return cls(
            job_name=name,
            applied=done.applied,
            before=dict(done.before),
            after=dict(done.after),
            released=done.released,
            late_cost=done.late_cost,
            month_spend_usd=done.month_spend_usd,
        )

    @property
    def old_status(self) -> str | None:
        return from_record(self.before).status

    @property
    def new_status(self) -> str | None:
        return from_record(self.after).status

    @property
    def ended(self) -> bool:
        """This write made the job's status terminal."""
        return (
            self.applied
            and self.new_status in TERMINAL_STATUSES
            and self.old_status not in TERMINAL_STATUSES
        )


class Recorder:
    """Records observations in the ledger; one per container (``handler.py``)."""

    def __init__(
        self,
        ledger: Ledger,
        now: Callable[[], datetime],
        *,
        platform: str = "ftl",
        emit: Callable[[str], None] = print_line,
    ) -> None:
        self.ledger = ledger
        self.now = now
        self.writer = JobWriter(
            ledger, platform=lambda: platform, now=now, emit=emit, attempts=ATTEMPTS
        )

    @property
    def usage(self) -> Any:
        return self.writer.usage

    def record(self, observation: Observation) -> Outcome:
        """Apply one observation; ``Conflict`` when the job changed on every attempt (the
        invocation fails and EventBridge retries the event)."""
        name = observation.job_name
        job = self.ledger.get_job(name)
        if job is None:
            # Only jobs this platform started are in the ledger; never create stray items.
            LOG.warning("job %s is not in the ledger; event ignored", name)
            return Outcome(job_name=name, found=False)
        ignored = self._ignored(job, observation)
        if ignored is not None:
            LOG.warning("event about job %s ignored: %s", name, ignored)
            return Outcome(job_name=name, before=job, after=job)
        update = observation.update

        # A capacity chain's attempts (jobmodel.jobs.attempts); a plain observation otherwise.
        # Batch's end of an attempt that nothing yet says why is held
        # (``jobmodel.jobs.batch_end_hold``).
        def change(current: JobRecord) -> Change:
            return change_for(from_record(current), update, hold_batch_end=True)

        done = self.writer.apply(job, change)  # type: ignore[arg-type]
        return Outcome.of(name, done)

    @staticmethod
    def _ignored(record: JobRecord | dict[str, Any], observation: Observation) -> str | None:
        job = from_record(record)
        foreign = foreign_reason(job, observation.owner)
        if foreign is not None:
            # Another team's training job that names this job: it must not change it.
            return foreign
        mine, theirs = job.batch_job_id, observation.update.get("batch_job_id")
        if theirs and mine and mine != theirs:
            return f"the event is about Batch job {theirs}; the ledger's is {mine}"
        return None
