"""The job launcher: ledger table, trigger Lambda and the IAM-authorised HTTP API."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from constructs import Construct

from ftl_constructs.botocore_models import declared_operations
from ftl_constructs.bundling import LEDGER_PACKAGE, ROOT, TRIGGER_OPERATIONS, source_tarball
from ftl_constructs.job_ledger import ledger_table
from ftl_constructs.job_queue import JobQueue
from ftl_constructs.job_template import TrainingJobTemplate
from ftl_constructs.launch_policy import (
    grant_job_lookup,
    grant_quota_read,
    launch_statements,
    training_job_arns,
    tuning_job_arns,
)
from ftl_constructs.launcher_http import http_api
from ftl_constructs.nag import acknowledge_resource, checkov_skip
from ftl_constructs.platform_function import PlatformFunction
from ftl_constructs.settings import ApiSettings
from ftl_constructs.training_role import TrainingRole
from jobmodel import TemplateSpec, dump_catalog
from jobmodel.capacity.plans import CapacityConfig
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.names import (
    CARE_INDEX,
    CHAIN_ALIAS,
    ENV_JOB_TABLE,
    ENV_PLATFORM_NAME,
    ENV_PRICES,
    ENV_TEAM_ROLES,
    ENV_TOPIC_ARN,
    HTTP_ALIAS,
    JOB_INDEX,
    SWEEP_ALIAS,
    TEAM_INDEX,
)
from jobmodel.jobs.claims import SWEEP_MINUTES, TRIGGER_TIMEOUT_S
from jobmodel.platform import PlatformConfig
from jobmodel.teams import TeamsConfig

# Queue mode keeps these launch statements (Batch, not the trigger, creates the jobs).
QUEUE_MODE_STATEMENTS = ("ReadPlatformJobs", "StopPlatformJobs")


class JobLauncher(Construct):
    """Starts training jobs from the catalog, for callers with Invoke or HTTP API rights.

    Jobs run as ``training_role`` (single-team) or, with teams configured, as the caller's
    team's role from ``team_roles``; ``iam:PassRole`` covers exactly those roles. With a
    ``job_queue`` (``ftl:scheduler=queue``) the trigger submits jobs to that AWS Batch queue
    instead of calling CreateTrainingJob (``SchedulerConfig.to_env`` in its
    environment; IAM as in ``_trigger_policy``).

    Attributes:
        table: the job ledger.
        function: the trigger Lambda.
        version: its published version (aliases point at it).
        http_alias: the ``http`` alias, the only function the HTTP API invokes.
        api: the HTTP API; ``api_url`` its invoke URL; ``routes`` its routes
            (``jobmodel.contract.routes``).
        source_asset: the training source (``sourcedir.tar.gz``) as an S3 asset.
        environment: the trigger's environment.
        shared_environment: the part of it the job-events function needs too.
        job_queue: the job queue jobs are submitted to, or ``None`` (direct mode).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        platform_name: str,
        templates: Sequence[TrainingJobTemplate],
        training_role: TrainingRole | None = None,
        team_roles: Mapping[str, TrainingRole] | None = None,
        teams: TeamsConfig = TeamsConfig(),
        prices: Mapping[str, Mapping[str, float]] | None = None,
        capacity: CapacityConfig = CapacityConfig(),
        data_bucket: s3.IBucket,
        checkpoint_bucket: s3.IBucket,
        artifact_bucket: s3.IBucket,
        encryption_key: kms.IKey,
        subnets: Sequence[ec2.ISubnet] = (),
        security_group: ec2.ISecurityGroup | None = None,
        extra_input_buckets: Sequence[str] = (),
        platform_tags: Mapping[str, str] | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        api_settings: ApiSettings = ApiSettings(),
        job_queue: JobQueue | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        specs = [t.spec for t in templates]
        team_roles = dict(team_roles or {})
        roles = _launch_roles(training_role, team_roles, teams)
        self.job_queue = job_queue
        self._training_source(roles, specs)
        self.table = ledger_table(self, encryption_key)

        in_vpc = bool(subnets) and security_group is not None
        config = PlatformConfig(
            platform_name=platform_name,
            region=stack.region,
            role_arn=training_role.arn_for(self) if training_role is not None else "",
            data_bucket=data_bucket.bucket_name,
            checkpoint_bucket=checkpoint_bucket.bucket_name,
            artifact_bucket=artifact_bucket.bucket_name,
            kms_key_arn=encryption_key.key_arn,
            source_s3_uri=self.source_asset.s3_object_url,
            platform_tags=dict(platform_tags or {}),
            allowed_input_buckets=tuple(extra_input_buckets),
            subnets=tuple(s.subnet_id for s in subnets) if in_vpc else (),
            security_groups=(security_group.security_group_id,)
            if in_vpc and security_group
            else (),
        )
        self.capacity = capacity
        self._environment(config, teams=teams, team_roles=team_roles, prices=prices)
        self._trigger(specs, encryption_key, log_retention)
        self._trigger_policy(
            platform_name=platform_name,
            specs=specs,
            roles=roles,
            key=encryption_key,
            subnets=subnets,
            security_group=security_group,
            teams=[t.name for t in teams.teams],
        )
        self._http_api(stack, log_retention, encryption_key, api_settings)

    def _environment(
        self,
        config: PlatformConfig,
        *,
        teams: TeamsConfig,
        team_roles: Mapping[str, TrainingRole],
        prices: Mapping[str, Mapping[str, float]] | None,
    ) -> None:
        """The trigger's environment (``environment``) and the part of it the job-events
        function needs too (``shared_environment``)."""
        environment = config.to_env()
        environment[ENV_JOB_TABLE] = self.table.table_name
        # Shared with job events: the platform name (the fleet metrics' Platform dimension),
        # the teams and the price overrides.
        self.shared_environment: dict[str, str] = {ENV_PLATFORM_NAME: config.platform_name}
        if teams.enabled:
            self.shared_environment.update(teams.to_env())
            environment[ENV_TEAM_ROLES] = json.dumps(
                {name: role.arn_for(self) for name, role in sorted(team_roles.items())},
                separators=(",", ":"),
            )
        if prices:
            self.shared_environment[ENV_PRICES] = json.dumps(
                prices, sort_keys=True, separators=(",", ":")
            )
        environment.update(self.shared_environment)
        if self.capacity.plans:  # the training plans the chains' plan step may use
            environment.update(self.capacity.to_env())
        if self.job_queue is None:
            scheduler = SchedulerConfig()
        else:  # queue mode: the trigger submits to this Batch queue
            scheduler = SchedulerConfig(
                scheduler="queue",
                job_queue_arn=self.job_queue.queue_arn,
                share_policy=self.job_queue.share_policy,
                capacity_instances=self.job_queue.settings.capacity_instances,
            )
        environment.update(scheduler.to_env())
        self.environment = environment

    def _training_source(
        self, roles: Sequence[TrainingRole], specs: Sequence[TemplateSpec]
    ) -> None:
        """The training source as an S3 asset; every training role may read it and pull the
        catalog's images."""
        source = source_tarball(ROOT / "training", ROOT / "cdk.out" / ".ftl-source")
        self.source_asset = s3_assets.Asset(self, "TrainingSource", path=str(source))
        for role in roles:
            role.allow_source_read(
                self.source_asset.bucket.arn_for_objects(self.source_asset.s3_object_key)
            )
            for spec in specs:
                role.allow_image_pull(spec.image_uri)

    def _trigger(
        self, specs: Sequence[TemplateSpec], key: kms.IKey, log_retention: logs.RetentionDays
    ) -> None:
        self.trigger = PlatformFunction(
            self,
            "Trigger",
            description="Fine-tuning launcher: validate, record and start training jobs",
            code_dir=ROOT / "lambda" / "trigger",
            packages=[ROOT / "jobmodel", LEDGER_PACKAGE],
            files={"catalog.json": dump_catalog(specs)},
            aws_operations=declared_operations(TRIGGER_OPERATIONS),
            encryption_key=key,
            log_retention=log_retention,
            environment=self.environment,
            memory_size=512,
            # The claims' bound counts on no call of the trigger being in flight after it.
            timeout=Duration.seconds(TRIGGER_TIMEOUT_S),
        )
        self.function = self.trigger.function
        # One published version; every alias (http, team-<name>, admin) points at it.
        self.version = self.function.current_version
        self.http_alias = lambda_.Alias(
            self,
            "HttpAlias",
            alias_name=HTTP_ALIAS,
            version=self.version,
            description="Fine-tuning launcher, HTTP API door (the API invokes only this alias)",
        )
        # The job-events function's door: it asks for a capacity chain's next attempt.
        self.chain_alias = (
            lambda_.Alias(
                self,
                "ChainAlias",
                alias_name=CHAIN_ALIAS,
                version=self.version,
                description="Fine-tuning launcher, capacity chains (the job-events function only)",
            )
            if any(s.capacity_chain for s in specs)
            else None
        )
        self._sweep()
        checkov_skip(
            self.function,
            "CKV_AWS_116",
            "Invoked synchronously (Lambda Invoke and the HTTP API), and asynchronously only by "
            "the chain alias's ask and the sweep's schedule, each repeated by what follows "
            "(a describe, the next sweep); a dead-letter queue would hold nothing to replay.",
        )

    def _sweep(self) -> None:
        """The sweep's door (jobmodel.jobs.claims): every SWEEP_MINUTES an EventBridge schedule
        invokes the ``sweep`` alias, which only it may invoke, with the sweep action. A missed
        sweep is not retried: the next one does its work."""
        self.sweep_alias = lambda_.Alias(
            self,
            "SweepAlias",
            alias_name=SWEEP_ALIAS,
            version=self.version,
            description="Fine-tuning launcher, the scheduled sweep (its EventBridge rule only)",
        )
        self.sweep_rule = events.Rule(
            self,
            "SweepSchedule",
            description="Ends claims that never started and completes owed end effects",
            schedule=events.Schedule.rate(Duration.minutes(SWEEP_MINUTES)),
        )
        self.sweep_rule.add_target(
            targets.LambdaFunction(
                self.sweep_alias,
                event=events.RuleTargetInput.from_object({"action": "sweep"}),
                retry_attempts=0,
                max_event_age=Duration.minutes(SWEEP_MINUTES),
            )
        )

    def announce_on(self, topic: sns.ITopic) -> None:
        """The trigger announces the ends it records (jobmodel.jobs.effects) on ``topic``."""
        self.function.add_environment(ENV_TOPIC_ARN, topic.topic_arn)
        self.trigger.policy.add_statements(
            iam.PolicyStatement(
                sid="AnnounceJobEnds", actions=["sns:Publish"], resources=[topic.topic_arn]
            )
        )

    def _trigger_policy(
        self,
        *,
        platform_name: str,
        specs: Sequence[TemplateSpec],
        roles: Sequence[TrainingRole],
        key: kms.IKey,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup | None,
        teams: Sequence[str],
    ) -> None:
        """The trigger's IAM. Direct mode: the SageMaker statements of ``launch_policy``.
        Queue mode: Batch creates the training jobs (with its service-linked role), so the
        trigger keeps only describe and stop of the platform's jobs (also those Batch
        named), and the job queue grants submit and PassRole (``JobQueue.grant_submit``)."""
        stack = Stack.of(self)
        policy = self.trigger.policy
        statements = launch_statements(
            stack=stack,
            platform_name=platform_name,
            specs=specs,
            pass_role_arns=[role.arn_for(self) for role in roles],
            key=key,
            subnets=subnets,
            security_group=security_group,
            teams=teams,
            training_plans=[p.arn for p in self.capacity.plans],
        )
        jobs = training_job_arns(stack, teams)
        if self.job_queue is not None:
            statements = [s for s in statements if s.sid in QUEUE_MODE_STATEMENTS]
            batch_jobs = self.job_queue.training_job_arns(teams) if teams else []
            for statement in statements:
                statement.add_resources(*batch_jobs)
            jobs = [*jobs, *batch_jobs]
            grant = self.job_queue.grant_submit(
                self.function, training_role_arns=[role.arn_for(self) for role in roles]
            )
            grant.apply_before(self.function)
        policy.add_statements(*statements)
        reason = (
            "Job names are generated per request at run time (in teams mode under the "
            "team's '<team>-' prefix); creation is pinned by condition keys to the catalog's "
            "instance types, runtime, KMS key, network settings and the platform tag, "
            "and describing and stopping to jobs tagged by this platform."
        )
        if self.job_queue is not None:
            reason = (
                "Job names are generated per request at run time (in teams mode under the "
                "team's '<team>-' prefix; Batch prefixes 'AWSBatch'); the trigger creates no "
                "job in queue mode, and describes and stops only jobs tagged by this platform."
            )
        for arn in jobs:
            acknowledge_resource(policy, arn, reason)
        if self.job_queue is None:
            for arn in tuning_job_arns(stack, teams):
                acknowledge_resource(
                    policy,
                    arn,
                    "A sweep's tuning job is named per request at run time like a job (in "
                    "teams mode under the team's '<team>-' prefix); creation is pinned by the "
                    "same condition keys as a training job's, and describing, listing and "
                    "stopping to tuning jobs that carry no other platform's tag (IfExists: "
                    "a name with no tuning job must answer not found).",
                )
        policy.add_statements(
            iam.PolicyStatement(
                sid="JobLedger",
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                    "dynamodb:ConditionCheckItem",
                    "dynamodb:Query",
                ],
                # The indexes: list queries by-created, and by-team for a team member's
                # list (and an admin's list with ``team``); the sweep needs-care.
                resources=[
                    self.table.table_arn,
                    f"{self.table.table_arn}/index/{JOB_INDEX}",
                    f"{self.table.table_arn}/index/{TEAM_INDEX}",
                    f"{self.table.table_arn}/index/{CARE_INDEX}",
                ],
            ),
        )
        grant_quota_read(policy)  # quota-aware submit
        if self.job_queue is None:
            grant_job_lookup(policy)  # a claim's unanswered start (queue mode: Batch's list)
        if self.job_queue is not None:
            self._queue_estimate_reads(policy)

    def _queue_estimate_reads(self, policy: iam.Policy) -> None:
        """Queue mode: a queued job's estimated start reads the limits of the queue's jobs
        from the ledger, 100 a call (ftl_trigger/backends/queue/places.py)."""
        policy.add_statements(
            iam.PolicyStatement(
                sid="QueueEstimateReads",
                actions=["dynamodb:BatchGetItem"],
                resources=[self.table.table_arn],
            )
        )

    def _http_api(
        self, stack: Stack, retention: logs.RetentionDays, key: kms.IKey, settings: ApiSettings
    ) -> None:
        parts = http_api(
            self, alias=self.http_alias, stack=stack, retention=retention, key=key,
            settings=settings,
        )  # fmt: skip
        self.api, self.routes, self.stage, self.api_url = (
            parts.api, parts.routes, parts.stage, parts.url,
        )  # fmt: skip


def _launch_roles(
    training_role: TrainingRole | None,
    team_roles: Mapping[str, TrainingRole],
    teams: TeamsConfig,
) -> list[TrainingRole]:
    """The roles jobs run as: the one training role, or one per configured team."""
    roles = [training_role] if training_role is not None else list(team_roles.values())
    if not roles or (training_role is not None and team_roles):
        raise ValueError("JobLauncher needs either training_role or team_roles")
    if set(team_roles) != {t.name for t in teams.teams}:
        raise ValueError("team_roles must name one role per configured team")
    return roles
