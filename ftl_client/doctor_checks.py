"""``ftl doctor``'s checks as pure functions: what the catalog needs, and findings from what AWS
answered (no AWS call here; ``ftl_client.doctor`` makes the calls)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobmodel import regions
from jobmodel.capacity import service_quotas as SQ
from jobmodel.contract.names import BATCH_SLR, BATCH_SLR_SERVICE, CDK_MIN_BOOTSTRAP_VERSION

OK, WARN, BLOCK, UNKNOWN = "ok", "warn", "block", "unknown"


@dataclass(frozen=True)
class Finding:
    """One line of the report: ``status`` is ok, warn, block or unknown (could not check)."""

    check: str
    subject: str
    status: str
    message: str
    action: str | None = None  # what to request where
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "check": self.check,
            "subject": self.subject,
            "status": self.status,
            "message": self.message,
        }
        if self.action:
            out["action"] = self.action
        return {**out, **self.data}


@dataclass
class Need:
    """What the catalog asks of one instance type and capacity kind."""

    default: int = 0
    maximum: int = 0
    required: bool = False  # some template's default job runs on this kind, with no chain
    templates: list[str] = field(default_factory=list)


def catalog_needs(templates: Iterable[Mapping[str, Any]]) -> dict[tuple[str, bool], Need]:
    """``(instance type, spot)`` -> the templates' default and maximum counts, from the
    ``templates`` answer (``TemplateSpec.public_view``)."""
    needs: dict[tuple[str, bool], Need] = {}
    for t in templates:
        chain = list(t.get("capacity_chain") or [])
        kinds = [False] + ([True] if t.get("spot") and (not chain or "spot" in chain) else [])
        for itype in t.get("instance_types") or []:
            for spot in kinds:
                need = needs.setdefault((itype, spot), Need())
                need.default = max(need.default, int(t.get("default_instance_count") or 1))
                need.maximum = max(need.maximum, int(t.get("max_instance_count") or 1))
                default_kind = bool(t.get("spot")) == spot
                if default_kind and not chain and itype == t.get("default_instance_type"):
                    need.required = True
                need.templates.append(str(t.get("name")))
    return needs


def quota_findings(
    needs: Mapping[tuple[str, bool], Need], quotas: SQ.AccountQuotas
) -> list[Finding]:
    """Each type and kind's quota against the counts: block when a template's default job
    could never start, warn when its maximum could not (or a non-default kind is short)."""
    out = []
    for (itype, spot), need in sorted(needs.items()):
        kind = "spot" if spot else "on-demand"
        subject = f"{itype} {kind}"
        quota = quotas.quota(itype, spot=spot)
        data = {
            "instance_type": itype,
            "spot": spot,
            "default_count": need.default,
            "max_count": need.maximum,
            "templates": sorted(set(need.templates)),
        }
        if quota is None:
            name = SQ.quota_name(itype, spot=spot)
            message = f"the account lists no '{name}' (is the type offered in this region?)"
            out.append(Finding("quota", subject, WARN, message, None, data))
            continue
        data = {**data, "quota_name": quota.name, "quota_code": quota.code, "value": quota.value}
        if quota.value >= need.maximum:
            status = OK
        elif quota.value < need.default and need.required:
            status = BLOCK
        else:
            status = WARN
        message = (
            f"quota '{quota.name}' ({quota.code}) is {quota.value:g}; the templates need "
            f"{need.default} by default, up to {need.maximum}"
        )
        action = None
        if status != OK:
            action = (
                f"{SQ.increase_command(quota, need.maximum)}  (or the Service Quotas console: "
                f"{SQ.CONSOLE_URL})"
            )
        out.append(Finding("quota", subject, status, message, action, data))
    return out


def region_findings(
    region: str, templates: Sequence[Mapping[str, Any]], *, queue: bool | None
) -> list[Finding]:
    """SageMaker, queue mode's AWS Batch and each template's image in ``region``.
    ``queue``: True for a queue-mode deployment, None before deploying (a warning only)."""
    out = []
    if region in regions.SAGEMAKER_REGIONS:
        out.append(Finding("region", "sagemaker", OK, f"SageMaker training is in {region}"))
    else:
        out.append(Finding("region", "sagemaker", BLOCK, f"SageMaker is not listed in {region}"))
    if queue is not False:
        batch = region in regions.BATCH_REGIONS
        message = (
            f"AWS Batch is in {region} (queue mode needs Batch for SageMaker training jobs; "
            "the table lists Batch itself: jobmodel/regions.py)"
            if batch
            else f"AWS Batch is not listed in {region}: queue mode cannot run there"
        )
        status = OK if batch else (BLOCK if queue else WARN)
        out.append(Finding("region", "batch (queue mode)", status, message))
    for t in templates:
        family = regions.image_family(t.get("framework") or {})
        where = regions.IMAGE_REGIONS.get(family)
        name = str(t.get("name"))
        if where is None:
            out.append(Finding("image", name, UNKNOWN, f"no region table for image {family}"))
        elif region in where:
            out.append(Finding("image", name, OK, f"{family} image in {region}"))
        else:
            near = ", ".join(sorted(where)[:4])
            out.append(
                Finding(
                    "image",
                    name,
                    BLOCK,
                    f"no {family} training image in {region}; synth fails for this template",
                    f"deploy in a region with the image (e.g. {near}) or leave the template out",
                )
            )
    return out


def slr_finding(found: bool | None, error: str | None, *, queue: bool | None) -> Finding:
    """Queue mode's service-linked role (``iam:GetRole``): ``found`` None when unreadable."""
    create = (
        f"aws iam create-service-linked-role --aws-service-name {BATCH_SLR_SERVICE}  "
        "(needs iam:CreateServiceLinkedRole; the first queue's deploy creates it if the "
        "deploying principal may)"
    )
    if found is None:
        return Finding("service-linked role", BATCH_SLR, UNKNOWN, f"not readable: {error}")
    if found:
        return Finding("service-linked role", BATCH_SLR, OK, "exists")
    status = BLOCK if queue else WARN
    return Finding("service-linked role", BATCH_SLR, status, "absent (queue mode needs it)", create)


def bootstrap_finding(
    parameter: str, version: str | None, error: str | None, *, account: str | None, region: str
) -> Finding:
    """The CDK bootstrap's version (``ssm:GetParameter`` on ``parameter``, the one the
    synthesized templates' ``CheckBootstrapVersion`` rule reads): ``version`` None and no
    ``error`` when the parameter is absent, ``error`` when it could not be read."""
    command = f"npx cdk bootstrap aws://{account or '<account>'}/{region}"
    data = {"parameter": parameter, "minimum": CDK_MIN_BOOTSTRAP_VERSION}
    if error is not None:
        return Finding("bootstrap", parameter, UNKNOWN, f"not readable: {error}", None, data)
    if version is None:
        message = f"not bootstrapped for the CDK: no {parameter} (cdk deploy would fail)"
        return Finding("bootstrap", parameter, BLOCK, message, command, data)
    data = {**data, "version": version}
    if not version.isdigit():
        message = f"bootstrap version {version!r} is not a number"
        return Finding("bootstrap", parameter, UNKNOWN, message, command, data)
    if int(version) < CDK_MIN_BOOTSTRAP_VERSION:
        message = (
            f"bootstrap version {version} is older than the {CDK_MIN_BOOTSTRAP_VERSION} the "
            "stacks require (their CheckBootstrapVersion rule fails the deploy)"
        )
        return Finding("bootstrap", parameter, BLOCK, message, command, data)
    message = f"bootstrap version {version} (the stacks need {CDK_MIN_BOOTSTRAP_VERSION} or later)"
    return Finding("bootstrap", parameter, OK, message, None, data)


def exit_status(findings: Iterable[Finding]) -> int:
    """4 when a check blocks, 1 when none blocks but one could not be run, else 0."""
    statuses = {f.status for f in findings}
    if BLOCK in statuses:
        return 4
    return 1 if UNKNOWN in statuses else 0
