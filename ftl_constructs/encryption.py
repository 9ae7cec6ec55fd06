"""The platform's customer-managed KMS key."""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class PlatformKey(Construct):
    """A rotating customer-managed key for buckets, logs, topics, tables and training volumes.

    Attributes:
        key: the KMS key.
    """

    def __init__(self, scope: Construct, id: str, *, alias: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.key = kms.Key(
            self,
            "Key",
            alias=alias,
            description="Fine-tuning platform: data, checkpoints, models, logs, training volumes",
            enable_key_rotation=True,
            pending_window=Duration.days(30),
            removal_policy=RemovalPolicy.RETAIN,
        )
        # CloudWatch Logs encrypts the platform's log groups (API access logs, VPC flow logs,
        # Lambda logs) with this key, but only for log groups of this account and region.
        # No kms:Describe*: DescribeKey carries no encryption context, so under this condition
        # it was never allowed (the policy lint flags a key that does not apply to an action).
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsForThisAccount",
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )
