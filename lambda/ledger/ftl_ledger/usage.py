"""Team usage in the ledger: read it for this month, and give a finished job's usage back.

The rules and request shapes are ``jobmodel.quotas``; this module only runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ftl_ledger.ledger import Ledger, MonthTurned
from jobmodel import TERMINAL_STATUSES
from jobmodel import quotas as Q
from jobmodel.pricing import cost_usd


class TeamUsage:
    def __init__(self, ledger: Ledger, now: Callable[[], datetime]) -> None:
        self.ledger = ledger
        self.now = now

    def month(self) -> str:
        return Q.month_of(self.now())

    def current(self, team: str) -> Q.Usage:
        """This month's usage, starting the month on the team's item where it holds an older
        one. A missing item is not created: the team's first claim does (``Q.claim_update``),
        so a refused submit writes nothing."""
        month = self.roll(team)
        return Q.Usage.from_item(self.ledger.get_usage(team), month)

    def peek(self, team: str) -> Q.Usage:
        """This month's usage, read only (a dry run, a check, whoami: nothing written)."""
        return Q.Usage.from_item(self.ledger.get_usage(team), self.month())

    def release_update(self, job: Mapping[str, Any], cost: float | None) -> dict[str, Any]:
        """The usage half of a job's end, for this month (starting the month if needed; a job
        with a team always has its usage item, written by its claim)."""
        return Q.release_update(
            self.ledger.table,
            job["team"],
            self.roll(job["team"]),
            count=int(job["instance_count"]),
            estimate=job.get("estimated_max_cost_usd"),
            cost=cost,
        )

    def spend_update(self, team: str, cost: float) -> dict[str, Any]:
        """Add a cost learned after the job's usage was given back, this month."""
        return Q.spend_update(self.ledger.table, team, self.roll(team), cost=cost)

    def roll(self, team: str) -> str:
        """This month, started on the team's usage item if it still holds an older one (an
        item that does not exist is not created)."""
        month = self.month()
        item = self.ledger.get_usage(team)
        if item is not None and item.get("month") != month:
            self.ledger.update_if(Q.rollover_update(self.ledger.table, team, item["month"], month))
        return month

    def month_spend(self, team: str) -> float:
        """The team's spend of jobs that ended this month, as the ledger holds it now."""
        return Q.Usage.from_item(self.ledger.get_usage(team), self.month()).spend

    def finish(self, job: Mapping[str, Any], changes: dict[str, Any]) -> bool:
        """Record a terminal status (``changes``) and give the job's usage back, once.

        Returns False when the usage was already given back (a job-events update or another
        describe got there first); the caller then writes ``changes`` without the usage.
        """
        cost = cost_usd(
            job.get("price_usd_per_hour"),
            int(job["instance_count"]),
            changes.get("billable_seconds"),
        )
        if cost is not None:
            changes["cost_usd"] = cost
        if job.get("team") is None or job.get("usage_released"):
            return False
        if changes.get("status") not in TERMINAL_STATUSES:
            return False
        # usage_spend_usd: what this release adds to the month's spend (0 = cost not known
        # yet; the job-events function adds it once it is, jobmodel.quotas).
        values = {**changes, "usage_spend_usd": cost or 0.0}
        for _ in range(3):  # the month can turn between reading and writing
            try:
                return self.ledger.finish_job(
                    job["job_name"], values, self.release_update(job, cost)
                )
            except MonthTurned:
                continue
        return False
