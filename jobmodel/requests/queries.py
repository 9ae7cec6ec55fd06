"""Validation of the read and stop actions (docs/API.md, "Other responses"): ``templates``,
``whoami``, ``describe``, ``stop`` and ``list``.

Like ``validate_submit`` these are pure: they read the parameters (and the catalog and teams
for ``list``) and return what the launcher needs, or raise the contract's errors naming the
field.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..contract.errors import NotFound, ValidationError
from ..contract.statuses import JOB_STATUSES
from ..teams import TeamsConfig
from .submit import validate_job_name

__all__ = [
    "ADMIN_LIST_FIELDS",
    "LIST_FIELDS",
    "ListQuery",
    "only_fields",
    "validate_job_action",
    "validate_list",
]

LIST_FIELDS = frozenset({"template", "status", "limit", "next_token"})
ADMIN_LIST_FIELDS = LIST_FIELDS | {"team"}
DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 100
MAX_NEXT_TOKEN = 2048


def only_fields(params: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """``ValidationError`` on the first field (sorted) that is not in ``allowed``."""
    unknown = sorted(str(k) for k in params if k not in allowed)
    if unknown:
        raise ValidationError(
            unknown[0],
            f"unknown field {unknown[0][:80]!r}; allowed: {', '.join(sorted(allowed)) or 'none'}",
        )


def validate_job_action(params: Mapping[str, Any]) -> str:
    """``describe`` and ``stop``: only ``job_name``, a valid SageMaker job name."""
    only_fields(params, frozenset({"job_name"}))
    return validate_job_name(params.get("job_name"))


@dataclass(frozen=True)
class ListQuery:
    """A checked ``list`` request; ``team`` is the team whose jobs to list (None: all)."""

    team: str | None
    template: str | None
    status: str | None
    limit: int
    next_token: str | None


def validate_list(
    params: Mapping[str, Any],
    *,
    catalog: Collection[str],
    teams: TeamsConfig,
    own_team: str | None,
    admin: bool,
) -> ListQuery:
    """``list``: a non-admin sees ``own_team``'s jobs (None outside teams mode); an admin
    may name any ``team``."""
    only_fields(params, ADMIN_LIST_FIELDS if admin else LIST_FIELDS)
    return ListQuery(
        team=_list_team(params.get("team"), teams, own_team),
        template=_list_template(params.get("template"), catalog),
        status=_list_status(params.get("status")),
        limit=_list_limit(params.get("limit", DEFAULT_LIST_LIMIT)),
        next_token=_next_token(params.get("next_token")),
    )


def _list_team(wanted: Any, teams: TeamsConfig, own_team: str | None) -> str | None:
    if wanted is None:
        return own_team
    if not isinstance(wanted, str) or teams.get(wanted) is None:
        raise ValidationError(
            "team", f"team must be one of the platform's teams, got {wanted!r:.80}"
        )
    return wanted


def _list_template(template: Any, catalog: Collection[str]) -> str | None:
    if template is None:
        return None
    if not isinstance(template, str):
        raise ValidationError("template", "template must be a string")
    if template not in catalog:
        raise NotFound(f"no template named {template[:80]!r}", field="template")
    return template


def _list_status(status: Any) -> str | None:
    if status is not None and status not in JOB_STATUSES:
        raise ValidationError("status", f"status must be one of {', '.join(JOB_STATUSES)}")
    return None if status is None else str(status)


def _list_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise ValidationError("limit", f"limit must be an integer from 1 to {MAX_LIST_LIMIT}")
    return limit


def _next_token(token: Any) -> str | None:
    if token is not None and (not isinstance(token, str) or len(token) > MAX_NEXT_TOKEN):
        raise ValidationError("next_token", "next_token is not one this launcher returned")
    return token
