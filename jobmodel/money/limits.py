"""Per-team limits and the usage that counts against them (docs/API.md, Teams and spend).

Standard library only. The checks are pure functions; the DynamoDB request shapes that keep
usage exact under concurrency are built here too (plain dicts), so the trigger and the
job-events function share one copy of them.

Usage lives in one ledger item per team, ``pk = "usage#<team>"``:

* ``instances``: instances of the team's ``Submitting`` and running jobs;
* ``reserved``: the estimated maximum cost of those jobs (USD);
* ``month`` (``YYYY-MM``, UTC), ``spend``: the cost of jobs that finished in that month;
* ``committed`` = ``spend + reserved``: what the monthly budget is checked against
  (DynamoDB conditions cannot add two attributes, so the sum is kept as its own attribute).

A submit adds its instances and estimate in the same transaction that claims the job, with a
condition that the limits still hold, so concurrent submits never overshoot. A job that ends
(or fails to start) subtracts them again, once: its job item gets ``usage_released`` in the
same transaction, and ``usage_spend_usd``: the cost it added to ``spend`` (0 when the cost was
not known yet: a job that Batch reported ended before SageMaker reported its billable time).
Such a cost is added once when it becomes known (:func:`spend_update`). A new month starts
with ``committed = reserved`` and ``spend = 0``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..contract.errors import QuotaExceeded, ValidationError
from ..teams import TeamLimits

__all__ = [
    "USAGE",
    "require_price",
    "Usage",
    "check_limits",
    "claim_update",
    "month_of",
    "release_update",
    "rollover_update",
    "spend_update",
    "usage_item",
]

USAGE = "usage#"


def month_of(now: datetime) -> str:
    return f"{now.year:04d}-{now.month:02d}"


def _n(value: float | int) -> dict[str, str]:
    if isinstance(value, int):
        return {"N": str(value)}
    return {"N": repr(round(float(value), 6))}


@dataclass(frozen=True)
class Usage:
    instances: int = 0
    reserved: float = 0.0
    spend: float = 0.0
    month: str = ""

    @property
    def committed(self) -> float:
        return round(self.spend + self.reserved, 6)

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None, month: str) -> Usage:
        """From a decoded ledger item; another month's spend does not count this month."""
        if not item:
            return cls(month=month)
        same = item.get("month") == month
        return cls(
            instances=int(item.get("instances", 0)),
            reserved=float(item.get("reserved", 0)),
            spend=float(item.get("spend", 0)) if same else 0.0,
            month=month,
        )

    def to_view(self) -> dict[str, Any]:
        return {
            "instances": self.instances,
            "month": self.month,
            "month_spend_usd": round(self.spend, 4),
            "month_reserved_usd": round(self.reserved, 4),
        }


def check_limits(
    limits: TeamLimits, usage: Usage, *, team: str, count: int, estimate: float | None
) -> list[dict[str, Any]]:
    """Every limit checked for one more job; raises ``QuotaExceeded`` on the first broken one.

    ``estimate`` None (unknown price) is only allowed for a team without cost limits; the
    caller refuses that case before (docs/API.md: a cost cap needs a known price).
    """
    checks: list[dict[str, Any]] = []
    if limits.max_instances is not None:
        _limit(
            checks,
            team,
            "max_instances",
            limits.max_instances,
            usage.instances,
            count,
            "instances running or starting",
        )
    if limits.max_job_cost_usd is not None and estimate is not None:
        _limit(
            checks, team, "max_job_cost_usd", limits.max_job_cost_usd, 0, estimate, "USD per job"
        )
    if limits.monthly_budget_usd is not None and estimate is not None:
        _limit(
            checks,
            team,
            "monthly_budget_usd",
            limits.monthly_budget_usd,
            usage.committed,
            estimate,
            f"USD in {usage.month} (spent plus the estimated maximum of running jobs)",
        )
    return checks


def _limit(
    checks: list[dict[str, Any]],
    team: str,
    name: str,
    value: float,
    current: float,
    requested: float,
    unit: str,
) -> None:
    ok = current + requested <= value + 1e-9
    checks.append(
        {"check": name, "ok": ok, "limit": value, "current": current, "requested": requested}
    )
    if not ok:
        raise QuotaExceeded(
            f"team {team}'s limit {name} is {value:g} {unit}; current use is {current:g} and "
            f"this job needs {requested:g}",
            limit=name,
            value=value,
            current=current,
            requested=requested,
        )


def require_price(
    limits: TeamLimits,
    estimate: float | None,
    *,
    field: str,
    what: str,
    instance_type: str,
    reason: str | None,
) -> None:
    """Refuse (``ValidationError`` on ``field``) a job whose cost is unknown (no price for
    ``instance_type``: ``reason``) under a cost limit (``max_job_cost_usd`` or
    ``monthly_budget_usd``): a limit cannot hold a cost it cannot bound."""
    if estimate is not None or (
        limits.max_job_cost_usd is None and limits.monthly_budget_usd is None
    ):
        return
    raise ValidationError(
        field,
        f"{what} has a cost limit and the price of {instance_type} is unknown ({reason}); "
        "choose a priced instance type or ask the platform team to add the price (ftl:prices)",
    )


# ------------------------------------------------------------------ DynamoDB request shapes
def usage_item(table: str, team: str, month: str) -> dict[str, Any]:
    """A put that creates the team's usage item if it does not exist yet."""
    return {
        "TableName": table,
        "Item": {
            "pk": {"S": USAGE + team},
            "team_usage": {"S": team},
            "month": {"S": month},
            "instances": _n(0),
            "reserved": _n(0),
            "spend": _n(0),
            "committed": _n(0),
        },
        "ConditionExpression": "attribute_not_exists(pk)",
    }


def rollover_update(table: str, team: str, old: str, month: str) -> dict[str, Any]:
    """Start ``month``: this month has spent nothing; running jobs stay reserved."""
    return {
        "TableName": table,
        "Key": {"pk": {"S": USAGE + team}},
        "UpdateExpression": "SET #m = :m, spend = :zero, committed = reserved",
        "ConditionExpression": "#m = :old",
        "ExpressionAttributeNames": {"#m": "month"},
        "ExpressionAttributeValues": {":m": {"S": month}, ":old": {"S": old}, ":zero": _n(0)},
    }


def claim_update(
    table: str,
    team: str,
    month: str,
    limits: TeamLimits,
    *,
    count: int,
    estimate: float | None,
) -> dict[str, Any]:
    """The usage half of a claim transaction: add the job, only if every limit still holds.

    The team's first claim creates the item (a refused submit never writes one: the limits
    are checked against a missing item's zero usage before the claim, and a claim that lost
    to a concurrent first one meets that one's item and its conditions)."""
    reserve = estimate or 0.0
    conditions = ["#m = :m"]
    values: dict[str, Any] = {
        ":m": {"S": month},
        ":team": {"S": team},
        ":zero": _n(0),
        ":count": _n(count),
        ":est": _n(reserve),
    }
    if limits.max_instances is not None:
        conditions.append("instances <= :imax")
        values[":imax"] = _n(limits.max_instances - count)
    if limits.monthly_budget_usd is not None:
        conditions.append("committed <= :cmax")
        values[":cmax"] = _n(limits.monthly_budget_usd - reserve + 1e-9)
    return {
        "TableName": table,
        "Key": {"pk": {"S": USAGE + team}},
        "UpdateExpression": (
            "SET #m = :m, team_usage = :team, spend = if_not_exists(spend, :zero) "
            "ADD instances :count, reserved :est, committed :est"
        ),
        "ConditionExpression": f"attribute_not_exists(pk) OR ({' AND '.join(conditions)})",
        "ExpressionAttributeNames": {"#m": "month"},
        "ExpressionAttributeValues": values,
    }


def release_update(
    table: str, team: str, month: str, *, count: int, estimate: float | None, cost: float | None
) -> dict[str, Any]:
    """The usage half of a job's end: give back its instances and reservation, add its cost."""
    reserve = estimate or 0.0
    spent = cost or 0.0
    return {
        "TableName": table,
        "Key": {"pk": {"S": USAGE + team}},
        "UpdateExpression": (
            "ADD instances :neg, reserved :unreserve, committed :delta, spend :spent"
        ),
        "ConditionExpression": "#m = :m",
        "ExpressionAttributeNames": {"#m": "month"},
        "ExpressionAttributeValues": {
            ":m": {"S": month},
            ":neg": _n(-count),
            ":unreserve": _n(-reserve),
            ":delta": _n(spent - reserve),
            ":spent": _n(spent),
        },
    }


def spend_update(table: str, team: str, month: str, *, cost: float) -> dict[str, Any]:
    """Add a finished job's cost learned after its usage was given back (counted this month)."""
    return {
        "TableName": table,
        "Key": {"pk": {"S": USAGE + team}},
        "UpdateExpression": "ADD committed :cost, spend :cost",
        "ConditionExpression": "#m = :m",
        "ExpressionAttributeNames": {"#m": "month"},
        "ExpressionAttributeValues": {":m": {"S": month}, ":cost": _n(cost)},
    }
