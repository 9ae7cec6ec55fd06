"""The job ledger's DynamoDB table (the launcher's; both functions write it)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from jobmodel.contract.names import CARE_INDEX, JOB_INDEX, TEAM_INDEX
from jobmodel.jobs.claims import CARE


def ledger_table(scope: Construct, key: kms.IKey) -> dynamodb.Table:
    """The job ledger: KMS-encrypted, point-in-time recovery, retained, three indexes."""
    table = dynamodb.Table(
        scope,
        "JobLedger",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        removal_policy=RemovalPolicy.RETAIN,
    )
    table.add_global_secondary_index(
        index_name=JOB_INDEX,
        partition_key=dynamodb.Attribute(name="gsi_pk", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="gsi_sk", type=dynamodb.AttributeType.STRING),
    )
    # One team's jobs newest first (teams deployments; sparse: only jobs with a team).
    table.add_global_secondary_index(
        index_name=TEAM_INDEX,
        partition_key=dynamodb.Attribute(name="team", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="gsi_sk", type=dynamodb.AttributeType.STRING),
    )
    # The jobs the sweep looks after, oldest first (sparse: only jobs still claimed or owing
    # end effects carry the key, ``jobmodel.jobs.claims.needs_care``).
    table.add_global_secondary_index(
        index_name=CARE_INDEX,
        partition_key=dynamodb.Attribute(name=CARE, type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="gsi_sk", type=dynamodb.AttributeType.STRING),
    )
    return table
