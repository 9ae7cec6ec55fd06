"""Whether an event's training job (or service job) belongs to the ledger job it names.

A training job is found by its name or its ``ftl:job-name`` tag, both of which whoever
creates a training job chooses. So before an event changes a team's job, what the job's
creator cannot choose must agree with the ledger: the training job's role (``RoleArn``: the
role the launcher rendered for the job, which only that team's jobs are passed) and its
``ftl:team`` tag; a Batch service job's share (the team, or ``default``). Evidence the event
does not carry is not held against it; evidence that contradicts the ledger drops the event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobmodel.capacity.scheduler import SHARE_POLICIES, share_of
from jobmodel.contract.names import TEAM_TAG_KEY
from jobmodel.jobs.job import Job

__all__ = ["foreign_reason", "owner_of"]


def owner_of(detail: Mapping[str, Any]) -> dict[str, str]:
    """What an event's detail says about who the job belongs to: ``role_arn`` and ``team``
    (SageMaker: ``RoleArn``, the ``ftl:team`` tag), ``share`` (Batch: its share)."""
    owner: dict[str, str] = {}
    role = detail.get("RoleArn")
    if isinstance(role, str) and role:
        owner["role_arn"] = role
    tags = detail.get("Tags")
    if isinstance(tags, list):
        tags = {t.get("Key"): t.get("Value") for t in tags if isinstance(t, Mapping)}
    team = tags.get(TEAM_TAG_KEY) if isinstance(tags, Mapping) else None
    if isinstance(team, str):
        owner["team"] = team
    for key in ("shareIdentifier", "quotaShareName"):
        share = detail.get(key)
        if isinstance(share, str) and share:
            owner["share"] = share
    return owner


def foreign_reason(job: Job, owner: Mapping[str, str]) -> str | None:
    """Why the event's job is not the ledger job's (None: nothing contradicts it)."""
    team = job.team
    if "team" in owner and owner["team"] != team:
        return f"its {TEAM_TAG_KEY} tag is {owner['team']!r}, the job's team {team!r}"
    # Its share under either policy (jobmodel.capacity.scheduler.share_of: the one mapping).
    if "share" in owner and owner["share"] not in {share_of(team, p) for p in SHARE_POLICIES}:
        return f"its Batch share is {owner['share']!r}, the job's team {team!r}"
    expected = _rendered_role(job)
    if "role_arn" in owner and expected is not None and owner["role_arn"] != expected:
        return f"its role is {owner['role_arn']}, the job's {expected}"
    return None


def _rendered_role(job: Job) -> str | None:
    try:
        role = json.loads(str(job.rendered or "{}")).get("RoleArn")
    except (ValueError, AttributeError):
        return None
    return role if isinstance(role, str) else None
