"""The model registry's actions (docs/API.md, "Model registry"): ``models`` and ``review``.

* ``models``: the versions in the caller's team's groups (one per template; a single-team
  deployment's groups are the templates'), newest first, each with its lineage (the
  version's customer metadata, DescribeModelPackage). A team member sees only the groups of
  the own team; an admin sees every team's, or one ``team``'s.
* ``review``: an admin approves or rejects a job's version (UpdateModelPackage with
  ``ModelApprovalStatus`` and ``ApprovalDescription``) and the job's record says so. Anyone
  else is refused (``Forbidden``, field ``caller``) before anything is read; in a single-team
  deployment, whoever may invoke the launcher reviews.

``actions.Launcher`` builds one :class:`ModelsFlow` and maps both actions to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from ftl_ledger.job_codec import from_record
from ftl_trigger.records import Records, ledger_call
from ftl_trigger.remote import map_aws_error
from jobmodel import PlatformConfig, TemplateSpec
from jobmodel.after_training import registry
from jobmodel.contract.errors import Conflict, Forbidden, NotFound, UpstreamError, ValidationError
from jobmodel.evaluation import version as EV
from jobmodel.jobs.record import Change
from jobmodel.requests.queries import only_fields
from jobmodel.requests.submit import validate_job_name
from jobmodel.teams import TeamsConfig

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_trigger.identity import Caller
    from ftl_trigger.recovery_flow import RecoveryFlow

__all__ = ["ModelsFlow", "ModelsSettings"]

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
MAX_APPROVAL_DESCRIPTION = 1024


class ModelsSettings(Protocol):
    """What the registry's actions read of the runtime."""

    model_registry: bool
    catalog: Mapping[str, TemplateSpec]
    teams: TeamsConfig
    platform: PlatformConfig
    sagemaker: Any


class ModelsFlow:
    """The ``models`` and ``review`` actions."""

    def __init__(
        self, *, settings: ModelsSettings, ledger: Ledger, records: Records, recovery: RecoveryFlow
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.records = records
        self.recovery = recovery

    def _deployed(self) -> ModelsSettings:
        if not self.settings.model_registry:
            raise UpstreamError("this platform was deployed without the model registry")
        return self.settings

    def models(self, params: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
        return list_models(self._deployed(), params, caller)

    def review(self, params: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
        return review(self, self._deployed(), params, caller)


# ------------------------------------------------------------------------ models
def _groups(rt: ModelsSettings, params: Mapping[str, Any], caller: Caller) -> list[str]:
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
    return [registry.group_name(platform, t, team) for team in teams for t in templates]


def list_models(rt: ModelsSettings, params: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
    allowed = {"template", "limit"} | ({"team"} if caller.admin else set())
    only_fields(params, frozenset(allowed))
    limit = params.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, str) and limit.isdigit():
        limit = int(limit)
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"limit must be a whole number from 1 to {MAX_LIMIT}")
    sm = rt.sagemaker
    found: list[dict[str, Any]] = []
    for group in _groups(rt, params, caller):
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
            raise map_aws_error(exc, "ListModelPackages") from None
        except BotoCoreError as exc:
            raise map_aws_error(exc, "ListModelPackages") from None
        found += page.get("ModelPackageSummaryList", [])
    found.sort(key=lambda s: str(s.get("CreationTime")), reverse=True)
    models = []
    for summary in found[:limit]:
        try:
            described = sm.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
        except (ClientError, BotoCoreError) as exc:
            raise map_aws_error(exc, "DescribeModelPackage") from None
        view = registry.version_view(described)
        evaluation = EV.evaluation_view(described.get("CustomerMetadataProperties"))
        if evaluation is not None:  # issue 36: the evaluation's verdict and metrics
            view["evaluation"] = evaluation
        models.append(view)
    return {"models": models}


# ------------------------------------------------------------------------ review
def review(
    flow: ModelsFlow, rt: ModelsSettings, params: Mapping[str, Any], caller: Caller
) -> dict[str, Any]:
    if caller.teams_mode and not caller.admin:
        raise Forbidden(
            f"only the platform's admins (ftl:admins) approve or reject model versions; "
            f"{caller.principal} is not one",
            field="caller",
        )
    only_fields(params, frozenset({"job_name", "decision", "description"}))
    name = validate_job_name(params.get("job_name"))
    decision = params.get("decision")
    if decision not in registry.APPROVAL_STATUSES:
        raise ValidationError(
            "decision", f"decision must be one of {', '.join(registry.APPROVAL_STATUSES)}"
        )
    note = params.get("description", "")
    if not isinstance(note, str) or len(note) > MAX_APPROVAL_DESCRIPTION:
        raise ValidationError(
            "description",
            f"description must be text of at most {MAX_APPROVAL_DESCRIPTION} characters",
        )
    record = ledger_call(flow.ledger.get_job, name)
    if record is None or not caller.sees(from_record(record)):
        raise NotFound(f"no job named {name} was started by this platform", field="job_name")
    record = flow.recovery.look_after(record)  # a registration still owed is made first
    job = from_record(record)
    arn = job.model_package_arn
    if not arn:
        raise Conflict(
            f"job {name} has no model version (only a Completed job registers one; status "
            f"{job.status})",
            field="job_name",
        )
    update: dict[str, Any] = {"ModelPackageArn": arn, "ModelApprovalStatus": decision}
    if note:
        update["ApprovalDescription"] = note
    try:
        rt.sagemaker.update_model_package(**update)
    except (ClientError, BotoCoreError) as exc:
        raise map_aws_error(exc, "UpdateModelPackage") from None
    reviewed = {"model_approval_status": decision}

    def change(current: Any) -> Change:
        return Change(also=reviewed)

    job = from_record(flow.records.write(record, change))
    out = {"job_name": name, **{k: getattr(job, k) for k in registry.FIELDS}, **reviewed}
    if note:
        out["approval_description"] = note
    return out
