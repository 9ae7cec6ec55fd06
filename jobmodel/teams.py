"""Teams: who a caller is, which team they belong to, and the team's limits (docs/API.md, Teams).

Standard library only. The same objects are parsed from ``cdk.json`` context at synth time
(``ftl:teams``, ``ftl:admins``) and from the trigger's environment at run time
(``FTL_TEAMS``, ``FTL_ADMINS``, written by :meth:`TeamsConfig.to_env`).

Principal patterns: an IAM ARN in which ``*`` matches any run of characters (``?`` and other
glob characters are literal). A role ARN ``arn:<p>:iam::<acct>:role/<path/>Name`` also matches
the sessions of that role, ``arn:<p>:sts::<acct>:assumed-role/Name/<session>``, which is how
API Gateway's IAM authoriser reports a caller who assumed the role.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._rules import is_bucket_name
from .contract.errors import SettingsError
from .contract.names import ENV_ADMINS, ENV_TEAMS

__all__ = [
    "TEAM_NAME_RULE",
    "Team",
    "TeamLimits",
    "TeamsConfig",
    "TeamsError",
    "principal_matches",
]

# A team name becomes a job-name prefix, an S3 prefix, part of an IAM role name and a Lambda
# alias name, so it is short, lowercase and DNS-like.
TEAM_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,18}[a-z0-9]")
TEAM_NAME_RULE = "2-20 characters of lowercase letters, digits and '-', starting with a letter"
_PRINCIPAL_RE = re.compile(r"arn:aws[a-z-]*:(iam|sts)::(\d{12}|\*):[\x21-\x7e]{1,512}")
_ROLE_RE = re.compile(r"arn:(aws[a-z-]*):iam::(\d{12}|\*):role/(?:[^*]*/)?([^/]+)")
TEAM_KEYS = frozenset({"name", "principals", "weight", "buckets", "limits"})
LIMIT_KEYS = frozenset({"max_instances", "max_job_cost_usd", "monthly_budget_usd"})
MAX_TEAMS = 50


class TeamsError(SettingsError):
    """Bad team configuration; ``key`` is the context key path (``ftl:teams[1].limits``)."""


@dataclass(frozen=True, kw_only=True)
class TeamLimits:
    """Per-team caps; ``None`` means no cap."""

    max_instances: int | None = None
    max_job_cost_usd: float | None = None
    monthly_budget_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in sorted(LIMIT_KEYS) if getattr(self, k) is not None}


@dataclass(frozen=True, kw_only=True)
class Team:
    name: str
    principals: tuple[str, ...]
    weight: float = 1.0  # fair-share weight in the queue (higher gets more)
    buckets: tuple[str, ...] = ()  # extra input buckets this team may read whole
    limits: TeamLimits = field(default_factory=TeamLimits)

    def matches(self, arn: str) -> bool:
        return any(principal_matches(p, arn) for p in self.principals)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "principals": list(self.principals)}
        if self.weight != 1.0:
            out["weight"] = self.weight
        if self.buckets:
            out["buckets"] = list(self.buckets)
        limits = self.limits.to_dict()
        if limits:
            out["limits"] = limits
        return out


@dataclass(frozen=True, kw_only=True)
class TeamsConfig:
    """All teams and the admins. Empty means a single-team deployment (no team checks)."""

    teams: tuple[Team, ...] = ()
    admins: tuple[str, ...] = ()

    @property
    def enabled(self) -> bool:
        return bool(self.teams)

    def get(self, name: str) -> Team | None:
        for team in self.teams:
            if team.name == name:
                return team
        return None

    def matching(self, arn: str) -> tuple[Team, ...]:
        """Every team whose principals match ``arn``. More than one is a configuration the
        launcher refuses to guess about (the caller gets ``Forbidden``)."""
        return tuple(team for team in self.teams if team.matches(arn))

    def is_admin(self, arn: str) -> bool:
        return any(principal_matches(p, arn) for p in self.admins)

    # ----------------------------------------------------------- (de)serialise
    @classmethod
    def parse(
        cls,
        teams: Any,
        admins: Any = None,
        *,
        key: str = "ftl:teams",
        admins_key: str = "ftl:admins",
    ) -> TeamsConfig:
        """Validate the context values; a problem raises :class:`TeamsError` naming the key."""
        if teams is None:
            teams = []
        if not isinstance(teams, list) or len(teams) > MAX_TEAMS:
            raise TeamsError(key, f"a list of at most {MAX_TEAMS} team objects", teams)
        parsed: list[Team] = []
        for i, raw in enumerate(teams):
            parsed.append(_parse_team(raw, f"{key}[{i}]"))
        names = [t.name for t in parsed]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise TeamsError(f"{key}[{i}].name", "team names must be unique", name)
        _refuse_overlapping_names(names, key)
        if admins is None:
            admins = []
        admin_list = _principals(admins, admins_key, allow_empty=True)
        if admin_list and not parsed:
            raise TeamsError(admins_key, "admins need at least one team in ftl:teams", admins)
        return cls(teams=tuple(parsed), admins=admin_list)

    def to_env(self) -> dict[str, str]:
        """The trigger's environment variables for this configuration."""
        return {
            ENV_TEAMS: json.dumps([t.to_dict() for t in self.teams], separators=(",", ":")),
            ENV_ADMINS: json.dumps(list(self.admins), separators=(",", ":")),
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TeamsConfig:
        try:
            teams = json.loads(env.get(ENV_TEAMS) or "[]")
            admins = json.loads(env.get(ENV_ADMINS) or "[]")
        except ValueError as exc:
            raise ValueError(
                f"environment variable {ENV_TEAMS}/{ENV_ADMINS} is not JSON: {exc}"
            ) from None
        try:
            return cls.parse(teams, admins, key=ENV_TEAMS, admins_key=ENV_ADMINS)
        except TeamsError as exc:
            raise ValueError(f"environment variable {exc}") from None


def _refuse_overlapping_names(names: list[str], key: str) -> None:
    """A team's name is the prefix ``<team>-`` of its jobs, its S3 keys and its IAM patterns
    (``<team>-*``), and without dashes it names the team's stack outputs and constructs. Two
    teams may not share either: ``team-a`` would own ``team-a-b``'s jobs and prefixes, and
    ``team-ab`` and ``team-a-b`` would get one output id."""
    for i, name in enumerate(names):
        for j, other in enumerate(names):
            if i == j:
                continue
            if other.startswith(f"{name}-"):
                raise TeamsError(
                    f"{key}[{j}].name",
                    f"team names must not extend another team's name with '-': "
                    f"{key}[{i}].name {name!r} would cover the jobs, S3 prefixes and IAM name "
                    f"patterns of {other!r}",
                    other,
                )
            if j > i and name.replace("-", "") == other.replace("-", ""):
                raise TeamsError(
                    f"{key}[{j}].name",
                    f"team names must differ in more than '-': {key}[{i}].name {name!r} and "
                    f"{other!r} give the same stack output id",
                    other,
                )


def principal_matches(pattern: str, arn: str) -> bool:
    """True when ``arn`` matches ``pattern`` (``*`` any run of characters; a role ARN also
    matches its assumed-role sessions)."""
    if _glob(pattern).fullmatch(arn):
        return True
    role = _ROLE_RE.fullmatch(pattern)
    if role is None:
        return False
    partition, account, name = role.groups()
    session = f"arn:{partition}:sts::{account}:assumed-role/{name}/*"
    return _glob(session).fullmatch(arn) is not None


_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def _glob(pattern: str) -> re.Pattern[str]:
    compiled = _GLOB_CACHE.get(pattern)
    if compiled is None:
        compiled = re.compile(".*".join(re.escape(part) for part in pattern.split("*")))
        _GLOB_CACHE[pattern] = compiled
    return compiled


def _parse_team(raw: Any, key: str) -> Team:
    if not isinstance(raw, dict):
        raise TeamsError(key, "a team object with 'name' and 'principals'", raw)
    unknown = sorted(set(raw) - TEAM_KEYS)
    if unknown:
        raise TeamsError(
            f"{key}.{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(TEAM_KEYS))}"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not TEAM_NAME_RE.fullmatch(name):
        raise TeamsError(f"{key}.name", TEAM_NAME_RULE, name)
    principals = _principals(raw.get("principals"), f"{key}.principals", allow_empty=False)
    weight = raw.get("weight", 1.0)
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not 0.0001 <= weight <= 1000
    ):
        raise TeamsError(f"{key}.weight", "a number from 0.0001 to 1000", weight)
    buckets = raw.get("buckets", [])
    if not isinstance(buckets, list) or not all(
        isinstance(b, str) and is_bucket_name(b) for b in buckets
    ):
        raise TeamsError(f"{key}.buckets", "a list of S3 bucket names", buckets)
    return Team(
        name=name,
        principals=principals,
        weight=float(weight),
        buckets=tuple(buckets),
        limits=_limits(raw.get("limits", {}), f"{key}.limits"),
    )


def _limits(raw: Any, key: str) -> TeamLimits:
    if not isinstance(raw, dict):
        raise TeamsError(key, f"an object with any of {', '.join(sorted(LIMIT_KEYS))}", raw)
    unknown = sorted(set(raw) - LIMIT_KEYS)
    if unknown:
        raise TeamsError(
            f"{key}.{unknown[0]}", f"unknown limit; allowed: {', '.join(sorted(LIMIT_KEYS))}"
        )
    out: dict[str, Any] = {}
    value = raw.get("max_instances")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
            raise TeamsError(f"{key}.max_instances", "an integer from 1 to 10000", value)
        out["max_instances"] = value
    for name in ("max_job_cost_usd", "monthly_budget_usd"):
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1e9:
            raise TeamsError(f"{key}.{name}", "a positive number of US dollars", value)
        out[name] = float(value)
    return TeamLimits(**out)


def _principals(raw: Any, key: str, *, allow_empty: bool) -> tuple[str, ...]:
    rule = "a list of IAM principal ARNs (arn:aws:iam::<account>:role/..., '*' allowed)"
    if not isinstance(raw, list) or (not raw and not allow_empty) or len(raw) > 100:
        raise TeamsError(key, rule, raw)
    for i, value in enumerate(raw):
        if not isinstance(value, str) or not _PRINCIPAL_RE.fullmatch(value):
            raise TeamsError(f"{key}[{i}]", rule, value)
        if value.replace("*", "") == value.split(":", 5)[0] or value.endswith("::*"):
            raise TeamsError(f"{key}[{i}]", "a pattern must name an account or a role", value)
    return tuple(raw)
