"""The training job queue: AWS Batch for SageMaker Training (issue 10, ``ftl:scheduler=queue``).

No L2 constructs exist for service environments or SageMaker job queues, so this uses the
L1 resources (CloudFormation ``AWS::Batch::*``):

- ``AWS::Batch::ServiceEnvironment`` of type ``SAGEMAKER_TRAINING`` with one capacity limit
  in ``NUM_INSTANCES``: how many training instances all queued jobs may hold at once. A job
  that does not fit waits ``RUNNABLE``.
- ``AWS::Batch::JobQueue`` of type ``SAGEMAKER_TRAINING`` on that environment, with one
  ``JobStateTimeLimitAction`` per reason Batch can act on
  (``jobmodel.jobs.queue_state.HEAD_LIMIT_REASONS``, plus the quota-share limit with
  ``quotashare``): a job ``RUNNABLE`` at the head of the queue for longer than
  ``ftl:queueHeadTimeoutMinutes`` because SageMaker has no capacity for it or it needs more
  than the environment's (or its quota share's) limit is terminated (``TERMINATE``, the only
  action a SageMaker queue accepts), so one job that cannot start does not block the queue
  forever. A job waiting its turn while other jobs hold the capacity is never terminated.
- ``AWS::Batch::SchedulingPolicy``:

  * ``fairshare``: one share per team (share identifier = team name; a single-team
    deployment uses ``default``). The team config's ``weight`` means "higher gets more";
    Batch's ``weightFactor`` means the opposite (a share with weight factor 0.5 gets twice
    the capacity of one with 1.0), so ``weightFactor = 1 / weight``, clamped to Batch's
    0.0001..999.9999.
  * ``quotashare``: a quota-share policy plus one ``AWS::Batch::QuotaShare`` per team, each
    holding a slice of the capacity in proportion to its weight, lending idle capacity and
    borrowing from others (``LEND_AND_BORROW``), without preemption inside a share.

Who creates the SageMaker job: AWS Batch, with its service-linked role
``AWSServiceRoleForAWSBatchWithSagemaker`` (service ``sagemaker-queuing.batch.amazonaws.com``).
IAM creates it the first time someone with ``iam:CreateServiceLinkedRole`` creates a
SAGEMAKER_TRAINING service environment in the account (``cdk deploy`` does, through
CloudFormation); it lets Batch call CreateTrainingJob/Describe/Stop and pass the role named
in the payload. This stack does not create it (one per account, shared with any other
Batch-for-SageMaker user; deleting the stack must not delete it). Because Batch, not the
trigger, calls CreateTrainingJob, the IAM conditions on the trigger's own CreateTrainingJob
do not apply in queue mode: the launcher's validation is the gate, and the submitter may
pass only the team roles given here (:meth:`JobQueue.grant_submit`).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack, aws_batch, aws_iam
from constructs import Construct

from jobmodel.capacity.scheduler import SHARE_DECAY_SECONDS, share_of
from jobmodel.contract.names import BATCH_TRAINING_JOB_PREFIX, DEFAULT_SHARE
from jobmodel.jobs.queue_state import HEAD_LIMIT_REASONS, QUOTA_LIMIT_REASON
from jobmodel.teams import TeamsConfig

from .nag import acknowledge_resource
from .settings import QueueSettings

SERVICE_JOB_TYPE = "SAGEMAKER_TRAINING"
MIN_WEIGHT_FACTOR, MAX_WEIGHT_FACTOR = 0.0001, 999.9999


def head_limit_reasons(share_policy: str) -> tuple[str, ...]:
    """The RUNNABLE reasons the queue's head time limit terminates a job for."""
    quota = (QUOTA_LIMIT_REASON,) if share_policy == "quotashare" else ()
    return HEAD_LIMIT_REASONS + quota


def weight_factor(weight: float) -> float:
    """Batch's weightFactor for a team weight (higher weight = more share = lower factor)."""
    return round(min(MAX_WEIGHT_FACTOR, max(MIN_WEIGHT_FACTOR, 1.0 / weight)), 4)


def quota_slices(teams: TeamsConfig, capacity: int) -> dict[str, int]:
    """Instances each share holds in quota-share mode: capacity split by weight, at least 1."""
    if not teams.enabled:
        return {DEFAULT_SHARE: capacity}
    total = sum(t.weight for t in teams.teams)
    return {t.name: max(1, int(capacity * t.weight / total)) for t in teams.teams}


class JobQueue(Construct):
    """Service environment + job queue + scheduling policy for queued training jobs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        platform_name: str,
        settings: QueueSettings,
        teams: TeamsConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        self.share_policy = settings.share_policy
        # Each team's share (jobmodel.capacity.scheduler.share_of), or the single-team platform's.
        owners: list[str | None] = [t.name for t in teams.teams] if teams.enabled else [None]
        self.share_names: tuple[str, ...] = tuple(share_of(o, self.share_policy) for o in owners)
        self.service_environment = aws_batch.CfnServiceEnvironment(
            self,
            "ServiceEnvironment",
            service_environment_name=f"{platform_name}-training",
            service_environment_type=SERVICE_JOB_TYPE,
            capacity_limits=[
                aws_batch.CfnServiceEnvironment.CapacityLimitProperty(
                    capacity_unit="NUM_INSTANCES", max_capacity=settings.capacity_instances
                )
            ],
        )
        self.scheduling_policy = self._policy(platform_name, teams)
        self.queue = aws_batch.CfnJobQueue(
            self,
            "Queue",
            job_queue_name=f"{platform_name}-training",
            job_queue_type=SERVICE_JOB_TYPE,
            priority=1,
            scheduling_policy_arn=self.scheduling_policy.attr_arn,
            service_environment_order=[
                aws_batch.CfnJobQueue.ServiceEnvironmentOrderProperty(
                    order=1,
                    service_environment=self.service_environment.attr_service_environment_arn,
                )
            ],
            job_state_time_limit_actions=[
                aws_batch.CfnJobQueue.JobStateTimeLimitActionProperty(
                    action="TERMINATE",
                    state="RUNNABLE",
                    max_time_seconds=settings.head_timeout_minutes * 60,
                    reason=reason,
                )
                for reason in head_limit_reasons(self.share_policy)
            ],
        )
        self.queue_arn: str = self.queue.attr_job_queue_arn
        self.queue_name = f"{platform_name}-training"
        self.quota_shares: list[aws_batch.CfnQuotaShare] = (
            self._quota_shares(teams) if self.share_policy == "quotashare" else []
        )

    def _policy(self, platform_name: str, teams: TeamsConfig) -> aws_batch.CfnSchedulingPolicy:
        if self.share_policy == "quotashare":
            return aws_batch.CfnSchedulingPolicy(
                self,
                "SchedulingPolicy",
                name=f"{platform_name}-quotashare",
                quota_share_policy=aws_batch.CfnSchedulingPolicy.QuotaSharePolicyProperty(
                    idle_resource_assignment_strategy="FIFO"
                ),
            )
        shares = [
            aws_batch.CfnSchedulingPolicy.ShareAttributesProperty(
                share_identifier=share_of(team.name), weight_factor=weight_factor(team.weight)
            )
            for team in teams.teams
        ] or [
            aws_batch.CfnSchedulingPolicy.ShareAttributesProperty(
                share_identifier=share_of(None), weight_factor=1.0
            )
        ]
        return aws_batch.CfnSchedulingPolicy(
            self,
            "SchedulingPolicy",
            name=f"{platform_name}-fairshare",
            fairshare_policy=aws_batch.CfnSchedulingPolicy.FairsharePolicyProperty(
                share_decay_seconds=SHARE_DECAY_SECONDS,
                compute_reservation=0,
                share_distribution=shares,
            ),
        )

    def _quota_shares(self, teams: TeamsConfig) -> list[aws_batch.CfnQuotaShare]:
        shares = []
        for name, instances in quota_slices(teams, self.settings.capacity_instances).items():
            shares.append(
                aws_batch.CfnQuotaShare(
                    self,
                    f"QuotaShare-{name}",
                    quota_share_name=name,
                    job_queue=self.queue_arn,
                    capacity_limits=[
                        aws_batch.CfnQuotaShare.QuotaShareCapacityLimitProperty(
                            capacity_unit="NUM_INSTANCES", max_capacity=instances
                        )
                    ],
                    resource_sharing_configuration=(
                        aws_batch.CfnQuotaShare.QuotaShareResourceSharingConfigurationProperty(
                            strategy="LEND_AND_BORROW"
                        )
                    ),
                    preemption_configuration=(
                        aws_batch.CfnQuotaShare.QuotaSharePreemptionConfigurationProperty(
                            in_share_preemption="DISABLED"
                        )
                    ),
                )
            )
        return shares

    def quota_share_arn(self, name: str) -> str:
        """ARN of one quota share of this queue (``job-queue/<queue>/quota-share/<name>``)."""
        return Stack.of(self).format_arn(
            service="batch",
            resource="job-queue",
            resource_name=f"{self.queue_name}/quota-share/{name}",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    def service_job_arn_pattern(self) -> str:
        """ARN of any service job in this account and region (Batch names jobs by id)."""
        return Stack.of(self).format_arn(
            service="batch",
            resource="service-job",
            resource_name="*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )

    def training_job_arns(self, teams: Sequence[str] = ()) -> list[str]:
        """The SageMaker training jobs Batch starts from this queue: Batch names each one
        ``AWSBatch<jobName><32 hex>``, so a team's jobs (``<team>-...``) are
        ``AWSBatch<team>-*``, and ``awsbatch<team>-*`` as SageMaker writes ARNs (every job
        without teams)."""
        # IAM matches ARNs case-sensitively. SageMaker returns a job's ARN with the name in
        # lower case, while AWS's own policy for Batch's service-linked role names
        # "AWSBatch*": which form SageMaker authorizes is not documented, so both are granted
        # (and the authorization check tries both).
        prefixes = (BATCH_TRAINING_JOB_PREFIX, BATCH_TRAINING_JOB_PREFIX.lower())
        names = [f"{p}{team}-*" for team in teams for p in prefixes] or [f"{p}*" for p in prefixes]
        return [
            Stack.of(self).format_arn(
                service="sagemaker", resource="training-job", resource_name=name
            )
            for name in names
        ]

    def grant_submit(
        self, grantee: aws_iam.IGrantable, *, training_role_arns: Sequence[str]
    ) -> aws_iam.Grant:
        """What the trigger needs in queue mode: submit to this queue only, follow and stop
        its jobs, and pass the given team training roles to SageMaker (nothing else).

        Returns one grant for every statement (``apply_before`` orders a construct after
        them). The IAM5 finding on the service-job ARN pattern is acknowledged on the
        grantee's principal (the role whose policy holds the statements)."""
        # SubmitServiceJob is authorized on the queue AND on the new service job (both
        # required resource types), and on the quota share the request names (quota-share
        # queues); Describe/ListServiceJobs take no resource type at all (only "*").
        submit_resources = [
            self.queue_arn,
            self.service_job_arn_pattern(),
            *(self.quota_share_arn(share.quota_share_name) for share in self.quota_shares),
        ]
        grants = [
            aws_iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["batch:SubmitServiceJob"],
                resource_arns=submit_resources,
            ),
            aws_iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["batch:GetJobQueueSnapshot"],
                resource_arns=[self.queue_arn],
            ),
            aws_iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["batch:DescribeServiceJob", "batch:ListServiceJobs"],
                resource_arns=["*"],
            ),
            # Terminate names a job id, not the queue: Batch offers no queue condition key, so
            # it is scoped to service-job ARNs of this account and region.
            aws_iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["batch:TerminateServiceJob"],
                resource_arns=[self.service_job_arn_pattern()],
            ),
            aws_iam.Grant.add_to_principal(
                grantee=grantee,
                actions=["batch:TagResource"],  # SubmitServiceJob with tags tags the new job
                resource_arns=[self.service_job_arn_pattern()],
            ),
        ]
        principal = grantee.grant_principal
        holder = principal if isinstance(principal, Construct) else grantee
        if isinstance(holder, Construct):
            acknowledge_resource(
                holder,
                self.service_job_arn_pattern(),
                "Batch names service jobs by a generated id and offers no queue condition "
                "key; describe/terminate/tag are limited to service jobs in this account "
                "and region, and the trigger only acts on job ids from its own ledger",
            )
            acknowledge_resource(
                holder,
                "*",
                "batch:DescribeServiceJob and batch:ListServiceJobs support no resource type "
                "(the Service Authorization Reference lists none), so only '*' can grant them; "
                "they read job state and change nothing",
            )
        if training_role_arns:
            grants.append(
                aws_iam.Grant.add_to_principal(
                    grantee=grantee,
                    actions=["iam:PassRole"],
                    resource_arns=list(training_role_arns),
                    conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
                )
            )
        grant = grants[0]
        for other in grants[1:]:
            grant = grant.combine(other)
        return grant
