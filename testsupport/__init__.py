"""Fixtures shared by the tests and the benchmarks: the sandbox's account, fake ARNs, the
image and the trigger's environment as the launcher stack builds it.

Neither product code nor a test: both ``tests/`` and ``bench/`` import from here (the
ledger table's schema for a trigger run against moto included).
"""

from __future__ import annotations

from typing import Any

from image_sets import for_uri
from jobmodel.contract.names import CARE_INDEX, ENV_JOB_TABLE, JOB_INDEX, TEAM_INDEX
from jobmodel.jobs.claims import CARE
from jobmodel.platform import PlatformConfig
from sandbox.deploy import ACCOUNT, REGION

__all__ = [
    "ACCOUNT",
    "IMAGE",
    "IMAGE_ENTRYPOINT",
    "KEY_ARN",
    "REGION",
    "ROLE_ARN",
    "TRIGGER_ENV",
    "create_ledger_table",
]

ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/ftl-training"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
IMAGE = (
    f"763104351884.dkr.ecr.{REGION}.amazonaws.com/huggingface-pytorch-training:"
    "2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04"
)
# That image's ENTRYPOINT (its package set), which synth puts on every template of it.
IMAGE_ENTRYPOINT = for_uri(IMAGE).entrypoint

# The trigger's environment as the launcher stack sets it (PlatformConfig.to_env, plus the
# ledger table), with the values of the sandbox test set-up.
TRIGGER_ENV: dict[str, str] = {
    **PlatformConfig(
        region=REGION,
        role_arn=ROLE_ARN,
        data_bucket="ftl-data",
        checkpoint_bucket="ftl-checkpoints",
        artifact_bucket="ftl-artifacts",
        kms_key_arn=KEY_ARN,
        source_s3_uri="s3://cdk-assets/sourcedir.tar.gz",
        platform_tags={"project": "fine-tuning-platform"},
        platform_name="ftl",
    ).to_env(),
    ENV_JOB_TABLE: "ftl-jobs",
}


def create_ledger_table(dynamodb: Any, name: str) -> None:
    """The ledger's key schema, as ftl_constructs.launcher defines it."""
    dynamodb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": a, "AttributeType": "S"}
            for a in ("pk", "gsi_pk", "gsi_sk", "team", CARE)
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": JOB_INDEX,
                "KeySchema": [
                    {"AttributeName": "gsi_pk", "KeyType": "HASH"},
                    {"AttributeName": "gsi_sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": TEAM_INDEX,
                "KeySchema": [
                    {"AttributeName": "team", "KeyType": "HASH"},
                    {"AttributeName": "gsi_sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": CARE_INDEX,
                "KeySchema": [
                    {"AttributeName": CARE, "KeyType": "HASH"},
                    {"AttributeName": "gsi_sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
        ],
    )
