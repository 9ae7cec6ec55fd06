"""``ftl doctor``: a read-only preflight, before deploying and against a deployed platform.

It reads, with the caller's credentials: the launcher stack's outputs and the foundation
stack's (``cloudformation:DescribeStacks``; absent: the before-deploy report), the account's
SageMaker quotas (``servicequotas:ListServiceQuotas``), queue mode's service-linked role
(``iam:GetRole``), the CDK bootstrap's version (``ssm:GetParameter``; the account for the
bootstrap command from ``sts:GetCallerIdentity``, which needs no permission) and, against a
deployment, the ``templates`` action and one dry run per template (prices; the launcher writes
nothing for a dry run). It changes nothing. The checks
themselves are ``ftl_client.doctor_checks``; docs/CLIENT.md lists them and the exit codes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ftl_client import doctor_checks as D
from ftl_client.client import LauncherClient, LauncherError
from ftl_client.errors import aws_code, aws_error, aws_message
from jobmodel.capacity import service_quotas as SQ
from jobmodel.contract.names import (
    CDK_DEFAULT_QUALIFIER,
    CDK_QUALIFIER_CONTEXT,
    PLATFORM_VERSION,
    VERSION_OUTPUT,
    cdk_bootstrap_parameter,
)
from jobmodel.templates.catalog import shipped_catalog


@dataclass
class Report:
    region: str
    deployed: bool
    findings: list[D.Finding] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        return D.exit_status(self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "deployed": self.deployed,
            "client_version": PLATFORM_VERSION,
            "exit_status": self.exit_status,
            "findings": [f.to_dict() for f in self.findings],
        }


def run(client: LauncherClient) -> Report:
    outputs = _launcher_outputs(client)
    deployed = outputs is not None
    report = Report(client.region or "", deployed)
    if deployed:
        templates = client.templates()
        queue = "JobQueueArn" in (outputs or {})
        report.findings += _versions(client, outputs or {})
        report.findings += D.region_findings(report.region, [], queue=queue)
        report.findings.append(
            D.Finding("image", "all templates", D.OK, "resolved for this region at synth")
        )
    else:
        specs = shipped_catalog().values()
        templates = [{**s.public_view(), "framework": dict(s.framework)} for s in specs]
        queue = None
        report.findings.append(
            D.Finding(
                "deployment",
                client.stack_name,
                D.OK,
                f"not deployed in {report.region}: checking the shipped catalog before deploy",
            )
        )
        report.findings += D.region_findings(report.region, templates, queue=None)
    report.findings += _quotas(client, templates)
    report.findings.append(_slr(client, queue))
    report.findings.append(_bootstrap(client, report.region))
    report.findings += _prices(client, templates) if deployed else [_prices_before_deploy()]
    return report


def _launcher_outputs(client: LauncherClient) -> dict[str, str] | None:
    """The launcher stack's outputs, read by the client itself (so its own calls reuse them),
    or None when the stack does not exist (the client's ``ConfigError``)."""
    try:
        return client.stack_outputs()
    except LauncherError as err:
        if err.type == "ConfigError":
            return None
        raise


def _outputs(client: LauncherClient, stack: str) -> dict[str, str] | None:
    """Another stack's outputs (the foundation's), or None when it does not exist."""
    try:
        stacks = client._client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        if "does not exist" in aws_message(exc):
            return None
        raise aws_error(exc, "cloudformation:DescribeStacks") from None
    return {o["OutputKey"]: o["OutputValue"] for o in (stacks[0].get("Outputs") or [])}


def _versions(client: LauncherClient, launcher: Mapping[str, str]) -> list[D.Finding]:
    out = []
    foundation_name = client.stack_name.removesuffix("-launcher") + "-foundation"
    foundation = _outputs(client, foundation_name) or {}
    for name, outputs in ((client.stack_name, launcher), (foundation_name, foundation)):
        version = outputs.get(VERSION_OUTPUT)
        if version is None:
            message = f"no {VERSION_OUTPUT} output (deployed before versions were written)"
            out.append(D.Finding("version", name, D.WARN, message, "deploy this version"))
        elif version != PLATFORM_VERSION:
            message = f"deployed {version}; this client is {PLATFORM_VERSION}"
            out.append(D.Finding("version", name, D.WARN, message, "cdk deploy --all"))
        else:
            out.append(D.Finding("version", name, D.OK, f"{version}, as this client"))
    return out


def _quotas(client: LauncherClient, templates: Sequence[Mapping[str, Any]]) -> list[D.Finding]:
    sq = client._client("service-quotas")
    try:
        entries = SQ.read_all(sq.list_service_quotas)
    except (ClientError, BotoCoreError, ValueError) as exc:
        message = f"servicequotas:ListServiceQuotas failed ({aws_code(exc) or exc})"
        return [D.Finding("quota", "sagemaker", D.UNKNOWN, message)]
    quotas = SQ.AccountQuotas.from_entries(entries)
    return D.quota_findings(D.catalog_needs(templates), quotas)


def _slr(client: LauncherClient, queue: bool | None) -> D.Finding:
    try:
        client._client("iam").get_role(RoleName=D.BATCH_SLR)
    except ClientError as exc:
        if aws_code(exc) == "NoSuchEntity":
            return D.slr_finding(False, None, queue=queue)
        return D.slr_finding(None, f"iam:GetRole: {aws_code(exc)}", queue=queue)
    except BotoCoreError as exc:
        return D.slr_finding(None, f"iam:GetRole: {exc}", queue=queue)
    return D.slr_finding(True, None, queue=queue)


def qualifier(cdk_json: Path = Path("cdk.json")) -> str:
    """The bootstrap qualifier the app synthesizes with: ``cdk.json``'s context (in the
    directory doctor runs in, as ``cdk deploy`` reads it), else the CDK's default."""
    try:
        context = json.loads(cdk_json.read_text()).get("context") or {}
    except (OSError, ValueError, AttributeError):
        return CDK_DEFAULT_QUALIFIER
    return str(context.get(CDK_QUALIFIER_CONTEXT) or CDK_DEFAULT_QUALIFIER)


def _bootstrap(client: LauncherClient, region: str) -> D.Finding:
    parameter = cdk_bootstrap_parameter(qualifier())
    try:
        account: str | None = client._client("sts").get_caller_identity()["Account"]
    except (ClientError, BotoCoreError):
        account = None  # the command then names <account>
    version = error = None
    try:
        version = client._client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as exc:
        if aws_code(exc) != "ParameterNotFound":
            error = f"ssm:GetParameter: {aws_code(exc)}"
    except BotoCoreError as exc:
        error = f"ssm:GetParameter: {exc}"
    return D.bootstrap_finding(parameter, version, error, account=account, region=region)


def _prices(client: LauncherClient, templates: Sequence[Mapping[str, Any]]) -> list[D.Finding]:
    """A dry run of each template's default job: its price, or why it is unknown."""
    out = []
    for t in templates:
        name, itype = str(t.get("name")), str(t.get("default_instance_type"))
        try:
            dry = client.submit(name, dry_run=True)
        except LauncherError as err:
            message = f"not checked, the dry run was refused: {err.line()}"
            out.append(D.Finding("price", f"{name} {itype}", D.WARN, message))
            continue
        check = next((c for c in dry.get("checks", []) if c.get("check") == "price"), {})
        price = check.get("price_usd_per_hour")
        if price is None:
            reason = check.get("reason") or "no price"
            out.append(
                D.Finding(
                    "price",
                    f"{name} {itype}",
                    D.WARN,
                    f"unknown: {reason}",
                    "wait for the daily Price List refresh, or set ftl:prices",
                )
            )
        else:
            out.append(D.Finding("price", f"{name} {itype}", D.OK, f"{price:g} USD/hour"))
    return out


def _prices_before_deploy() -> D.Finding:
    return D.Finding(
        "price",
        "all templates",
        D.OK,
        "loaded from the AWS Price List at deploy and daily (ftl:prices overrides)",
    )


def render(report: Report) -> str:
    """The report for a terminal: one line per finding, then what to request where."""
    where = "deployed platform" if report.deployed else "before deploy"
    lines = [f"ftl doctor: {report.region} ({where}); client {PLATFORM_VERSION}"]
    marks = {D.OK: "ok", D.WARN: "WARN", D.BLOCK: "BLOCK", D.UNKNOWN: "??"}
    for f in report.findings:
        lines.append(f"  [{marks[f.status]:5}] {f.check}: {f.subject}: {f.message}")
    todo = [f for f in report.findings if f.action and f.status != D.OK]
    if todo:
        lines.append("to do:")
        lines += [f"  {f.subject}: {f.action}" for f in todo]
    verdict = {4: "something blocks", 1: "some checks could not run", 0: "nothing blocks"}
    lines.append(verdict[report.exit_status])
    return "\n".join(lines)
