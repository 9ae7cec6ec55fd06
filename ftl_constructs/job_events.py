"""Job state changes -> the ledger and an encrypted SNS topic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
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

from ftl_constructs.bundling import LEDGER_PACKAGE, ROOT
from ftl_constructs.nag import acknowledge, checkov_skip
from ftl_constructs.platform_function import PlatformFunction
from jobmodel.contract.names import ENV_CHAIN_FUNCTION, ENV_JOB_TABLE, ENV_TOPIC_ARN

EVENT_DETAIL_TYPE = "SageMaker Training Job State Change"
TUNING_EVENT_DETAIL_TYPE = "SageMaker HyperParameter Tuning Job State Change"
BATCH_EVENT_SOURCE = "aws.batch"
BATCH_EVENT_DETAIL_TYPE = "Batch Service Job State Change"


class JobEvents(Construct):
    """EventBridge rules for this platform's jobs: SageMaker state changes of jobs that run as
    its training roles and, in queue mode, Batch state changes of service jobs in its job
    queues (``job_queue_arns``).

    Only EventBridge may invoke the handler, and only for these rules: the function's
    resource policy has one statement per rule, naming ``events.amazonaws.com`` with that
    rule's ARN as source. Every rule delivers with the same retries and dead-letter queue.

    Attributes:
        topic: the encrypted SNS topic that announces finished jobs.
        function: the handler that updates the ledger and publishes.
        rule: the SageMaker state-change rule.
        batch_rule: the Batch state-change rule (``None`` without job queues).
        dead_letter_queue: events the handler could not take after retries.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        training_role_arns: Sequence[str],
        encryption_key: kms.IKey,
        log_retention: logs.RetentionDays,
        environment: Mapping[str, str] | None = None,
        job_queue_arns: Sequence[str] = (),
        chain_alias: lambda_.IFunction | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Fine-tuning job events",
            master_key=encryption_key,
            enforce_ssl=True,
        )

        self.dead_letter_queue = self._dead_letter_queue()
        self.handler = PlatformFunction(
            self,
            "Handler",
            description="Fine-tuning job state changes -> ledger and SNS",
            # handler.py and its package ftl_events; the job model's rules (statuses, the
            # Batch and SageMaker state mapping, prices, usage, fleet metrics); and the
            # ledger package both functions write the job record with (ftl_ledger).
            code_dir=ROOT / "lambda" / "job_events",
            packages=[ROOT / "jobmodel", LEDGER_PACKAGE],
            encryption_key=encryption_key,
            log_retention=log_retention,
            environment={
                ENV_JOB_TABLE: table.table_name,
                ENV_TOPIC_ARN: self.topic.topic_arn,
                **({ENV_CHAIN_FUNCTION: chain_alias.function_arn} if chain_alias else {}),
                **(environment or {}),
            },
            dead_letter_queue=self.dead_letter_queue,
        )
        self.function = self.handler.function
        if chain_alias is not None:
            # A capacity chain's attempt ended for want of capacity: ask the trigger (its
            # ``chain`` alias only) to start the next attempt.
            chain_alias.grant_invoke(self.function)
        self.handler.policy.add_statements(
            # Read the job and the team's usage item; update both (in one transaction when a
            # terminal state gives a team's usage back).
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                resources=[table.table_arn],
            ),
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn]),
        )

        self._rules(training_role_arns, job_queue_arns)

    def _rules(self, training_role_arns: Sequence[str], job_queue_arns: Sequence[str]) -> None:
        """SageMaker's state changes of jobs run as the training roles; in queue mode Batch's
        of service jobs in the platform's queues."""
        self.rule = events.Rule(
            self,
            "StateChanges",
            description="SageMaker training jobs run by the fine-tuning platform's role",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[EVENT_DETAIL_TYPE],
                detail={"RoleArn": list(training_role_arns)},
            ),
        )
        self._target(self.rule)
        # A sweep's tuning job (issue 37): its state changes, for the trigger to refresh it
        # (its trials' are the rule above's: they run as the training roles too).
        self.tuning_rule = events.Rule(
            self,
            "TuningStateChanges",
            description="SageMaker tuning jobs (sweeps) run by the fine-tuning platform's roles",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[TUNING_EVENT_DETAIL_TYPE],
                detail={"TrainingJobDefinition": {"RoleArn": list(training_role_arns)}},
            ),
        )
        self._target(self.tuning_rule)
        self.batch_rule: events.Rule | None = None
        if job_queue_arns:
            self.batch_rule = events.Rule(
                self,
                "BatchStateChanges",
                description="AWS Batch service jobs in the fine-tuning platform's job queue",
                event_pattern=events.EventPattern(
                    source=[BATCH_EVENT_SOURCE],
                    detail_type=[BATCH_EVENT_DETAIL_TYPE],
                    detail={"jobQueue": list(job_queue_arns)},
                ),
            )
            self._target(self.batch_rule)

    def _dead_letter_queue(self) -> sqs.Queue:
        queue = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue for job events.",
        )
        checkov_skip(
            queue,
            "CKV_AWS_27",
            "Encrypted at rest with SSE-SQS (SqsManagedSseEnabled); checkov 3.3 only recognises "
            "a KMS key, and EventBridge cannot write to a queue under a customer-managed key "
            "without extra key-policy grants.",
        )
        return queue

    def _target(self, rule: events.Rule) -> None:
        """Deliver ``rule``'s events to the handler (the target adds the function's
        resource-policy statement for this rule's ARN)."""
        rule.add_target(
            targets.LambdaFunction(
                self.function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=8,
                max_event_age=Duration.hours(6),
            )
        )
