"""Keeps the platform's SageMaker training prices current from the AWS Price List API."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from ftl_constructs.bundling import LEDGER_PACKAGE, ROOT
from ftl_constructs.nag import acknowledge, checkov_skip
from ftl_constructs.platform_function import PlatformFunction
from jobmodel.money.price_list import price_item_key

# The CloudFormation event after each deploy of a stack (EventBridge, default bus).
STACK_EVENT_SOURCE = "aws.cloudformation"
STACK_EVENT_DETAIL_TYPE = "CloudFormation Stack Status Change"
DEPLOYED_STATUSES = ("CREATE_COMPLETE", "UPDATE_COMPLETE")


class PriceRefresh(Construct):
    """A function that loads the region's training prices from ``pricing:GetProducts`` into
    the job ledger (item ``prices#<region>``, with the time and the source), run once a day
    (``every``) and after each deploy of this stack.

    Attributes:
        function: the price-refresh function.
        schedule_rule, deploy_rule: the EventBridge rules that run it.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        encryption_key: kms.IKey,
        log_retention: logs.RetentionDays,
        every: Duration = Duration.days(1),
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.handler = PlatformFunction(
            self,
            "Handler",
            description="Fine-tuning platform: training prices from the AWS Price List API",
            code_dir=ROOT / "lambda" / "prices",
            packages=[ROOT / "jobmodel", LEDGER_PACKAGE],
            encryption_key=encryption_key,
            log_retention=log_retention,
            environment={"FTL_JOB_TABLE": table.table_name},
            timeout=Duration.minutes(2),
        )
        self.function = self.handler.function
        checkov_skip(
            self.function,
            "CKV_AWS_116",
            "A failed refresh has nothing to replay: the last prices stay in the ledger and the "
            "next run (daily, or the next deploy) reads the Price List again; EventBridge "
            "retries each event twice.",
        )
        self.handler.policy.add_statements(
            # The Price List API has no resource types: only "*" grants GetProducts.
            iam.PolicyStatement(
                sid="ReadPriceList", actions=["pricing:GetProducts"], resources=["*"]
            ),
            iam.PolicyStatement(
                sid="WritePricesItem",
                actions=["dynamodb:PutItem"],
                resources=[table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {
                        "dynamodb:LeadingKeys": [price_item_key(stack.region)]
                    },
                    "Null": {"dynamodb:LeadingKeys": "false"},
                },
            ),
        )
        acknowledge(
            self.handler.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "pricing:GetProducts supports no resource-level permissions; the function reads "
            "public prices only.",
        )
        self.schedule_rule = events.Rule(
            self,
            "Schedule",
            description="Refresh the training prices from the AWS Price List API",
            schedule=events.Schedule.rate(every),
        )
        self.deploy_rule = events.Rule(
            self,
            "AfterDeploy",
            description="Refresh the training prices after each deploy of the launcher stack",
            event_pattern=events.EventPattern(
                source=[STACK_EVENT_SOURCE],
                detail_type=[STACK_EVENT_DETAIL_TYPE],
                detail={
                    "stack-id": [stack.stack_id],
                    "status-details": {"status": list(DEPLOYED_STATUSES)},
                },
            ),
        )
        for rule in (self.schedule_rule, self.deploy_rule):
            rule.add_target(targets.LambdaFunction(self.function, retry_attempts=2))
