"""Job state changes -> the ledger and an encrypted SNS topic."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ftl_constructs.bundling import ROOT, lambda_bundle
from ftl_constructs.launcher import LAMBDA_RUNTIME, key_use_statement, lambda_checkov_skips
from ftl_constructs.nag import acknowledge, checkov_skip

EVENT_DETAIL_TYPE = "SageMaker Training Job State Change"


class JobEvents(Construct):
    """An EventBridge rule for this platform's jobs (those that run as its training role).

    Attributes:
        topic: the encrypted SNS topic that announces finished jobs.
        function: the handler that updates the ledger and publishes.
        rule: the EventBridge rule.
        dead_letter_queue: events the handler could not take after retries.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        training_role: iam.IRole,
        encryption_key: kms.IKey,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Fine-tuning job events",
            master_key=encryption_key,
            enforce_ssl=True,
        )

        log_group = logs.LogGroup(
            self,
            "HandlerLogs",
            encryption_key=encryption_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        role = iam.Role(
            self,
            "HandlerRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Fine-tuning job events: ledger updates and notifications",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[table.table_arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn])
        )
        role.add_to_policy(key_use_statement(encryption_key))

        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue for job events.",
        )
        checkov_skip(
            self.dead_letter_queue,
            "CKV_AWS_27",
            "Encrypted at rest with SSE-SQS (SqsManagedSseEnabled); checkov 3.3 only recognises "
            "a KMS key, and EventBridge cannot write to a queue under a customer-managed key "
            "without extra key-policy grants.",
        )

        bundle = lambda_bundle("job-events", code_dir=ROOT / "lambda" / "job_events")
        self.function = lambda_.Function(
            self,
            "Handler",
            description="Fine-tuning job state changes -> ledger and SNS",
            runtime=LAMBDA_RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(bundle)),
            role=role,
            memory_size=256,
            timeout=Duration.seconds(30),
            environment={"FTL_JOB_TABLE": table.table_name, "FTL_TOPIC_ARN": self.topic.topic_arn},
            log_group=log_group,
            environment_encryption=encryption_key,
            dead_letter_queue=self.dead_letter_queue,
        )
        lambda_checkov_skips(self.function)

        self.rule = events.Rule(
            self,
            "StateChanges",
            description="SageMaker training jobs run by the fine-tuning platform's role",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[EVENT_DETAIL_TYPE],
                detail={"RoleArn": [training_role.role_arn]},
            ),
        )
        self.rule.add_target(
            targets.LambdaFunction(
                self.function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=8,
                max_event_age=Duration.hours(6),
            )
        )
