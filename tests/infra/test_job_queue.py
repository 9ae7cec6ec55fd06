"""The Batch job queue construct, the fleet dashboard, and the queue context keys."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam, aws_sns
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint
from cfnlint.helpers import REGIONS

from ftl_constructs.fleet_dashboard import FleetDashboard
from ftl_constructs.job_queue import JobQueue, weight_factor
from ftl_constructs.settings import ContextError, PlatformSettings, QueueSettings
from jobmodel.fleet_metrics import NAMESPACE
from jobmodel.teams import TeamsConfig

ACCOUNT = "123456789012"
TEAMS = TeamsConfig.parse(
    [
        {
            "name": "team-a",
            "principals": [f"arn:aws:iam::{ACCOUNT}:role/a"],
            "weight": 2,
            "limits": {"monthly_budget_usd": 1000},
        },
        {"name": "team-b", "principals": [f"arn:aws:iam::{ACCOUNT}:role/b"]},
        {
            "name": "team-c",
            "principals": [f"arn:aws:iam::{ACCOUNT}:role/c"],
            "weight": 0.5,
            "limits": {"monthly_budget_usd": 250},
        },
    ]
)
ROLES = [f"arn:aws:iam::{ACCOUNT}:role/ftl-train-{t}" for t in ("team-a", "team-b", "team-c")]


def build(settings: QueueSettings, teams: TeamsConfig = TEAMS):
    app = cdk.App()
    stack = cdk.Stack(app, "QueueTest", env=cdk.Environment(account=ACCOUNT, region="us-east-1"))
    queue = JobQueue(stack, "JobQueue", platform_name="ftl", settings=settings, teams=teams)
    submitter = aws_iam.Role(
        stack, "Submitter", assumed_by=aws_iam.ServicePrincipal("lambda.amazonaws.com")
    )
    queue.grant_submit(submitter, training_role_arns=ROLES)
    topic = aws_sns.Topic(stack, "Alarms", enforce_ssl=True)
    FleetDashboard(
        stack, "Fleet", platform_name="ftl", teams=teams, queue=settings, alarm_topic=topic
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # cdk-nag v3 fails synth on an unacknowledged finding (before any Template)
    return app, stack, Template.from_stack(stack)


QUEUE_SETTINGS = QueueSettings(scheduler="queue", capacity_instances=4, head_timeout_minutes=30)


@pytest.fixture(scope="module")
def fair():
    return build(QUEUE_SETTINGS)


@pytest.fixture(scope="module")
def quota():
    return build(QueueSettings(scheduler="queue", capacity_instances=12, share_policy="quotashare"))


def test_service_environment_has_an_instance_limit(fair):
    fair[2].has_resource_properties(
        "AWS::Batch::ServiceEnvironment",
        {
            "ServiceEnvironmentType": "SAGEMAKER_TRAINING",
            "CapacityLimits": [{"CapacityUnit": "NUM_INSTANCES", "MaxCapacity": 4}],
        },
    )


def test_queue_is_sagemaker_typed_with_head_time_limit(fair):
    fair[2].has_resource_properties(
        "AWS::Batch::JobQueue",
        {
            "JobQueueType": "SAGEMAKER_TRAINING",
            "ServiceEnvironmentOrder": [
                {
                    "Order": 1,
                    "ServiceEnvironment": {
                        "Fn::GetAtt": [Match.any_value(), "ServiceEnvironmentArn"]
                    },
                }
            ],
            "SchedulingPolicyArn": {"Fn::GetAtt": [Match.any_value(), "Arn"]},
            # TERMINATE (a SageMaker queue accepts no other action), once per reason Batch
            # can act on; a job merely waiting its turn has none of these reasons.
            "JobStateTimeLimitActions": [
                {
                    "Action": "TERMINATE",
                    "State": "RUNNABLE",
                    "MaxTimeSeconds": 1800,
                    "Reason": reason,
                }
                for reason in (
                    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
                    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
                )
            ],
        },
    )


def test_fair_share_weights_are_inverted_for_batch(fair):
    fair[2].has_resource_properties(
        "AWS::Batch::SchedulingPolicy",
        {
            "FairsharePolicy": {
                "ShareDistribution": [
                    {"ShareIdentifier": "teamXa", "WeightFactor": 0.5},
                    {"ShareIdentifier": "teamXb", "WeightFactor": 1},
                    {"ShareIdentifier": "teamXc", "WeightFactor": 2},
                ]
            }
        },
    )
    assert weight_factor(1000) == 0.001 and weight_factor(0.0001) == 999.9999


def test_single_team_uses_a_default_share():
    _, _, t = build(QUEUE_SETTINGS, TeamsConfig())
    t.has_resource_properties(
        "AWS::Batch::SchedulingPolicy",
        {
            "FairsharePolicy": {
                "ShareDistribution": [{"ShareIdentifier": "default", "WeightFactor": 1}]
            }
        },
    )


def test_quota_share_policy_splits_capacity_by_weight(quota):
    t = quota[2]
    t.has_resource_properties(
        "AWS::Batch::SchedulingPolicy",
        {
            "QuotaSharePolicy": {"IdleResourceAssignmentStrategy": "FIFO"},
            "FairsharePolicy": Match.absent(),
        },
    )
    shares = t.find_resources("AWS::Batch::QuotaShare")
    slices = {
        r["Properties"]["QuotaShareName"]: r["Properties"]["CapacityLimits"][0]["MaxCapacity"]
        for r in shares.values()
    }
    assert slices == {"team-a": 6, "team-b": 3, "team-c": 1}
    for r in shares.values():
        assert r["Properties"]["ResourceSharingConfiguration"] == {"Strategy": "LEND_AND_BORROW"}
    # A job over its quota share's limit is one more reason the head time limit acts on.
    (queue,) = t.find_resources("AWS::Batch::JobQueue").values()
    actions = queue["Properties"]["JobStateTimeLimitActions"]
    assert [a["Reason"] for a in actions] == [
        "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
        "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    ]
    assert {a["Action"] for a in actions} == {"TERMINATE"}


def _statements(t):
    (doc,) = t.find_resources("AWS::IAM::Policy").values()
    return doc["Properties"]["PolicyDocument"]["Statement"]


def test_submitter_may_submit_to_this_queue_only(fair):
    stmts = _statements(fair[2])
    (submit,) = [s for s in stmts if s["Action"] == "batch:SubmitServiceJob"]
    # The queue and the new service job: both resource types the action requires.
    queue, service_job = submit["Resource"]
    assert queue["Fn::GetAtt"][1] == "JobQueueArn"
    joined = "".join(p if isinstance(p, str) else "" for p in service_job["Fn::Join"][1])
    assert joined.endswith(":service-job/*")
    (passrole,) = [s for s in stmts if s["Action"] == "iam:PassRole"]
    assert sorted(passrole["Resource"]) == sorted(ROLES)
    assert passrole["Condition"] == {
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
    }
    actions = {
        a for s in stmts for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert actions == {
        "batch:SubmitServiceJob",
        "batch:ListServiceJobs",
        "batch:GetJobQueueSnapshot",
        "batch:DescribeServiceJob",
        "batch:TerminateServiceJob",
        "batch:TagResource",
        "iam:PassRole",
    }
    assert not any(a.startswith("sagemaker:") for a in actions)
    # Describe/ListServiceJobs take no resource type: "*" is the only resource that grants them.
    (follow,) = [s for s in stmts if "batch:DescribeServiceJob" in s["Action"]]
    assert follow["Resource"] == "*"
    assert sorted(follow["Action"]) == ["batch:DescribeServiceJob", "batch:ListServiceJobs"]
    (stop,) = [s for s in stmts if "batch:TerminateServiceJob" in s["Action"]]
    joined = "".join(p if isinstance(p, str) else "" for p in stop["Resource"]["Fn::Join"][1])
    assert joined == "arn::batch:us-east-1:123456789012:service-job/*"


def test_dashboard_and_alarms(fair):
    t = fair[2]
    (dash,) = t.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dash["Properties"]["DashboardBody"])
    for needle in (
        NAMESPACE,
        "InstancesRunningChange",
        "InstancesQueuedChange",
        "p50",
        "p90",
        "JobsStarted",
        "JobsFailed",
        "JobsStopped",
        "SpotSavingsUsd",
        "MonthSpendUsd",
        "RUNNING_SUM",
        "team-a budget",
        # Each team's Batch share, as the queue's jobs carry it
        # (jobmodel.capacity.scheduler.share_of)
        "Batch shares (fairshare)",
        "| team-a | `teamXa` |",
    ):
        assert needle in body, needle
    for team, budget in (("team-a", 1000), ("team-c", 250)):
        for fraction in (0.8, 1.0):
            t.has_resource_properties(
                "AWS::CloudWatch::Alarm",
                {
                    "MetricName": "MonthSpendUsd",
                    "Namespace": NAMESPACE,
                    "Dimensions": Match.array_with([{"Name": "Team", "Value": team}]),
                    "Threshold": budget * fraction,
                    "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                    "AlarmActions": [{"Ref": Match.any_value()}],
                },
            )
    assert len(t.find_resources("AWS::CloudWatch::Alarm")) == 5  # team-b has no budget
    t.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "QueueWaitSeconds", "Statistic": "Maximum", "Threshold": 3600},
    )


@pytest.mark.parametrize("which", ["fair", "quota"])
def test_cdk_nag_and_cfn_lint_are_clean(which, request):
    _, _, t = request.getfixturevalue(which)  # built with cdk-nag: synth passed
    # AWS::Batch::QuotaShare is not offered in me-central-1 (cfn-lint's region data): a
    # quota-share deployment needs another region; everything else lints in every region.
    regions = [r for r in REGIONS if not (which == "quota" and r == "me-central-1")]
    config = ManualArgs(include_checks=["I"], include_experimental=True, regions=regions)
    matches = lint(json.dumps(t.to_json()), config=config)
    errors = [m for m in matches if m.rule.id.startswith("E")]
    assert not errors, "\n".join(str(m) for m in errors)


def test_queue_context_keys():
    s = PlatformSettings.from_mapping({})
    assert s.queue == QueueSettings() and not s.queue.enabled
    s = PlatformSettings.from_mapping(
        {
            "scheduler": "queue",
            "queueCapacityInstances": "8",
            "queueHeadTimeoutMinutes": 15,
            "queueSharePolicy": "quotashare",
            "queueWaitAlarmMinutes": 30,
        }
    )
    assert s.queue == QueueSettings("queue", 8, 15, "quotashare", 30) and s.queue.enabled


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("scheduler", "batch"),
        ("queueCapacityInstances", 0),
        ("queueHeadTimeoutMinutes", 5),
        ("queueHeadTimeoutMinutes", 1441),
        ("queueSharePolicy", "fifo"),
        ("queueWaitAlarmMinutes", True),
    ],
)
def test_bad_queue_context_names_the_key(key, value):
    with pytest.raises(ContextError) as err:
        PlatformSettings.from_mapping({key: value})
    assert err.value.key == f"ftl:{key}"


def test_sandbox_stand_in_reads_the_synthesized_queue(fair):
    from sandbox.batch import BatchStandIn
    from sandbox.batch_api import configure_from_template

    standin = BatchStandIn(sagemaker=object())
    queues = configure_from_template(standin, fair[2].to_json())
    assert list(queues) == ["ftl-training"]
    q = standin.queues["ftl-training"]
    assert (q.capacity, q.head_timeout_s, q.share_policy) == (4, 1800.0, "fairshare")
    assert q.head_reasons == (
        "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
    )
    assert q.weight_factors == {"teamXa": 0.5, "teamXb": 1.0, "teamXc": 2.0}
