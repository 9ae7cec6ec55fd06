"""Apply one observation to its ledger job: merge, cost, usage, and a conditional write.

The write is optimistic: read the job, work out the changes (``jobmodel.training_state.merge``
plus the cost and the team's usage), and write them only if the job's ``revision`` is still
the one read (``Ledger.update_job_if_unchanged``). When another write came first, read again
and redo the work, so two concurrent events never lose an update.

The cost and the team's usage follow ``jobmodel.quotas.settle``: usage is given back once, in
the same transaction as the first write that makes the job's status terminal, with the cost
when it is known then; a cost learned later (Batch said the job ended before SageMaker
reported its billable time) is added to the team's spend once, when it becomes known.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ftl_events.ownership import foreign_reason
from ftl_events.parse import Observation
from ftl_ledger.ledger import Ledger, MonthTurned
from ftl_ledger.usage import TeamUsage
from jobmodel import TERMINAL_STATUSES
from jobmodel import quotas as Q
from jobmodel.errors import Conflict
from jobmodel.names import timestamp
from jobmodel.training_state import merge

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

    @property
    def old_status(self) -> str | None:
        return self.before.get("status")

    @property
    def new_status(self) -> str | None:
        return self.after.get("status")

    @property
    def ended(self) -> bool:
        """This write made the job's status terminal."""
        return (
            self.applied
            and self.new_status in TERMINAL_STATUSES
            and self.old_status not in TERMINAL_STATUSES
        )


@dataclass
class _Plan:
    changes: dict[str, Any]
    usage: dict[str, Any] | None = None
    released: bool = False
    late_cost: bool = False


class Recorder:
    """Records observations in the ledger; one per container (``handler.py``)."""

    def __init__(
        self,
        ledger: Ledger,
        now: Callable[[], datetime],
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.ledger = ledger
        self.usage = TeamUsage(ledger, now)
        self.now = now
        self.sleep = sleep

    def record(self, observation: Observation) -> Outcome:
        name = observation.job_name
        for attempt in range(ATTEMPTS):
            job = self.ledger.get_job(name)
            if job is None:
                # Only jobs this platform started are in the ledger; never create stray items.
                LOG.warning("job %s is not in the ledger; event ignored", name)
                return Outcome(job_name=name, found=False)
            foreign = foreign_reason(job, observation.owner)
            if foreign is not None:
                # Another team's training job that names this job: it must not change it.
                LOG.warning("event about job %s ignored: %s", name, foreign)
                return Outcome(job_name=name, before=job, after=job)
            plan = self._plan(job, observation.update)
            if plan is None:
                return Outcome(job_name=name, before=job, after=job)
            try:
                written = self.ledger.update_job_if_unchanged(
                    name, plan.changes, revision=job.get("revision"), usage=plan.usage
                )
            except MonthTurned:
                written = False  # the month turned under us: plan again for the new month
            if written:
                return self._outcome(name, job, plan)
            self.sleep(random.uniform(0, 0.02 * (attempt + 1)))
        raise Conflict(f"job {name} changed on every one of {ATTEMPTS} tries; event not recorded")

    def _plan(self, job: Mapping[str, Any], update: Mapping[str, Any]) -> _Plan | None:
        other = job.get("batch_job_id")
        if update.get("batch_job_id") and other and other != update["batch_job_id"]:
            LOG.warning(
                "event of Batch job %s; the ledger's is %s: ignored", update["batch_job_id"], other
            )
            return None
        changes = merge(job, update)
        if not changes:
            return None  # a replay, or older than what the ledger holds
        settlement = Q.settle(job, overlay(job, changes))
        changes.update(settlement.changes)
        changes["updated_at"] = timestamp(self.now())
        plan = _Plan(changes=changes, late_cost=settlement.late_cost)
        if settlement.release:
            plan.usage = self.usage.release_update(job, settlement.cost)
            plan.released = True
        elif settlement.add_spend:
            plan.usage = self.usage.spend_update(job["team"], settlement.add_spend)
        return plan

    def _outcome(self, name: str, job: dict[str, Any], plan: _Plan) -> Outcome:
        outcome = Outcome(
            job_name=name,
            applied=True,
            before=job,
            after=overlay(job, plan.changes),
            released=plan.released,
            late_cost=plan.late_cost,
        )
        if plan.usage is not None:
            outcome.month_spend_usd = self.usage.month_spend(job["team"])
        return outcome


def overlay(job: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """The job as it is after ``changes`` (``None`` removes an attribute)."""
    out = {**job, **changes}
    return {k: v for k, v in out.items() if v is not None}
