"""Experiment tracking on SageMaker managed MLflow (``ftl:mlflow``, issue 27): the tracking
servers the platform creates, and each training role's right to log to its team's server.

IAM authorizes the MLflow calls on the server as a whole (``sagemaker-mlflow:*`` on the
``mlflow-tracking-server`` resource, ``sagemaker:CallMlflowAppApi`` on an ``mlflow-app``):
it cannot separate experiments inside one server. Teams that must not see each other's runs
get a server each (``perTeam``, or ``teamTrackingServerArns``); docs/TRACKING.md says what a
shared server shows.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from ftl_constructs.nag import acknowledge_resource
from ftl_constructs.training_role import SAGEMAKER_SERVICE, TrainingRole
from jobmodel.after_training.tracking import SHARED, TrackingConfig, is_app, is_uri

# What the entrypoint's MLflow client calls (training/ftl_train/tracking.py): find or create
# the experiment, find, create, continue and end the run, log params, metrics and tags (all
# three through LogBatch). tests/authz records each call and checks it is allowed.
TRAINING_ACTIONS = (
    "sagemaker-mlflow:GetExperimentByName",
    "sagemaker-mlflow:CreateExperiment",
    "sagemaker-mlflow:SearchRuns",
    "sagemaker-mlflow:CreateRun",
    "sagemaker-mlflow:GetRun",
    "sagemaker-mlflow:UpdateRun",
    "sagemaker-mlflow:LogBatch",
    "sagemaker-mlflow:SetTag",
)
APP_ACTIONS = ("sagemaker:CallMlflowAppApi",)


def server_name(platform_name: str, team: str | None = None) -> str:
    """A created tracking server's name: ``<platform>-mlflow`` or ``<platform>-<team>-mlflow``."""
    return f"{platform_name}-{team}-mlflow" if team else f"{platform_name}-mlflow"


def tracking_config(
    scope: Construct, settings: TrackingConfig, platform_name: str, teams: list[str]
) -> TrackingConfig:
    """``settings`` with the ARNs of the servers the stacks create, formatted in ``scope``'s
    stack from their fixed names (so no stack imports another's value)."""
    if not settings.create:
        return settings
    stack = Stack.of(scope)

    def arn(team: str | None) -> str:
        return stack.format_arn(
            service="sagemaker",
            resource="mlflow-tracking-server",
            resource_name=server_name(platform_name, team),
        )

    if settings.per_team:
        return settings.with_servers({team: arn(team) for team in teams})
    return settings.with_servers({SHARED: arn(None)})


def training_statement(arn: str) -> iam.PolicyStatement:
    """The training role's MLflow rights on one server or app, and nothing else."""
    return iam.PolicyStatement(
        sid="TrackExperiments",
        actions=list(APP_ACTIONS if is_app(arn) else TRAINING_ACTIONS),
        resources=[arn],
    )


class MlflowTracking(Construct):
    """The platform's MLflow servers and the training roles' rights on them.

    With ``create`` the stack creates one ``AWS::SageMaker::MlflowTrackingServer`` (or one
    per team with ``perTeam``), each with its own role and its artifact store under
    ``mlflow/`` (a team's: ``<team>/mlflow/``) of the KMS-encrypted artifact bucket.
    ``roles`` (team name, or None for the single-team role -> role) each get
    :func:`training_statement` on their server.

    Attributes:
        config: the settings with every server's ARN (what the launcher passes on).
        servers: the created servers (team name or ``""`` -> the resource).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: TrackingConfig,
        platform_name: str,
        roles: Mapping[str | None, TrainingRole],
        artifact_bucket: s3.IBucket,
        encryption_key: kms.IKey,
    ) -> None:
        super().__init__(scope, id)
        teams = [t for t in roles if t is not None]
        self.config = tracking_config(self, settings, platform_name, teams)
        self.servers: dict[str, sagemaker.CfnMlflowTrackingServer] = {}
        if settings.create:
            for team in teams if settings.per_team else [None]:
                self.servers[team or SHARED] = self._server(
                    platform_name, team, settings.server_size, artifact_bucket, encryption_key
                )
        for team, role in roles.items():
            arn = self.config.server_for(team)
            if arn is not None and not is_uri(arn):  # trackingUri: a plain server, no IAM
                role.policy.add_statements(training_statement(arn))
                server = self.servers.get(team or SHARED) or self.servers.get(SHARED)
                if server is not None:
                    role.policy.node.add_dependency(server)

    def _server(
        self,
        platform_name: str,
        team: str | None,
        size: str,
        bucket: s3.IBucket,
        key: kms.IKey,
    ) -> sagemaker.CfnMlflowTrackingServer:
        """A tracking server whose role reads and writes only its artifact store."""
        prefix = f"{team}/mlflow/" if team else "mlflow/"
        suffix = f"-{team}" if team else ""
        stack = Stack.of(self)
        role = iam.Role(
            self,
            f"ServerRole{suffix}",
            description="SageMaker MLflow tracking server of the fine-tuning platform",
            assumed_by=iam.ServicePrincipal(
                SAGEMAKER_SERVICE, conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
        )
        policy = iam.Policy(
            self,
            f"ServerPolicy{suffix}",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    sid="ArtifactStore",
                    actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                    resources=[bucket.arn_for_objects(f"{prefix}*")],
                ),
                iam.PolicyStatement(
                    sid="ListArtifactStore",
                    actions=["s3:ListBucket"],
                    resources=[bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
                ),
                iam.PolicyStatement(
                    sid="LocateArtifactStore",
                    actions=["s3:GetBucketLocation"],
                    resources=[bucket.bucket_arn],
                ),
                iam.PolicyStatement(
                    sid="ArtifactKey",
                    actions=["kms:Decrypt", "kms:GenerateDataKey"],
                    resources=[key.key_arn],
                    conditions={
                        "StringEquals": {"kms:ViaService": f"s3.{stack.region}.amazonaws.com"}
                    },
                ),
            ],
        )
        acknowledge_resource(
            policy,
            bucket.arn_for_objects(f"{prefix}*"),
            "The tracking server keeps its artifacts under its own prefix of the artifact "
            "bucket; MLflow names the objects per run.",
        )
        server = sagemaker.CfnMlflowTrackingServer(
            self,
            f"Server{suffix}",
            tracking_server_name=server_name(platform_name, team),
            artifact_store_uri=f"s3://{bucket.bucket_name}/{prefix}",
            role_arn=role.role_arn,
            tracking_server_size=size,
            automatic_model_registration=False,
        )
        server.node.add_dependency(policy)
        return server
