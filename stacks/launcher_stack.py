"""Templates, the job launcher, its HTTP API, job events, the job queue (queue mode) and the
fleet dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from ftl_constructs.fleet_dashboard import FleetDashboard
from ftl_constructs.job_events import JobEvents
from ftl_constructs.job_queue import JobQueue
from ftl_constructs.job_template import TrainingJobTemplate, catalog_specs
from ftl_constructs.launcher import JobLauncher
from ftl_constructs.mlflow_tracking import tracking_config
from ftl_constructs.model_registry import ModelRegistry, evaluation_results_access
from ftl_constructs.price_refresh import PriceRefresh
from ftl_constructs.settings import ContextError, PlatformSettings, retention_days
from ftl_constructs.team_access import TeamAccess, output_id
from ftl_constructs.team_topics import TeamTopics
from jobmodel.after_training.registry import NOT_OFFERED_REGIONS
from jobmodel.capacity.plans import CapacityError
from jobmodel.contract.names import PLATFORM_VERSION, VERSION_OUTPUT
from jobmodel.evaluation.additions import EvaluationAdditions, EvaluationSettingsError
from stacks.foundation_stack import FoundationStack


class LauncherStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: PlatformSettings,
        foundation: FoundationStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        retention = retention_days(settings.log_retention_days)
        templates = self._templates(settings)
        network = foundation.network
        # Queue mode (ftl:scheduler=queue): jobs wait in an AWS Batch queue for capacity.
        self.job_queue = (
            JobQueue(
                self,
                "JobQueue",
                platform_name=settings.name,
                settings=settings.queue,
                teams=settings.teams,
            )
            if settings.queue.enabled
            else None
        )
        self.launcher = JobLauncher(
            self,
            "Launcher",
            platform_name=settings.name,
            templates=templates,
            training_role=foundation.training_role,
            team_roles=foundation.team_roles,
            teams=settings.teams,
            prices=settings.prices,
            capacity=settings.capacity,
            data_bucket=foundation.data_bucket,
            checkpoint_bucket=foundation.checkpoint_bucket,
            artifact_bucket=foundation.artifact_bucket,
            encryption_key=foundation.key,
            subnets=network.subnets if network else (),
            security_group=network.security_group if network else None,
            extra_input_buckets=settings.extra_input_buckets,
            platform_tags=settings.tags,
            log_retention=retention,
            api_settings=settings.api,
            job_queue=self.job_queue,
        )
        self._tracking_environment(settings)
        # Issue 36: the teams' additions to the evaluation policies, for the trigger's claims.
        for key, value in EvaluationAdditions.to_env(settings.evaluation).items():
            self.launcher.function.add_environment(key, value)
        self._events_and_dashboard(settings, foundation, retention)
        # Training prices from the AWS Price List API, daily and after each deploy.
        self.prices = PriceRefresh(
            self,
            "PriceRefresh",
            table=self.launcher.table,
            encryption_key=foundation.key,
            log_retention=retention,
        )
        self.team_access = (
            TeamAccess(
                self,
                "TeamAccess",
                version=self.launcher.version,
                api=self.launcher.api,
                routes=self.launcher.routes,
                teams=settings.teams,
                http_alias=self.launcher.http_alias,
                chain_alias=self.launcher.chain_alias,
                sweep_alias=self.launcher.sweep_alias,
            )
            if settings.teams.enabled
            else None
        )
        self._registry(settings, [t.spec.name for t in templates])
        self._evaluation_results(foundation)
        self._notifications(settings, foundation)
        self._outputs(foundation)

    def _templates(self, settings: PlatformSettings) -> list[TrainingJobTemplate]:
        """One template construct per catalog entry, once each capacity plan's templates
        exist, allow its instance type and have a plan step."""
        specs = catalog_specs(settings.catalog_file)
        try:
            settings.capacity.check_catalog({s.name: s for s in specs})
        except CapacityError as exc:
            raise ContextError(exc.key, exc.rule) from None
        try:  # issue 36: checked here; the trigger reads them again (FTL_EVALUATION)
            EvaluationAdditions.parse(
                settings.evaluation,
                teams=[t.name for t in settings.teams.teams],
                catalog={s.name: s for s in specs},
            )
        except EvaluationSettingsError as exc:
            raise ContextError.of(exc) from None
        return [TrainingJobTemplate(self, f"Template-{spec.name}", spec=spec) for spec in specs]

    def _registry(self, settings: PlatformSettings, templates: list[str]) -> None:
        """Model package groups; the two functions that complete end effects register a
        Completed job's model, and the trigger answers models and an admin's review. None
        where CloudFormation has no model package groups."""
        self.registry: ModelRegistry | None = None
        if settings.region in NOT_OFFERED_REGIONS:
            return
        self.registry = ModelRegistry(
            self, "ModelRegistry", platform_name=settings.name, templates=templates,
            teams=settings.teams,
        )  # fmt: skip
        self.registry.grant_register(self.launcher.function, self.launcher.trigger.policy)
        self.registry.grant_review(self.launcher.trigger.policy)
        self.registry.grant_register(self.events.function, self.events.handler.policy)
        self.registry.acknowledge_list(self.events.handler.policy)
        self.registry.grant_gate(self.launcher.trigger.policy, reviews=True)
        self.registry.grant_gate(self.events.handler.policy, reviews=False)

    def _evaluation_results(self, foundation: FoundationStack) -> None:
        """An evaluation job's end (issue 36, either function): its ``output.tar.gz`` read and
        the evaluated job's metrics JSON (its version's ModelMetrics) written, in the
        artifact bucket under the platform key (the functions' key statement)."""
        # Exported explicitly (the export a reference would make), so the wildcard's cdk-nag
        # finding names the import the policy holds.
        bucket_arn = foundation.export_value(foundation.artifact_bucket.bucket_arn)
        for policy in (self.launcher.trigger.policy, self.events.handler.policy):
            evaluation_results_access(policy, bucket_arn)

    def _notifications(self, settings: PlatformSettings, foundation: FoundationStack) -> None:
        """A topic per team (each team subscribes to its own), and every platform event on
        EventBridge, from both functions."""
        self.notifications = TeamTopics(
            self,
            "Notifications",
            platform_name=settings.name,
            teams=settings.teams,
            encryption_key=foundation.key,
            publishers=[
                (self.launcher.function, self.launcher.trigger.policy),
                (self.events.function, self.events.handler.policy),
            ],
        )
        if self.team_access is not None:
            self.team_access.grant_topics(self.notifications.topics)

    def _events_and_dashboard(
        self,
        settings: PlatformSettings,
        foundation: FoundationStack,
        retention: logs.RetentionDays,
    ) -> None:
        self.events = JobEvents(
            self,
            "JobEvents",
            table=self.launcher.table,
            training_role_arns=[r.arn_for(self) for r in foundation.training_roles],
            encryption_key=foundation.key,
            log_retention=retention,
            environment=self.launcher.shared_environment,
            job_queue_arns=[self.job_queue.queue_arn] if self.job_queue else [],
            chain_alias=self.launcher.chain_alias,
        )
        # The trigger announces the ends it records (describe, stop, a start that failed, the
        # sweep) on the same topic.
        self.launcher.announce_on(self.events.topic)
        # Both modes: the metrics come from the job-events function's EMF lines; the alarms
        # notify the platform's topic.
        self.dashboard = FleetDashboard(
            self,
            "FleetDashboard",
            platform_name=settings.name,
            teams=settings.teams,
            queue=settings.queue,
            alarm_topic=self.events.topic,
            alarm_topic_key=foundation.key,
        )

    def _outputs(self, foundation: FoundationStack) -> None:
        CfnOutput(self, VERSION_OUTPUT, value=PLATFORM_VERSION)  # ftl doctor reads it
        CfnOutput(self, "TriggerFunctionName", value=self.launcher.function.function_name)
        CfnOutput(self, "TriggerFunctionArn", value=self.launcher.function.function_arn)
        CfnOutput(self, "JobApiUrl", value=self.launcher.api_url)
        CfnOutput(self, "JobTableName", value=self.launcher.table.table_name)
        CfnOutput(self, "JobEventsTopicArn", value=self.events.topic.topic_arn)
        CfnOutput(self, "FleetDashboardName", value=self.dashboard.dashboard.dashboard_name)
        if self.job_queue is not None:
            CfnOutput(self, "JobQueueArn", value=self.job_queue.queue_arn)
        if self.registry is not None:
            CfnOutput(
                self,
                "ModelPackageGroupNames",
                value=",".join(sorted(self.registry.group_names.values())),
            )
        if self.team_access is not None:
            access = self.team_access
            for name, alias in access.aliases.items():
                oid = output_id(name)
                CfnOutput(self, f"Team{oid}InvokeArn", value=alias.function_arn)
                CfnOutput(
                    self, f"Team{oid}PolicyArn", value=access.policies[name].managed_policy_arn
                )
                CfnOutput(
                    self,
                    f"Team{oid}TrainingRoleArn",
                    value=foundation.team_roles[name].arn_for(self),
                )
                CfnOutput(
                    self, f"Team{oid}TopicArn", value=self.notifications.topics[name].topic_arn
                )
            if access.admin_alias is not None and access.admin_policy is not None:
                CfnOutput(self, "AdminInvokeArn", value=access.admin_alias.function_arn)
                CfnOutput(self, "AdminPolicyArn", value=access.admin_policy.managed_policy_arn)

    def _tracking_environment(self, settings: PlatformSettings) -> None:
        """Issue 27: the MLflow servers tracked jobs log to, in the trigger's environment
        (``FTL_MLFLOW``, ``jobmodel.after_training.tracking``)."""
        teams = [t.name for t in settings.teams.teams]
        config = tracking_config(self, settings.mlflow, settings.name, teams)
        for key, value in config.to_env().items():
            self.launcher.function.add_environment(key, value)
