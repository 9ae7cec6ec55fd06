"""A CloudWatch dashboard of the training fleet, and its alarms (issue 10).

Every number comes from the Embedded Metric Format lines the job-events function writes
(``jobmodel.fleet_metrics``: namespace, dimensions and metric names are defined there once),
so nothing here polls an API. Widgets:

- running and queued instances by team and instance type: ``RUNNING_SUM`` over the
  ``Instances*Change`` deltas found by ``SEARCH`` (a level counted from the start of the
  graph's range: the dashboard opens on the last 14 days so older jobs are counted);
- queue wait time p50 and p90 (``QueueWaitSeconds``);
- jobs started, completed, failed and stopped;
- spot savings per team (USD);
- month-to-date spend per team against its ``monthly_budget_usd`` (a horizontal line);
- in queue mode, each team's Batch share (``jobmodel.capacity.scheduler.share_of``).

Alarms: for each team with a monthly budget, one at 80% and one at 100% of it on the team's
``MonthSpendUsd`` (missing data keeps the last state: spend only changes when a job ends),
and one when a job waited in the queue longer than ``ftl:queueWaitAlarmMinutes``. Each alarm
notifies ``alarm_topic`` when one is given. CloudWatch publishes to the topic as the service
``cloudwatch.amazonaws.com``: the topic's policy lets it publish, and (for a topic encrypted
with ``alarm_topic_key``) the key's policy lets it use the key, both only on behalf of this
dashboard's alarms (``aws:SourceAccount`` and ``aws:SourceArn`` = the alarms named
``<platform>-*`` in this account and region).
"""

from __future__ import annotations

from aws_cdk import (
    ArnFormat,
    Duration,
    Stack,
    aws_cloudwatch,
    aws_cloudwatch_actions,
    aws_iam,
    aws_kms,
    aws_sns,
)
from constructs import Construct

from jobmodel.capacity.scheduler import share_of
from jobmodel.fleet_metrics import DEFAULT_TEAM, NAMESPACE
from jobmodel.teams import TeamsConfig

from .settings import QueueSettings

BUDGET_THRESHOLDS = (0.8, 1.0)
_PERIOD = Duration.minutes(5)


class FleetDashboard(Construct):
    """The fleet dashboard; ``budget_alarms`` maps (team, fraction) to its alarm."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        platform_name: str,
        teams: TeamsConfig,
        queue: QueueSettings,
        alarm_topic: aws_sns.ITopic | None = None,
        alarm_topic_key: aws_kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.platform_name = platform_name
        self.team_names = tuple(t.name for t in teams.teams) or (DEFAULT_TEAM,)
        self.dashboard = aws_cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{platform_name}-fleet",
            start="-P14D",
        )
        self.dashboard.add_widgets(
            self._level_graph("Running instances by team and instance type", "Running"),
            self._level_graph("Queued instances by team and instance type", "Queued"),
        )
        self.dashboard.add_widgets(self._wait_graph(), self._jobs_graph())
        self.dashboard.add_widgets(self._savings_graph(), self._spend_graph(teams))
        if queue.enabled:
            self.dashboard.add_widgets(self._shares_text(teams, queue.share_policy))
        self.budget_alarms: dict[tuple[str, float], aws_cloudwatch.Alarm] = {}
        for team in teams.teams:
            budget = team.limits.monthly_budget_usd
            if budget is None:
                continue
            for fraction in BUDGET_THRESHOLDS:
                self.budget_alarms[(team.name, fraction)] = self._budget_alarm(
                    team.name, budget, fraction
                )
        self.wait_alarm = aws_cloudwatch.Alarm(
            self,
            "QueueWaitAlarm",
            alarm_name=f"{platform_name}-queue-wait-over-{queue.wait_alarm_minutes}m",
            alarm_description=(
                f"A training job waited in the queue longer than {queue.wait_alarm_minutes} "
                "minutes (ftl:queueWaitAlarmMinutes)"
            ),
            metric=self.metric("QueueWaitSeconds", statistic="Maximum"),
            threshold=queue.wait_alarm_minutes * 60,
            comparison_operator=aws_cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=aws_cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarms = [*self.budget_alarms.values(), self.wait_alarm]
        if alarm_topic is not None:
            self._allow_alarm_notifications(alarm_topic, alarm_topic_key)
            for alarm in self.alarms:
                alarm.add_alarm_action(aws_cloudwatch_actions.SnsAction(alarm_topic))

    def _allow_alarm_notifications(self, topic: aws_sns.ITopic, key: aws_kms.IKey | None) -> None:
        """Let CloudWatch publish this dashboard's alarms to ``topic`` (and use its key)."""
        stack = Stack.of(self)
        alarms = stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{self.platform_name}-*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        conditions = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": alarms},
        }
        cloudwatch = aws_iam.ServicePrincipal("cloudwatch.amazonaws.com")
        topic.add_to_resource_policy(
            aws_iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[cloudwatch],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions=conditions,
            )
        )
        if key is not None:
            key.add_to_resource_policy(
                aws_iam.PolicyStatement(
                    sid="CloudWatchAlarmsToEncryptedTopic",
                    principals=[cloudwatch],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions=conditions,
                )
            )

    # ----------------------------------------------------------------- metrics
    def metric(
        self,
        name: str,
        *,
        statistic: str = "Sum",
        team: str | None = None,
        period: Duration = _PERIOD,
        label: str | None = None,
    ) -> aws_cloudwatch.Metric:
        dims = {"Platform": self.platform_name}
        if team is not None:
            dims["Team"] = team
        return aws_cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=name,
            dimensions_map=dims,
            statistic=statistic,
            period=period,
            label=label,
        )

    def _search(self, metric_name: str, dims: str, statistic: str = "Sum") -> str:
        return (
            f'SEARCH(\'{{{NAMESPACE},{dims}}} MetricName="{metric_name}" '
            f"Platform=\"{self.platform_name}\"', '{statistic}', {int(_PERIOD.to_seconds())})"
        )

    # ----------------------------------------------------------------- widgets
    def _shares_text(self, teams: TeamsConfig, share_policy: str) -> aws_cloudwatch.TextWidget:
        """Each team's Batch share (``jobmodel.capacity.scheduler.share_of``), as Batch's
        console and ``ListServiceJobs`` show it."""
        owners: list[str | None] = [t.name for t in teams.teams] if teams.enabled else [None]
        field = "quotaShareName" if share_policy == "quotashare" else "shareIdentifier"
        rows = "\n".join(f"| {o or '(all jobs)'} | `{share_of(o, share_policy)}` |" for o in owners)
        return aws_cloudwatch.TextWidget(
            markdown=f"### Batch shares ({share_policy})\n\n| team | {field} |\n|---|---|\n{rows}",
            width=24,
            height=2 + len(owners),
        )

    def _level_graph(self, title: str, kind: str) -> aws_cloudwatch.GraphWidget:
        search = self._search(f"Instances{kind}Change", "Platform,Team,InstanceType")
        return aws_cloudwatch.GraphWidget(
            title=title,
            width=12,
            left=[
                aws_cloudwatch.MathExpression(
                    expression=f"RUNNING_SUM({search})",
                    label=f"{kind.lower()} instances",
                    period=_PERIOD,
                    using_metrics={},
                )
            ],
            left_y_axis=aws_cloudwatch.YAxisProps(min=0, label="instances", show_units=False),
        )

    def _wait_graph(self) -> aws_cloudwatch.GraphWidget:
        return aws_cloudwatch.GraphWidget(
            title="Queue wait time",
            width=12,
            left=[
                self.metric("QueueWaitSeconds", statistic="p50", label="p50"),
                self.metric("QueueWaitSeconds", statistic="p90", label="p90"),
            ],
            left_y_axis=aws_cloudwatch.YAxisProps(min=0, label="seconds", show_units=False),
        )

    def _jobs_graph(self) -> aws_cloudwatch.GraphWidget:
        names = ("JobsStarted", "JobsCompleted", "JobsFailed", "JobsStopped")
        return aws_cloudwatch.GraphWidget(
            title="Jobs started, completed, failed, stopped",
            width=12,
            left=[self.metric(n, label=n.removeprefix("Jobs").lower()) for n in names],
            stacked=False,
        )

    def _savings_graph(self) -> aws_cloudwatch.GraphWidget:
        return aws_cloudwatch.GraphWidget(
            title="Spot savings by team (USD)",
            width=12,
            left=[
                aws_cloudwatch.MathExpression(
                    expression=self._search("SpotSavingsUsd", "Platform,Team"),
                    label="",
                    period=Duration.days(1),
                    using_metrics={},
                )
            ],
        )

    def _spend_graph(self, teams: TeamsConfig) -> aws_cloudwatch.GraphWidget:
        spend = [
            self.metric(
                "MonthSpendUsd", statistic="Maximum", team=t, label=t, period=Duration.hours(1)
            )
            for t in self.team_names
        ]
        budgets = [
            aws_cloudwatch.HorizontalAnnotation(
                value=t.limits.monthly_budget_usd, label=f"{t.name} budget"
            )
            for t in teams.teams
            if t.limits.monthly_budget_usd is not None
        ]
        return aws_cloudwatch.GraphWidget(
            title="Month-to-date spend by team vs budget (USD)",
            width=12,
            left=spend,
            left_annotations=budgets,
        )

    def _budget_alarm(self, team: str, budget: float, fraction: float) -> aws_cloudwatch.Alarm:
        percent = int(fraction * 100)
        return aws_cloudwatch.Alarm(
            self,
            f"Budget{percent}-{team}",
            alarm_name=f"{self.platform_name}-{team}-budget-{percent}pct",
            alarm_description=(
                f"Team {team} spent {percent}% of its monthly budget of {budget:g} USD "
                "(ftl:teams limits.monthly_budget_usd)"
            ),
            metric=self.metric(
                "MonthSpendUsd", statistic="Maximum", team=team, period=Duration.hours(1)
            ),
            threshold=round(budget * fraction, 2),
            comparison_operator=(
                aws_cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
            ),
            evaluation_periods=1,
            treat_missing_data=aws_cloudwatch.TreatMissingData.IGNORE,
        )
