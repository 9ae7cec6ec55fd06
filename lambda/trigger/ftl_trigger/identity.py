"""Who is calling, decided by how the function was invoked (docs/API.md, Doors and teams).

The door comes from ``context.invoked_function_arn``, never from the event:

* the alias ``http`` is the HTTP API's integration: only API Gateway (payload 2.0) events;
  the caller is the IAM ARN API Gateway's IAM authoriser puts in
  ``requestContext.authorizer.iam.userArn``;
* anything else is the direct door. In a teams deployment the alias decides the team:
  ``team-<name>`` means team <name>, ``admin`` means an admin (IAM decides who may invoke
  which alias). An unqualified, ``$LATEST`` or version invoke is refused there.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobmodel import Forbidden
from jobmodel.contract.names import ADMIN_ALIAS, HTTP_ALIAS, TEAM_ALIAS_PREFIX
from jobmodel.jobs.job import Job
from jobmodel.teams import Team, TeamsConfig

__all__ = ["ADMIN_ALIAS", "DIRECT_INVOKE", "HTTP_ALIAS", "TEAM_ALIAS_PREFIX", "Caller"]

DIRECT_INVOKE = "direct-invoke"


@dataclass(frozen=True)
class Caller:
    """The principal behind a call and what it may see."""

    principal: str
    team: Team | None = None
    admin: bool = False
    teams_mode: bool = False

    @property
    def team_name(self) -> str | None:
        return None if self.team is None else self.team.name

    @property
    def scope(self) -> str:
        """What a list page is bound to (a next_token works only in the same scope)."""
        if not self.teams_mode:
            return "all"
        if self.admin:
            return "admin"
        return f"team:{self.team_name}"

    def sees(self, job: Job) -> bool:
        return not self.teams_mode or self.admin or job.team == self.team_name

    def submitting_team(self) -> Team | None:
        """The team a new job belongs to; refuses a teams-mode caller without one."""
        if self.teams_mode and self.team is None:
            raise Forbidden(
                f"{self.principal} belongs to no team, so it cannot submit jobs; admins submit "
                "through their own team's door",
                field="team",
            )
        return self.team


def qualifier_of(invoked_arn: str) -> str | None:
    """The alias or version in ``arn:aws:lambda:<region>:<acct>:function:<name>[:<qualifier>]``."""
    parts = invoked_arn.split(":")
    return parts[7] if len(parts) >= 8 and parts[7] else None


def function_arn_of(invoked_arn: str) -> str:
    return ":".join(invoked_arn.split(":")[:7])


def direct_caller(invoked_arn: str, teams: TeamsConfig) -> Caller:
    qualifier = qualifier_of(invoked_arn)
    if not teams.enabled:
        return Caller(principal=DIRECT_INVOKE)
    if qualifier == ADMIN_ALIAS and teams.admins:
        return Caller(principal="admin alias", admin=True, teams_mode=True)
    if qualifier and qualifier.startswith(TEAM_ALIAS_PREFIX):
        team = teams.get(qualifier[len(TEAM_ALIAS_PREFIX) :])
        if team is not None:
            return Caller(principal=f"{qualifier} alias", team=team, teams_mode=True)
    base = function_arn_of(invoked_arn)
    shown = qualifier or "no alias"
    raise Forbidden(
        f"this platform has teams: invoke your team's alias ({base}:team-<name>) or the admin "
        f"alias ({base}:admin), not {shown}",
        field="function",
    )


def http_caller(user_arn: str | None, teams: TeamsConfig) -> Caller:
    if not teams.enabled:
        return Caller(principal=user_arn or "unknown-http-caller")
    if not user_arn:
        raise Forbidden("the HTTP request carries no IAM caller identity", field="caller")
    matches = teams.matching(user_arn)
    admin = teams.is_admin(user_arn)
    if len(matches) > 1:
        raise Forbidden(
            f"{user_arn} matches the principals of {len(matches)} teams; a caller must belong "
            "to exactly one team (ask the platform team to fix ftl:teams)",
            field="caller",
        )
    if not matches and not admin:
        raise Forbidden(
            f"{user_arn} is in no team of this platform (ftl:teams) and is not an admin",
            field="caller",
        )
    return Caller(
        principal=user_arn, team=matches[0] if matches else None, admin=admin, teams_mode=True
    )
