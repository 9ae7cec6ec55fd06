"""What a caller may use: the templates (``templates``) and who the caller is (``whoami``).

:class:`CallerFlow` is given the runtime's templates and platform (``settings``: the data
bucket of a template's default channels) and the team's usage; it calls no other flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ftl_trigger.identity import Caller
from ftl_trigger.records import ledger_call
from jobmodel import PlatformConfig, TemplateSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.usage import TeamUsage


class CallerSettings(Protocol):
    catalog: Mapping[str, TemplateSpec]
    platform: PlatformConfig


class CallerFlow:
    def __init__(self, *, settings: CallerSettings, usage: TeamUsage) -> None:
        self.settings = settings
        self.usage = usage

    def templates(self, caller: Caller) -> dict[str, Any]:
        """Each template's view, with its channels' default data under the caller's team
        prefix (no default URI for a caller without a team in a teams deployment)."""
        lost = caller.teams_mode and caller.team_name is None
        bucket = None if lost else self.settings.platform.data_bucket
        views = [
            t.public_view(data_bucket=bucket, team=caller.team_name)
            for t in self.settings.catalog.values()
        ]
        return {"templates": views}

    def whoami(self, caller: Caller) -> dict[str, Any]:
        team = caller.team
        usage = None
        if team is not None:
            usage = ledger_call(self.usage.peek, team.name).to_view()
        return {
            "team": caller.team_name,
            "admin": caller.admin,
            "principal": caller.principal,
            "teams": caller.teams_mode,
            "limits": team.limits.to_dict() if team is not None else {},
            "usage": usage,
        }
