"""The foundation deployed into moto with the pinned CDK CLI, read back through the AWS APIs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.sandbox


def test_buckets_exist_with_kms_encryption_and_public_access_blocked(deployed):
    s3 = deployed.client("s3")
    key_arn = deployed.output("PlatformKeyArn")
    for output in ("DataBucketName", "CheckpointBucketName", "ArtifactBucketName"):
        name = deployed.output(output)
        rule = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"][
            0
        ]["ApplyServerSideEncryptionByDefault"]
        assert rule["SSEAlgorithm"] == "aws:kms"
        assert rule["KMSMasterKeyID"] == key_arn
        block = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
        assert all(block.values())
        assert s3.get_bucket_logging(Bucket=name)["LoggingEnabled"]["TargetPrefix"]


def test_artifacts_versioned_and_checkpoints_expire(deployed):
    s3 = deployed.client("s3")
    assert (
        s3.get_bucket_versioning(Bucket=deployed.output("ArtifactBucketName"))["Status"]
        == "Enabled"
    )
    rules = s3.get_bucket_lifecycle_configuration(Bucket=deployed.output("CheckpointBucketName"))[
        "Rules"
    ]
    assert rules[0]["Expiration"]["Days"] == 30


def test_key_rotates(deployed):
    kms = deployed.client("kms")
    key_id = deployed.output("PlatformKeyArn").rsplit("/", 1)[1]
    assert kms.get_key_rotation_status(KeyId=key_id)["KeyRotationEnabled"] is True


def test_training_role_is_assumable_by_sagemaker_only(deployed):
    iam = deployed.client("iam")
    name = deployed.output("TrainingRoleArn").rsplit("/", 1)[1]
    role = iam.get_role(RoleName=name)["Role"]
    (stmt,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert stmt["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    policies = iam.list_role_policies(RoleName=name)["PolicyNames"]
    assert policies, "the scoped inline policy is attached"
