"""Per-team doors into the launcher: one trigger alias and one managed policy per team.

The trigger decides the caller's team from the alias it was invoked through
(``context.invoked_function_arn``), never from the event, so IAM decides who is which team:
whoever may invoke ``team-<name>`` acts as team ``<name>``. The platform team attaches a
team's managed policy to that team's roles; it grants ``lambda:InvokeFunction`` on the team's
alias, ``execute-api:Invoke`` on the HTTP API's routes (on that door the team comes from the
caller's IAM ARN), ``cloudformation:DescribeStacks`` on the launcher stack and the two log
reads of ``ftl logs``, subscribing to the team's notifications topic (``grant_topics``), and
denies invoking the ``http``, ``chain`` and ``sweep`` aliases.
Admins get the ``admin`` alias and policy the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from ftl_constructs.nag import acknowledge, acknowledge_resource
from jobmodel.contract.names import (
    ADMIN_ALIAS,
    BATCH_SLR,
    BATCH_SLR_SERVICE,
    CDK_DEFAULT_QUALIFIER,
    CDK_QUALIFIER_CONTEXT,
    TRAINING_LOG_GROUP,
    cdk_bootstrap_parameter,
    team_alias_name,
)
from jobmodel.contract.routes import Route
from jobmodel.teams import TeamsConfig

__all__ = ["ADMIN_ALIAS", "TeamAccess", "output_id", "team_alias_name"]


def output_id(team: str) -> str:
    """``team-a`` -> ``Teama``: the ``<Id>`` in ``Team<Id>InvokeArn`` (docs/API.md)."""
    flat = team.replace("-", "")
    return flat[:1].upper() + flat[1:]


class TeamAccess(Construct):
    """Aliases ``team-<name>`` (and ``admin``) of the trigger's published version, with one
    customer-managed policy each.

    Attributes:
        aliases: team name -> its alias.
        policies: team name -> its managed policy.
        admin_alias: the ``admin`` alias (None without admins).
        admin_policy: the admins' managed policy (None without admins).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        version: lambda_.IVersion,
        api: apigw.IHttpApi,
        routes: Sequence[Route],
        teams: TeamsConfig,
        http_alias: lambda_.IAlias,
        chain_alias: lambda_.IAlias | None = None,
        sweep_alias: lambda_.IAlias | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        # The service doors: the HTTP API's (it believes the identity an API Gateway event
        # names), with capacity chains the job-events function's, and the sweep's schedule's.
        self._service_door_arns = [
            a.function_arn for a in (http_alias, chain_alias, sweep_alias) if a is not None
        ]
        # What the client needs beyond the doors (README, "The rights the client needs"):
        # finding the launcher from its stack's outputs, and `ftl logs`.
        self._launcher_stack_arn = stack.format_arn(
            service="cloudformation", resource="stack", resource_name=f"{stack.stack_name}/*"
        )
        self._training_logs_arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{TRAINING_LOG_GROUP}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        # "/jobs/{job_name}" -> "/jobs/*": one ARN per route of the API.
        self.route_arns = [api.arn_for_execute_api(r.method, r.glob, "*") for r in routes]
        self.aliases: dict[str, lambda_.Alias] = {}
        self.policies: dict[str, iam.ManagedPolicy] = {}
        for team in teams.teams:
            alias, policy = self._door(version, team_alias_name(team.name), f"team {team.name}")
            self.aliases[team.name] = alias
            self.policies[team.name] = policy
        self.admin_alias: lambda_.Alias | None = None
        self.admin_policy: iam.ManagedPolicy | None = None
        if teams.admins:
            self.admin_alias, self.admin_policy = self._door(version, ADMIN_ALIAS, "the admins")
            self._preflight(self.admin_policy, stack)

    def _door(
        self, version: lambda_.IVersion, alias_name: str, who: str
    ) -> tuple[lambda_.Alias, iam.ManagedPolicy]:
        alias = lambda_.Alias(
            self,
            f"Alias-{alias_name}",
            alias_name=alias_name,
            version=version,
            description=f"Fine-tuning launcher, direct door for {who}",
        )
        policy = iam.ManagedPolicy(
            self,
            f"Policy-{alias_name}",
            description=f"Fine-tuning launcher access for {who}: invoke alias {alias_name} "
            "and call the HTTP API",
            statements=[
                iam.PolicyStatement(
                    sid="InvokeOwnAlias",
                    actions=["lambda:InvokeFunction"],
                    resources=[alias.function_arn],
                ),
                iam.PolicyStatement(
                    sid="CallJobApi", actions=["execute-api:Invoke"], resources=self.route_arns
                ),
                iam.PolicyStatement(
                    sid="FindLauncher",
                    actions=["cloudformation:DescribeStacks"],
                    resources=[self._launcher_stack_arn],
                ),
                iam.PolicyStatement(
                    sid="ReadTrainingLogs",
                    actions=["logs:DescribeLogStreams", "logs:FilterLogEvents"],
                    resources=[self._training_logs_arn],
                ),
                # The `http` alias believes the caller identity an API Gateway event names; only
                # the API may invoke it, only the job-events function the `chain` alias, and only
                # the sweep's schedule the `sweep` alias.
                # No policy the platform hands out lets anyone else.
                iam.PolicyStatement(
                    sid="DenyServiceDoorInvoke",
                    effect=iam.Effect.DENY,
                    actions=["lambda:InvokeFunction"],
                    resources=self._service_door_arns,
                ),
            ],
        )
        acknowledge_resource(
            policy,
            self._launcher_stack_arn,
            "A stack's ARN ends in an id CloudFormation generates; the name is fixed.",
        )
        acknowledge_resource(
            policy,
            self._training_logs_arn,
            "`ftl logs` reads the one training log group (SageMaker's fixed name); the README "
            "says these rights read other jobs' logs too.",
        )
        for arn in self.route_arns:
            acknowledge_resource(
                policy,
                arn,
                "One ARN per route of the launcher's HTTP API: '*' stands for the one stage "
                "and for a path parameter (the job name), which callers choose per request.",
            )
        return alias, policy

    def grant_topics(self, topics: Mapping[str, sns.ITopic]) -> None:
        """Each team subscribes its own endpoints to its own notifications topic (and lists
        its subscriptions); the admins to every team's. The topics' policies deny everyone
        else (``TeamTopics``)."""
        for name, policy in self.policies.items():
            if name in topics:
                policy.add_statements(_subscribe("SubscribeOwnTopic", [topics[name]]))
        if self.admin_policy is not None and topics:
            self.admin_policy.add_statements(_subscribe("SubscribeTeamTopics", topics.values()))

    def _preflight(self, policy: iam.ManagedPolicy, stack: Stack) -> None:
        """``ftl doctor``'s reads for the admins: the foundation stack's outputs (versions),
        the account's SageMaker quotas (no resource type or condition key in the SAR: "*")
        queue mode's service-linked role and the CDK bootstrap's version parameter."""
        foundation = stack.format_arn(
            service="cloudformation",
            resource="stack",
            resource_name=f"{stack.stack_name.removesuffix('-launcher')}-foundation/*",
        )
        role = stack.format_arn(
            service="iam",
            region="",
            resource="role",
            resource_name=f"aws-service-role/{BATCH_SLR_SERVICE}/{BATCH_SLR}",
        )
        qualifier = stack.node.try_get_context(CDK_QUALIFIER_CONTEXT) or CDK_DEFAULT_QUALIFIER
        bootstrap = stack.format_arn(
            service="ssm",
            resource="parameter",
            resource_name=cdk_bootstrap_parameter(qualifier).lstrip("/"),
        )
        policy.add_statements(
            iam.PolicyStatement(
                sid="PreflightBootstrap", actions=["ssm:GetParameter"], resources=[bootstrap]
            ),
            iam.PolicyStatement(
                sid="PreflightReads",
                actions=["cloudformation:DescribeStacks"],
                resources=[foundation],
            ),
            iam.PolicyStatement(
                sid="PreflightQuotas", actions=["servicequotas:ListServiceQuotas"], resources=["*"]
            ),
            iam.PolicyStatement(sid="PreflightRole", actions=["iam:GetRole"], resources=[role]),
        )
        acknowledge_resource(
            policy, foundation, "A stack's ARN ends in an id CloudFormation generates."
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            "servicequotas:ListServiceQuotas supports no resource-level permissions and no "
            "condition keys; ftl doctor reads the quota values only.",
        )


def _subscribe(sid: str, topics: Iterable[sns.ITopic]) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid,
        actions=["sns:Subscribe", "sns:ListSubscriptionsByTopic"],
        resources=[t.topic_arn for t in topics],
    )
