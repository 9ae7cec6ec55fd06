"""An S3 bucket with the platform's security baseline applied."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ftl_constructs.nag import checkov_skip


class SecureBucket(Construct):
    """Public access blocked, TLS only, KMS encrypted, access-logged and retained on delete.

    The bucket policy also refuses any upload that asks for other encryption than the platform
    key: SSE-S3 or DSSE, another KMS key, ``aws:kms`` without a key (S3 would pick the AWS managed
    ``aws/s3`` key), or a customer-provided key. An upload that sends no encryption header gets
    the bucket default, the platform key, so plain uploads, SageMaker (which sends the platform
    key's ARN from ``OutputDataConfig.KmsKeyId``) and the launcher's own writes all pass.

    Attributes:
        bucket: the bucket.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        encryption_key: kms.IKey,
        access_logs: s3.IBucket,
        access_log_prefix: str,
        versioned: bool = False,
        lifecycle_rules: Sequence[s3.LifecycleRule] = (),
    ) -> None:
        super().__init__(scope, id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=encryption_key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=versioned,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix=access_log_prefix,
            lifecycle_rules=list(lifecycle_rules) or None,
            removal_policy=RemovalPolicy.RETAIN,
        )
        for statement in platform_key_upload_rules(self.bucket, encryption_key):
            self.bucket.add_to_resource_policy(statement)


_SSE = "s3:x-amz-server-side-encryption"
_SSE_KEY = "s3:x-amz-server-side-encryption-aws-kms-key-id"
_SSE_C = "s3:x-amz-server-side-encryption-customer-algorithm"


def platform_key_upload_rules(bucket: s3.IBucket, key: kms.IKey) -> list[iam.PolicyStatement]:
    """Deny statements (one per way to get it wrong; conditions in one statement are ANDed)."""

    def deny(sid: str, conditions: dict) -> iam.PolicyStatement:
        return iam.PolicyStatement(
            sid=sid,
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject"],
            resources=[bucket.arn_for_objects("*")],
            conditions=conditions,
        )

    # A header the request does not send must not trigger a deny: each rule on a header's
    # value is guarded by Null = false (the header is present). ``StringNotEqualsIfExists``
    # would be true for an absent header and deny every plain upload, UploadPart, and
    # SageMaker's checkpoint and multipart writes.
    return [
        deny(
            "DenyUploadsNotSseKms",
            {"StringNotEquals": {_SSE: "aws:kms"}, "Null": {_SSE: "false"}},
        ),
        deny(
            "DenyUploadsUnderOtherKeys",
            {"StringNotEquals": {_SSE_KEY: [key.key_arn, key.key_id]}, "Null": {_SSE_KEY: "false"}},
        ),
        deny(
            "DenyUploadsUnderTheAwsManagedKey",
            {"StringEquals": {_SSE: "aws:kms"}, "Null": {_SSE_KEY: "true"}},
        ),
        deny("DenyUploadsWithCustomerKeys", {"Null": {_SSE_C: "false"}}),
    ]


class AccessLogBucket(Construct):
    """The bucket that receives the other buckets' server access logs.

    S3 delivers server access logs only to a bucket encrypted with SSE-S3 (a customer-managed
    KMS key on the target bucket makes delivery fail), so this one bucket uses S3-managed
    encryption; everything else about it matches :class:`SecureBucket`.

    Attributes:
        bucket: the bucket.
    """

    def __init__(self, scope: Construct, id: str, *, retention_days: int) -> None:
        super().__init__(scope, id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=False,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        checkov_skip(
            self.bucket,
            "CKV_AWS_18",
            "This is the server access log target; logging it to itself would loop.",
        )
        checkov_skip(
            self.bucket,
            "CKV_AWS_21",
            "Access logs are written once and expire by lifecycle rule; versions would "
            "only keep deleted logs.",
        )


def checkpoint_lifecycle(expiry_days: int) -> list[s3.LifecycleRule]:
    """Checkpoints are scratch state for resuming: expire them and clean up failed uploads."""
    return [
        s3.LifecycleRule(
            id="expire-checkpoints",
            expiration=Duration.days(expiry_days),
            abort_incomplete_multipart_upload_after=Duration.days(1),
        )
    ]


def noncurrent_version_lifecycle(days: int = 30) -> list[s3.LifecycleRule]:
    """Versioned data survives an accidental overwrite for ``days``, then old versions go."""
    return [
        s3.LifecycleRule(
            id="expire-noncurrent-versions",
            noncurrent_version_expiration=Duration.days(days),
            abort_incomplete_multipart_upload_after=Duration.days(1),
        )
    ]
