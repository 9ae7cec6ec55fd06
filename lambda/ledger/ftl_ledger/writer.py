"""The one function that changes a job record: :meth:`JobWriter.apply`.

Every writer of an existing job goes through it: submit's start and failed start, describe's
refresh, stop, the queue transitions (``ftl_trigger``) and the job events (``ftl_events``).
It reads nothing itself; given the job as its caller read it and a ``jobmodel.jobs.record.Change``:

1. plans the write (``jobmodel.jobs.record.plan``): the change merged by the order rules, the cost
   and the team's usage settled once, conditions on the status and revision read;
2. writes it conditionally (``Ledger.write_job``), with the usage update and, for a failed
   start, the freeing of the client token in the same transaction;
3. when another write came first, reads the job again and plans again (a few times);
4. prints the fleet-metrics line (EMF) of the transition it applied, with the team's month
   spend when the write changed the team's usage, so each transition is published once, by
   the writer whose write applied; after a write that changed a team's spend, calls
   ``on_spend`` (the budget notifications, ``ftl_ledger.notify``).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ftl_ledger.calls import MonthTurned
from ftl_ledger.job_codec import from_record
from ftl_ledger.ledger import Ledger, token_pk
from ftl_ledger.usage import TeamUsage
from jobmodel import TERMINAL_STATUSES
from jobmodel import fleet_metrics as FM
from jobmodel.contract.errors import Conflict, NotFound
from jobmodel.contract.names import timestamp
from jobmodel.jobs.record import REVISION, ChangeFor, JobRecord, plan

__all__ = ["Applied", "Contended", "JobWriter", "print_line"]

LOG = logging.getLogger("ftl.ledger")


def print_line(line: str) -> None:
    """Standard output: Lambda sends it to the function's log group, where CloudWatch turns
    EMF lines into metrics (no PutMetricData call)."""
    print(line, flush=True)


class Contended(Conflict):
    """The job changed under every attempt; the change was not written."""


@dataclass
class Applied:
    """What applying one change did."""

    before: JobRecord
    after: JobRecord
    applied: bool = False
    released: bool = False  # this write gave the team's usage back
    late_cost: bool = False  # this write added the cost of a job that had already ended
    month_spend_usd: float | None = None  # the team's month spend after a usage write
    line: str | None = field(default=None, repr=False)  # the metric line printed

    @property
    def ended(self) -> bool:
        """This write made the job's status terminal."""
        return (
            self.applied
            and from_record(self.after).status in TERMINAL_STATUSES
            and from_record(self.before).status not in TERMINAL_STATUSES
        )


class JobWriter:
    def __init__(
        self,
        ledger: Ledger,
        *,
        platform: Callable[[], str],
        now: Callable[[], datetime],
        emit: Callable[[str], None] = print_line,
        sleep: Callable[[float], None] = time.sleep,
        attempts: int = 6,
        on_spend: Callable[[str], object] | None = None,
    ) -> None:
        self.ledger = ledger
        self.usage = TeamUsage(ledger, now)
        self.platform = platform
        self.now = now
        self.emit = emit
        self.sleep = sleep
        self.attempts = attempts
        # Called with the team after a write that changed its month spend: the budget
        # notifications (``ftl_ledger.notify.BudgetWatch``). A failure is logged, and the
        # team's next spend write sends what is still due.
        self.on_spend = on_spend

    def apply(self, job: JobRecord, change: ChangeFor) -> Applied:
        """Apply ``change`` (or ``change(job)`` for the job as read) to ``job``; see the
        module docstring. ``NotFound`` when the job left the ledger, ``Contended`` when it
        changed on every attempt."""
        name = str(from_record(job).job_name)
        for attempt in range(self.attempts):
            typed = from_record(job)  # what the write decides from the record as read
            wanted = change(job) if callable(change) else change
            write = plan(job, wanted, stamp=timestamp(self.now()), read=from_record)
            if write is None:
                return Applied(before=job, after=job)
            usage: dict[str, Any] | None = None
            if write.release:
                usage = self.usage.release_update(typed, write.cost)
            elif write.add_spend:
                usage = self.usage.spend_update(str(typed.team), write.add_spend)
            token = None
            if write.free_token:
                token = token_pk(str(typed.client_token), typed.team)
            try:
                written = self.ledger.write_job(
                    name, write.changes, expect=write.expect, usage=usage, free_token=token
                )
            except MonthTurned:  # the month turned under us: plan again for the new month
                written = False
            if written:
                done = Applied(
                    before=job,
                    # As the ledger now has it: the write added one to the revision, so a
                    # next write of this record (its owed notice) expects the right one.
                    after={**write.after, REVISION: int(str(typed.revision or 0)) + 1},
                    applied=True,
                    released=write.release,
                    late_cost=write.late_cost,
                )
                if usage is not None:
                    done.month_spend_usd = self.usage.month_spend(str(typed.team))
                self._publish(done)
                return done
            fresh = self.ledger.get_job(name)
            if fresh is None:
                raise NotFound(f"no job named {name} in the ledger", field="job_name")
            job = fresh  # type: ignore[assignment]
            self.sleep(random.uniform(0, 0.02 * (attempt + 1)))
        raise Contended(f"job {name} changed on every one of {self.attempts} tries; not written")

    def _publish(self, done: Applied) -> None:
        now_ms = int(self.now().timestamp() * 1000)
        done.line = FM.change_line(
            from_record(done.before),
            from_record(done.after),
            late_cost=done.late_cost,
            platform=self.platform(),
            timestamp_ms=now_ms,
            month_spend_usd=done.month_spend_usd,
        )
        if done.line is not None:
            self.emit(done.line)
        team = from_record(done.after).team
        if done.month_spend_usd is not None and team and self.on_spend is not None:
            try:
                self.on_spend(str(team))
            except Exception as err:  # noqa: BLE001 - due again at the team's next spend
                LOG.warning("team %s: budget notifications left due: %s", team, err)
