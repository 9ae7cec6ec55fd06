"""Capacity sources: the platform's training plans (docs/API.md, "Capacity").

Standard library only.

* **Capacity sources**: training plans the platform team bought (SageMaker reserved capacity,
  ``ResourceConfig.TrainingPlanArn``), configured in context (``ftl:trainingPlans``) with the
  plan's instance type and count, its window, the teams that may use it (one team, or shared
  with named teams; none in a single-team deployment) and the templates that may run on it.
  :class:`CapacityConfig` carries them to the trigger (``FTL_CAPACITY``).
* **Capacity chains** use them: ``jobmodel.capacity.chain``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import _rules as R
from ..contract.errors import SettingsError
from ..contract.names import ENV_CAPACITY
from ..instances import INSTANCE_TYPES
from ..templates.spec import CHAIN_STEPS, ON_DEMAND, PLAN, SPOT

__all__ = [
    "CHAIN_STEPS",
    "ON_DEMAND",
    "PLAN",
    "SPOT",
    "CapacityConfig",
    "CapacityError",
    "TrainingPlan",
]

PLAN_KEYS = frozenset(
    {"name", "arn", "instanceType", "instanceCount", "start", "end", "teams", "templates"}
)
_PLAN_ARN_RE = re.compile(
    r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[A-Za-z0-9-]{1,63}"
)
_PLAN_NAME_RE = re.compile(r"[a-z0-9](-?[a-z0-9]){0,62}")
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z")


class CapacityError(SettingsError):
    """A bad capacity source; ``key`` names the context entry (``trainingPlans[0].end``)."""


def _parse_time(value: Any, key: str) -> datetime:
    if not isinstance(value, str) or not _TIME_RE.fullmatch(value):
        raise CapacityError(key, "an ISO 8601 UTC time such as '2025-07-01T00:00Z'", value)
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise CapacityError(key, "a real date and time", value) from None


@dataclass(frozen=True, kw_only=True)
class TrainingPlan:
    """One training plan: its reserved instances, window, teams and templates."""

    name: str
    arn: str
    instance_type: str
    instance_count: int
    start: str
    end: str
    teams: tuple[str, ...] = ()
    templates: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arn": self.arn,
            "instanceType": self.instance_type,
            "instanceCount": self.instance_count,
            "start": self.start,
            "end": self.end,
            "teams": list(self.teams),
            "templates": list(self.templates),
        }

    def window(self) -> tuple[datetime, datetime]:
        return _parse_time(self.start, "start"), _parse_time(self.end, "end")

    def open_at(self, now: datetime) -> bool:
        start, end = self.window()
        return start <= now < end

    def serves(self, *, team: str | None, template: str, count: int) -> bool:
        """Whether a job of ``team`` on ``template`` with ``count`` instances may use it."""
        if self.teams and team not in self.teams:
            return False
        return template in self.templates and count <= self.instance_count


def _plan(raw: Any, key: str, team_names: Sequence[str] | None) -> TrainingPlan:
    if not isinstance(raw, Mapping):
        raise CapacityError(key, "an object with " + ", ".join(sorted(PLAN_KEYS)), raw)
    unknown = sorted(set(raw) - PLAN_KEYS)
    if unknown:
        raise CapacityError(
            f"{key}.{unknown[0]}", "unknown key; known: " + ", ".join(sorted(PLAN_KEYS))
        )
    for required in ("name", "arn", "instanceType", "instanceCount", "start", "end", "templates"):
        if required not in raw:
            raise CapacityError(f"{key}.{required}", "is required")
    name = raw["name"]
    if not isinstance(name, str) or not _PLAN_NAME_RE.fullmatch(name):
        raise CapacityError(f"{key}.name", "1-64 lowercase letters, digits and single '-'", name)
    arn = raw["arn"]
    if not isinstance(arn, str) or not _PLAN_ARN_RE.fullmatch(arn):
        raise CapacityError(
            f"{key}.arn",
            "a training plan ARN, arn:aws:sagemaker:<region>:<account>:training-plan/<name>",
            arn,
        )
    itype = raw["instanceType"]
    if itype not in INSTANCE_TYPES:
        raise CapacityError(f"{key}.instanceType", "an instance type the platform knows", itype)
    count = raw["instanceCount"]
    if type(count) is not int or not 1 <= count <= 256:
        raise CapacityError(f"{key}.instanceCount", "a whole number from 1 to 256", count)
    start = _parse_time(raw["start"], f"{key}.start")
    end = _parse_time(raw["end"], f"{key}.end")
    if end <= start:
        raise CapacityError(f"{key}.end", f"after start ({raw['start']})", raw["end"])
    teams = raw.get("teams", [])
    if not isinstance(teams, list) or not all(isinstance(t, str) for t in teams):
        raise CapacityError(f"{key}.teams", "a list of team names", teams)
    if team_names is None and teams:
        raise CapacityError(
            f"{key}.teams", "only with ftl:teams (a single-team platform has no teams)", teams
        )
    if team_names is not None:
        if not teams:
            raise CapacityError(
                f"{key}.teams", "the team, or the teams sharing the plan (one at least)"
            )
        for i, team in enumerate(teams):
            if team not in team_names:
                raise CapacityError(f"{key}.teams[{i}]", "a team of ftl:teams", team)
    if len(set(teams)) != len(teams):
        raise CapacityError(f"{key}.teams", "each team once", teams)
    templates = raw["templates"]
    if (
        not isinstance(templates, list)
        or not templates
        or not all(isinstance(t, str) and R.TEMPLATE_NAME_RE.fullmatch(t) for t in templates)
    ):
        raise CapacityError(f"{key}.templates", "a non-empty list of template names", templates)
    return TrainingPlan(
        name=name,
        arn=arn,
        instance_type=itype,
        instance_count=count,
        start=raw["start"],
        end=raw["end"],
        teams=tuple(teams),
        templates=tuple(templates),
    )


@dataclass(frozen=True)
class CapacityConfig:
    """The platform's training plans (``ftl:trainingPlans``; ``FTL_CAPACITY`` at run time)."""

    plans: tuple[TrainingPlan, ...] = ()

    @classmethod
    def parse(
        cls, raw: Any, *, key: str = "trainingPlans", teams: Sequence[str] | None = None
    ) -> CapacityConfig:
        """``teams``: the deployment's team names (None: a single-team deployment)."""
        if raw is None:
            return cls()
        if not isinstance(raw, list):
            raise CapacityError(key, "a list of training plans", raw)
        plans = tuple(_plan(p, f"{key}[{i}]", teams) for i, p in enumerate(raw))
        seen: set[str] = set()
        for i, plan in enumerate(plans):
            if plan.name in seen:
                raise CapacityError(f"{key}[{i}].name", "unique among the plans", plan.name)
            seen.add(plan.name)
        return cls(plans)

    def check_catalog(self, catalog: Mapping[str, Any], *, key: str = "trainingPlans") -> None:
        """Each plan's templates exist, allow the plan's instance type and list the
        ``training-plan`` step in their chain."""
        for i, plan in enumerate(self.plans):
            for j, name in enumerate(plan.templates):
                spec = catalog.get(name)
                where = f"{key}[{i}].templates[{j}]"
                if spec is None:
                    raise CapacityError(where, "a template of the catalog", name)
                if plan.instance_type not in spec.instance_types:
                    raise CapacityError(
                        where,
                        f"a template that allows the plan's {plan.instance_type} "
                        f"({name} allows {', '.join(spec.instance_types)})",
                        name,
                    )
                if PLAN not in spec.capacity_chain:
                    raise CapacityError(
                        where, f"a template whose capacity_chain has {PLAN!r}", name
                    )

    def usable(
        self, *, team: str | None, template: str, count: int, now: datetime
    ) -> TrainingPlan | None:
        """The first plan open now that this team's job may use."""
        for plan in self.plans:
            if plan.serves(team=team, template=template, count=count) and plan.open_at(now):
                return plan
        return None

    def to_env(self) -> dict[str, str]:
        return {ENV_CAPACITY: json.dumps([p.to_dict() for p in self.plans], separators=(",", ":"))}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CapacityConfig:
        raw = env.get(ENV_CAPACITY)
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"environment variable {ENV_CAPACITY} is not JSON: {exc}") from None
        teams = (
            sorted({t for p in data for t in p.get("teams", [])}) if isinstance(data, list) else []
        )
        return cls.parse(data, key=ENV_CAPACITY, teams=teams or None)
