"""The model registry's actions (docs/API.md, "Model registry"): ``models`` and ``review``.

* ``models``: the versions in the caller's team's groups (one per template; a single-team
  deployment's groups are the templates'), newest first, each with its lineage (the
  version's customer metadata, DescribeModelPackage). A team member sees only the groups of
  the own team; an admin sees every team's, or one ``team``'s.
* ``review``: an admin approves or rejects a job's version (UpdateModelPackage with
  ``ModelApprovalStatus`` and ``ApprovalDescription``) and the job's record says so. Anyone
  else is refused (``Forbidden``, field ``caller``) before anything is read; in a single-team
  deployment, whoever may invoke the launcher reviews.

Hooked into ``actions.Launcher.dispatch`` by :func:`run_model_action`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from jobmodel import registry as R
from jobmodel.errors import Conflict, Forbidden, NotFound, UpstreamError, ValidationError
from jobmodel.job import Change
from jobmodel.queries import only_fields
from jobmodel.request import validate_job_name

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_trigger.actions import Launcher
    from ftl_trigger.adapters import Call
    from ftl_trigger.identity import Caller

__all__ = ["MODEL_ACTIONS", "run_model_action"]

MODEL_ACTIONS = ("models", "review")
DEFAULT_LIMIT, MAX_LIMIT = 20, 100
MAX_APPROVAL_DESCRIPTION = 1024


def run_model_action(launcher: Launcher, call: Call) -> dict[str, Any]:
    if not launcher.rt.model_registry:
        raise UpstreamError("this platform was deployed without the model registry")
    if call.action == "models":
        return list_models(launcher, call.params, call.caller)
    return review(launcher, call.params, call.caller)


# ------------------------------------------------------------------------ models
def _groups(launcher: Launcher, params: Mapping[str, Any], caller: Caller) -> list[str]:
    rt = launcher.rt
    template = params.get("template")
    if template is not None and template not in rt.catalog:
        raise ValidationError("template", f"no template named {template!r}")
    templates = [template] if template else sorted(rt.catalog)
    if not caller.teams_mode:
        teams: list[str | None] = [None]
    elif caller.admin and params.get("team") is None:
        teams = [t.name for t in rt.teams.teams]
    elif caller.admin:
        if rt.teams.get(str(params["team"])) is None:
            raise ValidationError("team", f"no team named {params['team']!r}")
        teams = [str(params["team"])]
    else:
        teams = [caller.team_name]
    platform = rt.platform.platform_name
    return [R.group_name(platform, t, team) for team in teams for t in templates]


def list_models(launcher: Launcher, params: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
    allowed = {"template", "limit"} | ({"team"} if caller.admin else set())
    only_fields(params, frozenset(allowed))
    limit = params.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, str) and limit.isdigit():
        limit = int(limit)
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"limit must be a whole number from 1 to {MAX_LIMIT}")
    sm = launcher.rt.sagemaker
    found: list[dict[str, Any]] = []
    for group in _groups(launcher, params, caller):
        try:
            page = sm.list_model_packages(
                ModelPackageGroupName=group,
                SortBy="CreationTime",
                SortOrder="Descending",
                MaxResults=limit,
            )
        except ClientError as exc:
            if "does not exist" in str(exc):  # a template added after the deploy
                continue
            raise launcher._map_error(exc, "ListModelPackages") from None
        except BotoCoreError as exc:
            raise launcher._map_error(exc, "ListModelPackages") from None
        found += page.get("ModelPackageSummaryList", [])
    found.sort(key=lambda s: str(s.get("CreationTime")), reverse=True)
    models = []
    for summary in found[:limit]:
        try:
            described = sm.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
        except (ClientError, BotoCoreError) as exc:
            raise launcher._map_error(exc, "DescribeModelPackage") from None
        models.append(R.version_view(described))
    return {"models": models}


# ------------------------------------------------------------------------ review
def review(launcher: Launcher, params: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
    if caller.teams_mode and not caller.admin:
        raise Forbidden(
            f"only the platform's admins (ftl:admins) approve or reject model versions; "
            f"{caller.principal} is not one",
            field="caller",
        )
    only_fields(params, frozenset({"job_name", "decision", "description"}))
    name = validate_job_name(params.get("job_name"))
    decision = params.get("decision")
    if decision not in R.APPROVAL_STATUSES:
        raise ValidationError(
            "decision", f"decision must be one of {', '.join(R.APPROVAL_STATUSES)}"
        )
    note = params.get("description", "")
    if not isinstance(note, str) or len(note) > MAX_APPROVAL_DESCRIPTION:
        raise ValidationError(
            "description",
            f"description must be text of at most {MAX_APPROVAL_DESCRIPTION} characters",
        )
    job = launcher._ledger_call(launcher.ledger.get_job, name)
    if job is None or not caller.sees(job):
        raise NotFound(f"no job named {name} was started by this platform", field="job_name")
    job = launcher._look_after(job)  # a registration still owed is made first
    arn = job.get("model_package_arn")
    if not arn:
        raise Conflict(
            f"job {name} has no model version (only a Completed job registers one; status "
            f"{job.get('status')})",
            field="job_name",
        )
    update: dict[str, Any] = {"ModelPackageArn": arn, "ModelApprovalStatus": decision}
    if note:
        update["ApprovalDescription"] = note
    try:
        launcher.rt.sagemaker.update_model_package(**update)
    except (ClientError, BotoCoreError) as exc:
        raise launcher._map_error(exc, "UpdateModelPackage") from None
    reviewed = {"model_approval_status": decision}

    def change(current: Any) -> Change:
        return Change(also=reviewed)

    job = launcher._write(job, change)
    out = {"job_name": name, **{k: job.get(k) for k in R.FIELDS}, **reviewed}
    if note:
        out["approval_description"] = note
    return out
