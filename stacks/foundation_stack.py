"""Encrypted storage, the training role and the training network."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from ftl_constructs.encryption import PlatformKey
from ftl_constructs.mlflow_tracking import MlflowTracking
from ftl_constructs.nag import acknowledge, checkov_skip
from ftl_constructs.secure_bucket import (
    AccessLogBucket,
    SecureBucket,
    checkpoint_lifecycle,
    noncurrent_version_lifecycle,
)
from ftl_constructs.settings import PlatformSettings, retention_days
from ftl_constructs.training_network import TrainingNetwork
from ftl_constructs.training_role import TrainingRole, role_arn_parameter
from jobmodel.contract.names import PLATFORM_VERSION, VERSION_OUTPUT


class FoundationStack(Stack):
    """What every job stands on: key, buckets, training role(s) and (optionally) a VPC.

    Attributes of note: ``training_role`` (single-team) or ``team_roles`` (team name -> role;
    teams mode), and ``training_roles``, whichever of them exist.
    """

    def __init__(
        self, scope: Construct, id: str, *, settings: PlatformSettings, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.settings = settings
        self.key = PlatformKey(self, "PlatformKey", alias=f"alias/{settings.name}-platform").key
        self._add_buckets(settings)
        self.network = None
        if settings.network.enabled:
            self.network = TrainingNetwork(
                self,
                "Network",
                settings=settings.network,
                encryption_key=self.key,
                log_retention=retention_days(settings.log_retention_days),
                job_bucket_arns=[
                    self.data_bucket.bucket_arn,
                    self.checkpoint_bucket.bucket_arn,
                    self.artifact_bucket.bucket_arn,
                    *(f"arn:{self.partition}:s3:::{name}" for name in settings.input_bucket_names),
                ],
            )
        self._add_training_roles(settings)
        self.tracking: MlflowTracking | None = None
        if settings.mlflow.enabled:  # issue 27: the MLflow servers jobs log to
            roles = self.team_roles if settings.teams.enabled else {None: self.training_role}
            self.tracking = MlflowTracking(
                self,
                "Tracking",
                settings=settings.mlflow,
                platform_name=settings.name,
                roles={team: role for team, role in roles.items() if role is not None},
                artifact_bucket=self.artifact_bucket,
                encryption_key=self.key,
            )
        self._add_outputs()

    def _add_buckets(self, settings: PlatformSettings) -> None:
        """The access-log bucket, then the data, checkpoint and artifact buckets logging to it."""
        access_logs = AccessLogBucket(
            self, "AccessLogs", retention_days=settings.log_retention_days
        ).bucket
        acknowledge(
            access_logs,
            "AwsSolutions-S1",
            "This is the server access log bucket; logging it to itself would loop.",
        )

        def bucket(name: str, **extra: Any) -> SecureBucket:
            return SecureBucket(
                self,
                name,
                encryption_key=self.key,
                access_logs=access_logs,
                access_log_prefix=f"{name.lower()}/",
                **extra,
            )

        self.data_bucket = bucket(
            "DataBucket", versioned=True, lifecycle_rules=noncurrent_version_lifecycle()
        ).bucket
        self.checkpoint_bucket = bucket(
            "CheckpointBucket",
            lifecycle_rules=checkpoint_lifecycle(settings.checkpoint_expiry_days),
        ).bucket
        checkov_skip(
            self.checkpoint_bucket,
            "CKV_AWS_21",
            "SageMaker rewrites checkpoints continuously; versions would keep every "
            "old copy. Checkpoints are scratch state and expire by lifecycle rule.",
        )
        self.artifact_bucket = bucket("ArtifactBucket", versioned=True).bucket

    def _add_training_roles(self, settings: PlatformSettings) -> None:
        """Single-team: one role for every job. Teams: one role per team, none shared."""
        role_settings = dict(
            data_bucket=self.data_bucket,
            checkpoint_bucket=self.checkpoint_bucket,
            artifact_bucket=self.artifact_bucket,
            encryption_key=self.key,
            vpc=self.network.vpc if self.network else None,
            subnets=self.network.subnets if self.network else (),
            security_group=self.network.security_group if self.network else None,
        )
        self.training_role: TrainingRole | None = None
        self.team_roles: dict[str, TrainingRole] = {}
        if settings.teams.enabled:
            for team in settings.teams.teams:
                self.team_roles[team.name] = TrainingRole(
                    self,
                    f"TeamTrainingRole-{team.name}",
                    team=team.name,
                    team_buckets=team.buckets,
                    arn_parameter=role_arn_parameter(settings.name, team.name),
                    **role_settings,
                )
        else:
            self.training_role = TrainingRole(
                self,
                "TrainingRole",
                extra_input_buckets=settings.extra_input_buckets,
                arn_parameter=role_arn_parameter(settings.name),
                **role_settings,
            )
        # Deployments made before the launcher read the role ARNs from SSM import them from
        # these exports (named as the automatic ones were); kept so that such a deployment
        # upgrades in one deploy. Nothing imports them after that, so a role and its export
        # may go away together.
        for training_role in self.training_roles:
            self.export_value(training_role.role.role_arn)

    def _add_outputs(self) -> None:
        CfnOutput(self, VERSION_OUTPUT, value=PLATFORM_VERSION)  # ftl doctor reads it
        CfnOutput(self, "DataBucketName", value=self.data_bucket.bucket_name)
        CfnOutput(self, "CheckpointBucketName", value=self.checkpoint_bucket.bucket_name)
        CfnOutput(self, "ArtifactBucketName", value=self.artifact_bucket.bucket_name)
        if self.training_role is not None:
            CfnOutput(self, "TrainingRoleArn", value=self.training_role.role.role_arn)
        CfnOutput(self, "PlatformKeyArn", value=self.key.key_arn)
        if self.network:
            CfnOutput(
                self, "TrainingSecurityGroupId", value=self.network.security_group.security_group_id
            )
            CfnOutput(
                self, "TrainingSubnetIds", value=",".join(s.subnet_id for s in self.network.subnets)
            )

    @property
    def training_roles(self) -> list[TrainingRole]:
        """Every training role jobs may run as (one, or one per team)."""
        return [self.training_role] if self.training_role else list(self.team_roles.values())
