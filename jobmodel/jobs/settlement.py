"""A job's cost and its team's usage, settled once (docs/API.md, "Teams and spend").

Standard library only. :func:`settle` reads the typed record before and after a change
(``jobs.job.Job``) and says what the change means for the money: the job's ``cost_usd`` once
its billable time is known, and the team's usage given back once (``money.limits`` holds the
usage item and its update shapes; ``jobs.record.plan`` writes both in one transaction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract.names import SWEEP_KIND
from ..contract.statuses import TERMINAL_STATUSES
from ..money.pricing import cost_usd
from .job import Job

__all__ = ["Settlement", "settle"]


@dataclass(frozen=True)
class Settlement:
    """What a job's record change means for its cost and its team's usage (:func:`settle`)."""

    changes: dict[str, Any]  # ledger attributes to write with the change
    cost: float | None = None  # the job's cost, when it is known
    release: bool = False  # give the team's usage back now (with ``cost``)
    add_spend: float | None = None  # a cost learned after the release, to add to the spend
    late_cost: bool = False  # the cost of a job that had already ended became known


def settle(before: Job, after: Job) -> Settlement:
    """The cost and usage side of a ledger job changing from ``before`` to ``after``.

    A terminal job gets ``cost_usd`` once its billable time is known. A team job gives its
    usage back once, with the first change that makes it terminal, adding its cost to the
    month's spend if known (``usage_spend_usd`` records what was added; 0: not known yet);
    a cost that becomes known later is added then, once. Depends only on the two records,
    so events applied in any order settle the same way.
    """
    if after.status not in TERMINAL_STATUSES:
        return Settlement(changes={})
    price = after.price_usd_per_hour
    count = int(after.instance_count or 1)
    cost = cost_usd(None if price is None else float(price), count, after.billable_seconds)
    prior = float(after.prior_cost_usd or 0)
    if after.kind == SWEEP_KIND:
        # A sweep's trials are charged as each ends (``prior_cost_usd``, their sum): its cost
        # is that sum, and what this write settles the trials it charges.
        cost = round(prior - float(before.prior_cost_usd or 0), 4)
        prior -= cost
    changes: dict[str, Any] = {}
    late = False
    # A chained job's earlier attempts were charged as each ended (``prior_cost_usd``): the
    # job's cost is theirs plus this attempt's; the usage settles this attempt's.
    total = None if cost is None else round(prior + cost, 4)
    if total is not None and before.cost_usd != total:
        changes["cost_usd"] = total
        late = before.status in TERMINAL_STATUSES
    if not before.team:
        return Settlement(changes=changes, cost=cost, late_cost=late)
    if not before.usage_released:
        changes.update(usage_released=True, usage_spend_usd=cost or 0.0)
        return Settlement(changes=changes, cost=cost, release=True, late_cost=late)
    if before.usage_spend_usd == 0 and cost:
        changes["usage_spend_usd"] = cost
        return Settlement(changes=changes, cost=cost, add_spend=cost, late_cost=True)
    return Settlement(changes=changes, cost=cost, late_cost=late)
