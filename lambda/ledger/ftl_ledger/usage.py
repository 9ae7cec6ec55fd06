"""Team usage in the ledger: read it for this month, and give a finished job's usage back.

The rules and request shapes are ``jobmodel.money.limits``; this module only runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from ftl_ledger.ledger import Ledger
from jobmodel.jobs.job import Job
from jobmodel.money import limits as Q
from jobmodel.teams import TeamLimits


class TeamLike(Protocol):
    """A team as a claim reads it: its name and limits (``jobmodel.teams.Team``)."""

    @property
    def name(self) -> str: ...

    @property
    def limits(self) -> TeamLimits: ...


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

    def claim(
        self,
        record: dict[str, Any],
        token: dict[str, Any] | None,
        team: TeamLike | None,
        *,
        count: int,
        estimate: float | None,
    ) -> None:
        """Write a job's claim (and its client token) with the team's usage taking ``count``
        instances and ``estimate`` USD, only while its limits still hold (``Q.claim_update``;
        no team: the claim alone). The month the item still holds from before is started
        first. Raises ``NameTaken``, ``TokenTaken`` or ``LimitRace`` (another claim took what
        was left, or the month turned: check the limits again, then retry)."""
        usage = None
        if team is not None:
            self.roll(team.name)
            usage = Q.claim_update(
                self.ledger.table,
                team.name,
                self.month(),
                team.limits,
                count=count,
                estimate=estimate,
            )
        self.ledger.claim(record, token, usage)

    def release_update(self, job: Job, cost: float | None) -> dict[str, Any]:
        """The usage half of a job's end, for this month (starting the month if needed; a job
        with a team always has its usage item, written by its claim)."""
        team = str(job.team)
        return Q.release_update(
            self.ledger.table,
            team,
            self.roll(team),
            # A sweep holds its parallel trials' instances (``instances_held``).
            count=int(job.instances_held or job.instance_count),
            estimate=job.estimated_max_cost_usd,
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
