"""A platform Lambda function with the platform's baseline applied."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ftl_constructs.bundling import lambda_bundle
from ftl_constructs.nag import checkov_skip

LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_14


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
        bundle = lambda_bundle(id.lower(), code_dir=code_dir, packages=packages, files=files)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=LAMBDA_RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(bundle)),
            role=self.role,
            memory_size=memory_size,
            timeout=timeout,
            environment=dict(environment),
            log_group=self.log_group,
            environment_encryption=encryption_key,
            dead_letter_queue=dead_letter_queue,
        )
        self.function.node.add_dependency(self.policy)
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
