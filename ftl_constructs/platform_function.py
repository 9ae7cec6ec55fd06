"""A platform Lambda function with the platform's baseline applied."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aws_cdk import AssetHashType, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ftl_constructs.botocore_models import Operations
from ftl_constructs.bundling import lambda_bundle
from ftl_constructs.lambda_settings import LAMBDA_RUNTIMES, LambdaSettings
from ftl_constructs.nag import acknowledge, checkov_skip

# Lambda sets the root logger to this level (AWS_LAMBDA_LOG_LEVEL); the handlers' loggers set
# no level of their own, so this one setting governs what they write.
APPLICATION_LOG_LEVEL = lambda_.ApplicationLogLevel.INFO


def lambda_runtime(settings: LambdaSettings) -> lambda_.Runtime:
    """The CDK's runtime constant for a validated runtime name (``python3.11`` -> PYTHON_3_11)."""
    major, minor = settings.python_version
    return getattr(lambda_.Runtime, f"PYTHON_{major}_{minor}")


def key_use_statement(key: kms.IKey) -> iam.PolicyStatement:
    """Encrypt and decrypt with the platform key (ledger items, messages, env), nothing more."""
    return iam.PolicyStatement(
        sid="UsePlatformKey",
        actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
        resources=[key.key_arn],
    )


class PlatformFunction(Construct):
    """Python on arm64, bundled without Docker, with a role of its own (no managed policies)
    that may write only its own KMS-encrypted log group and use the platform key, and an
    environment encrypted with that key.

    Attributes:
        function: the Lambda function.
        role: its execution role.
        policy: the role's policy; callers add the function's own statements to it.
        log_group: its log group.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        description: str,
        code_dir: Path,
        encryption_key: kms.IKey,
        log_retention: logs.RetentionDays,
        environment: Mapping[str, str],
        packages: Iterable[Path] = (),
        files: Mapping[str, Any] | None = None,
        memory_size: int = 256,
        timeout: Duration = Duration.seconds(30),
        dead_letter_queue: sqs.IQueue | None = None,
        aws_operations: Operations | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            encryption_key=encryption_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=description,
        )
        self.policy = iam.Policy(self, "Policy", roles=[self.role])
        self.policy.add_statements(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            ),
            key_use_statement(encryption_key),
        )
        settings = LambdaSettings.from_context(self.node.try_get_context)
        bundle = lambda_bundle(
            id.lower(),
            code_dir=code_dir,
            packages=packages,
            files=files,
            aws_operations=aws_operations,
            bytecode=settings.python_version == sys.version_info[:2],
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=lambda_runtime(settings),
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            # The folder is named by its content hash: the CDK need not hash it again.
            code=lambda_.Code.from_asset(
                str(bundle), asset_hash=bundle.name, asset_hash_type=AssetHashType.CUSTOM
            ),
            role=self.role,
            memory_size=memory_size,
            timeout=timeout,
            environment=dict(environment),
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=APPLICATION_LOG_LEVEL,
            system_log_level_v2=lambda_.SystemLogLevel.INFO,
            environment_encryption=encryption_key,
            dead_letter_queue=dead_letter_queue,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if settings.snap_start else None,
        )
        self.function.node.add_dependency(self.policy)
        self._acknowledge(settings)

    def _acknowledge(self, settings: LambdaSettings) -> None:
        if settings.runtime != LAMBDA_RUNTIMES[-1]:
            acknowledge(
                self.function,
                "AwsSolutions-L1",
                f"{settings.runtime} is deliberate: the functions run the Python minor version "
                "the tests and benchmarks run on and their bytecode is compiled for "
                "(context ftl:lambdaRuntime picks another).",
            )
        checkov_skip(
            self.function,
            "CKV_AWS_115",
            "Reserved concurrency would take capacity from the account's pool and can fail "
            "deploys in accounts with low limits; API throttling bounds the load instead.",
        )
        checkov_skip(
            self.function,
            "CKV_AWS_117",
            "The function calls only AWS APIs (SageMaker, DynamoDB, SNS) over TLS with IAM; "
            "it reaches nothing inside the training VPC.",
        )
