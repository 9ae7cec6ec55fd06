"""The model registry: one SageMaker model package group per team and template."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnTag, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ftl_constructs.nag import acknowledge, acknowledge_resource
from jobmodel.after_training.registry import (
    APPROVAL_STATUSES,
    ENV_MODEL_REGISTRY,
    METRICS_KEY,
    PENDING,
    group_name,
)
from jobmodel.evaluation.results import OUTPUT_ARCHIVE
from jobmodel.teams import TeamsConfig

APPROVAL_KEY = "sagemaker:ModelApprovalStatus"


class ModelRegistry(Construct):
    """A model package group per team and template (a single-team deployment: per template),
    named ``jobmodel.after_training.registry.group_name`` (``<platform>-[<team>-]<template>``),
    tagged with
    the platform, team and template. The groups carry no resource policy: nothing outside
    this account is granted, and team members get no SageMaker rights on any group (they read
    their team's versions through the launcher's ``models`` action, which filters by team).

    Attributes:
        groups: ``(team or None, template)`` -> the group.
        group_names: ``(team or None, template)`` -> the group's name.
        prefix: what every group's name starts with (``<platform>-``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        platform_name: str,
        templates: Sequence[str],
        teams: TeamsConfig = TeamsConfig(),
    ) -> None:
        super().__init__(scope, id)
        self.prefix = group_name(platform_name, "x").removesuffix("x")
        team_names: list[str | None] = [t.name for t in teams.teams] or [None]
        self.groups: dict[tuple[str | None, str], sagemaker.CfnModelPackageGroup] = {}
        self.group_names: dict[tuple[str | None, str], str] = {}
        for team in team_names:
            for template in templates:
                name = group_name(platform_name, template, team)
                tags = [CfnTag(key="ftl:platform", value=platform_name)]
                tags.append(CfnTag(key="ftl:template", value=template))
                if team is not None:
                    tags.append(CfnTag(key="ftl:team", value=team))
                self.groups[(team, template)] = sagemaker.CfnModelPackageGroup(
                    self,
                    f"Group-{team or 'all'}-{template}",
                    model_package_group_name=name,
                    model_package_group_description=(
                        f"Fine-tuned models of template {template}"
                        + (f", team {team}" if team else "")
                    ),
                    tags=tags,
                )
                self.group_names[(team, template)] = name

    def _arns(self) -> tuple[str, str]:
        stack = Stack.of(self)
        base = f"arn:{stack.partition}:sagemaker:{stack.region}:{stack.account}"
        return f"{base}:model-package-group/{self.prefix}*", f"{base}:model-package/{self.prefix}*"

    def grant_register(self, function: lambda_.IFunction, policy: iam.Policy) -> None:
        """The ``register`` end effect (both functions that complete end effects): create a
        version in the platform's groups, only as ``PendingManualApproval``; describe one;
        list a group's versions (ListModelPackages supports no resource-level permission)."""
        function.add_environment(ENV_MODEL_REGISTRY, "on")
        groups, packages = self._arns()
        policy.add_statements(
            iam.PolicyStatement(
                sid="RegisterModelVersions",
                actions=["sagemaker:CreateModelPackage"],
                resources=[groups, packages],
                conditions={"StringEquals": {APPROVAL_KEY: PENDING}},
            ),
            iam.PolicyStatement(
                sid="ReadModelVersions",
                actions=["sagemaker:DescribeModelPackage"],
                resources=[packages],
            ),
            iam.PolicyStatement(
                sid="FindModelVersions", actions=["sagemaker:ListModelPackages"], resources=["*"]
            ),
        )
        reason = (
            "The model package groups are named '<platform>-[<team>-]<template>' "
            "(jobmodel.after_training.registry.group_name) and their versions get numbers at run "
            "time; "
            "creation is pinned to PendingManualApproval by condition."
        )
        acknowledge_resource(policy, groups, reason)
        acknowledge_resource(policy, packages, reason)

    def grant_review(self, policy: iam.Policy) -> None:
        """The trigger's ``review`` action (admins only, checked by the trigger): set a
        version of the platform's groups Approved or Rejected, nothing else."""
        _, packages = self._arns()
        policy.add_statements(
            iam.PolicyStatement(
                sid="ReviewModelVersions",
                actions=["sagemaker:UpdateModelPackage"],
                resources=[packages],
                conditions={"StringEquals": {APPROVAL_KEY: list(APPROVAL_STATUSES)}},
            )
        )

    def grant_gate(self, policy: iam.Policy, *, reviews: bool) -> None:
        """An evaluation's results (issue 36, both functions): a version's metadata and
        approval description set without changing its status, or its status set to Approved
        or Rejected (``reviews``: the policy already has that from ``grant_review``); never
        back to PendingManualApproval."""
        _, packages = self._arns()
        statements = [
            iam.PolicyStatement(
                sid="RecordEvaluations",
                actions=["sagemaker:UpdateModelPackage"],
                resources=[packages],
                conditions={"Null": {APPROVAL_KEY: "true"}},
            )
        ]
        if not reviews:
            statements.append(
                iam.PolicyStatement(
                    sid="GateModelVersions",
                    actions=["sagemaker:UpdateModelPackage"],
                    resources=[packages],
                    conditions={"StringEquals": {APPROVAL_KEY: list(APPROVAL_STATUSES)}},
                )
            )
        policy.add_statements(*statements)

    @staticmethod
    def acknowledge_list(policy: iam.Policy) -> None:
        """The ``*`` of ListModelPackages, on a policy that has no other ``*`` grant."""
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ListModelPackages supports no resource-level permissions; the function lists "
            "only the platform's groups by name (a job's version before creating one).",
        )


def evaluation_results_access(policy: iam.Policy, bucket_arn: str) -> None:
    """Read an evaluation job's output data and write an evaluated job's metrics JSON
    (``jobmodel.after_training.registry.model_metrics_uri``), in the artifact bucket only
    (``bucket_arn``: its ARN, as the stack exports it)."""
    outputs = f"{bucket_arn}/*/output/{OUTPUT_ARCHIVE}"
    metrics = f"{bucket_arn}/*/{METRICS_KEY}"
    policy.add_statements(
        iam.PolicyStatement(
            sid="ReadEvaluationOutput", actions=["s3:GetObject"], resources=[outputs]
        ),
        iam.PolicyStatement(sid="WriteModelMetrics", actions=["s3:PutObject"], resources=[metrics]),
    )
    reason = (
        "Job names are chosen at run time: an evaluation job's output archive and an evaluated "
        "job's metrics JSON are found under <[team/]job>/ in the artifact bucket."
    )
    acknowledge_resource(policy, outputs, reason)
    acknowledge_resource(policy, metrics, reason)
