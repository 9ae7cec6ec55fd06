"""The launcher stack in queue mode (``ftl:scheduler=queue``, docs/QUEUE.md) and in direct mode:
the Batch queue wired to the trigger and to job events, and the fleet dashboard in both."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from jobmodel.fleet_metrics import NAMESPACE
from tests.infra.synth import (
    QUEUE_CONTEXT,
    QUEUE_TEAMS_CONTEXT,
    QUOTA_TEAMS_CONTEXT,
    template,
)

QUEUE_ARN = {"Fn::GetAtt": [Match.any_value(), "JobQueueArn"]}


@pytest.fixture(scope="module")
def direct():
    return template("launcher")


@pytest.fixture(scope="module")
def queue():
    return template("launcher", **QUEUE_CONTEXT)


@pytest.fixture(scope="module")
def queue_teams():
    return template("launcher", **QUEUE_TEAMS_CONTEXT)


@pytest.fixture(scope="module")
def quota_teams():
    return template("launcher", **QUOTA_TEAMS_CONTEXT)


# ------------------------------------------------------------------------------ helpers
def _actions(statement):
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def _resources(statement):
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


def _trigger(t):
    (fn_id,) = t.find_resources(
        "AWS::Lambda::Function",
        {"Properties": {"Environment": {"Variables": {"FTL_SOURCE_S3_URI": Match.any_value()}}}},
    )
    return fn_id, t.to_json()["Resources"][fn_id]


def _trigger_statements(t):
    """Every statement of every IAM policy attached to the trigger's role."""
    _, fn = _trigger(t)
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = t.find_resources(
        "AWS::IAM::Policy", {"Properties": {"Roles": Match.array_with([{"Ref": role}])}}
    )
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _joined(value):
    """A resource ARN as text, with ``Ref``/``Fn::ImportValue`` parts shown as ``<...>``."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_joined(p) for p in value["Fn::Join"][1])
    return "<" + json.dumps(value, sort_keys=True) + ">"


def _events_function(t):
    # The trigger has FTL_TOPIC_ARN too (it announces the ends it records, issue 30).
    (fn_id,) = t.find_resources(
        "AWS::Lambda::Function",
        {
            "Properties": {
                "Environment": {"Variables": {"FTL_TOPIC_ARN": Match.any_value()}},
                "Description": Match.string_like_regexp("state changes"),
            }
        },
    )
    return fn_id


# ------------------------------------------------------------------------- direct mode
def test_direct_mode_has_no_batch_resources(direct):
    types = {r["Type"] for r in direct.to_json()["Resources"].values()}
    assert not [t for t in types if t.startswith("AWS::Batch::")]
    assert "JobQueueArn" not in direct.find_outputs("*")
    env = _trigger(direct)[1]["Properties"]["Environment"]["Variables"]
    assert env.get("FTL_SCHEDULER") == "direct" and "FTL_JOB_QUEUE" not in env
    actions = {a for s in _trigger_statements(direct) for a in _actions(s)}
    assert not [a for a in actions if a.startswith("batch:")]
    assert "sagemaker:CreateTrainingJob" in actions
    # job events hear SageMaker's state changes only, of training jobs and (issue 37) of
    # sweeps' tuning jobs (the other rules run the price refresh)
    assert len(_rules_of(direct, _events_function(direct))) == 2


def test_direct_mode_has_the_dashboard_and_the_wait_alarm(direct):
    assert "FleetDashboardName" in direct.find_outputs("*")
    direct.has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardName": "ftl-fleet"})
    direct.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "QueueWaitSeconds",
            "Namespace": NAMESPACE,
            "Threshold": 3600,
            "AlarmActions": [{"Ref": Match.any_value()}],
        },
    )


# ------------------------------------------------------------------ queue infrastructure
def test_service_environment_and_queue_follow_the_context(queue):
    queue.has_resource_properties(
        "AWS::Batch::ServiceEnvironment",
        {
            "ServiceEnvironmentType": "SAGEMAKER_TRAINING",
            "CapacityLimits": [{"CapacityUnit": "NUM_INSTANCES", "MaxCapacity": 8}],
        },
    )
    # The queue's own shape (service environment order, time limits) is the construct's test
    # (tests/infra/test_job_queue.py); here: the stack names it and takes the context's limit.
    queue.has_resource_properties(
        "AWS::Batch::JobQueue",
        {
            "JobQueueName": "ftl-training",
            "JobQueueType": "SAGEMAKER_TRAINING",
            "JobStateTimeLimitActions": Match.array_with(
                [Match.object_like({"State": "RUNNABLE", "MaxTimeSeconds": 1800})]
            ),
        },
    )
    queue.has_resource_properties(
        "AWS::Batch::SchedulingPolicy",
        {
            "FairsharePolicy": {
                "ShareDistribution": [{"ShareIdentifier": "default", "WeightFactor": 1}]
            }
        },
    )
    queue.resource_count_is("AWS::Batch::QuotaShare", 0)


def test_fair_share_weights_come_from_the_teams(queue_teams):
    queue_teams.has_resource_properties(
        "AWS::Batch::SchedulingPolicy",
        {
            "FairsharePolicy": {
                "ShareDistribution": [
                    {"ShareIdentifier": "teamXa", "WeightFactor": 0.5},  # weight 2
                    {"ShareIdentifier": "teamXb", "WeightFactor": 1},
                ]
            },
            "QuotaSharePolicy": Match.absent(),
        },
    )
    queue_teams.has_resource_properties(
        "AWS::Batch::ServiceEnvironment",
        {"CapacityLimits": [{"CapacityUnit": "NUM_INSTANCES", "MaxCapacity": 16}]},
    )


def test_quota_share_splits_the_capacity_by_team_weight(quota_teams):
    quota_teams.has_resource_properties(
        "AWS::Batch::SchedulingPolicy",
        {
            "QuotaSharePolicy": {"IdleResourceAssignmentStrategy": "FIFO"},
            "FairsharePolicy": Match.absent(),
        },
    )
    for team, instances in (("team-a", 8), ("team-b", 4)):
        quota_teams.has_resource_properties(
            "AWS::Batch::QuotaShare",
            {
                "QuotaShareName": team,
                "JobQueue": QUEUE_ARN,
                "CapacityLimits": [{"CapacityUnit": "NUM_INSTANCES", "MaxCapacity": instances}],
                "ResourceSharingConfiguration": {"Strategy": "LEND_AND_BORROW"},
            },
        )
    quota_teams.resource_count_is("AWS::Batch::QuotaShare", 2)


# ----------------------------------------------------------------------------- trigger
def test_trigger_environment_names_the_scheduler_and_the_queue(queue):
    queue.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "FTL_SCHEDULER": "queue",
                        "FTL_JOB_QUEUE": QUEUE_ARN,
                        "FTL_QUEUE_SHARE_POLICY": "fairshare",
                        "FTL_QUEUE_CAPACITY": "8",
                    }
                )
            }
        },
    )


def test_trigger_submits_to_this_queue_only_and_passes_only_the_team_roles(queue_teams):
    statements = _trigger_statements(queue_teams)
    (submit,) = [s for s in statements if "batch:SubmitServiceJob" in _actions(s)]
    # Both resource types SubmitServiceJob requires: this queue and the new service job.
    queue_arn, service_job = _resources(submit)
    assert queue_arn["Fn::GetAtt"][1] == "JobQueueArn"
    assert _joined(service_job).endswith(":service-job/*")
    assert set(_actions(submit)) <= {"batch:SubmitServiceJob", "batch:TerminateServiceJob"}
    for s in statements:
        if "*" in _resources(s):
            # Describe/ListServiceJobs, ListServiceQuotas and ListModelPackages (the model
            # registry) take no resource type: only "*" grants them.
            assert set(_actions(s)) <= {
                "batch:DescribeServiceJob",
                "batch:ListServiceJobs",
                "servicequotas:ListServiceQuotas",
                "sagemaker:ListModelPackages",
            }, s
    (passrole,) = [s for s in statements if "iam:PassRole" in _actions(s)]
    roles = _resources(passrole)
    # The team roles' ARNs come from the foundation's SSM parameters, not from exports.
    assert sorted(_ssm_parameter(queue_teams, r) for r in roles) == [
        f"/fine-tuning/ftl/teams/{t}/training-role-arn" for t in ("team-a", "team-b")
    ]
    assert passrole["Condition"] == {
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}
    }


def test_queue_mode_trigger_creates_no_training_job_but_describes_and_stops(queue_teams):
    statements = _trigger_statements(queue_teams)
    actions = {a for s in statements for a in _actions(s)}
    assert not {"sagemaker:CreateTrainingJob", "sagemaker:AddTags"} & actions
    assert {s.get("Sid") for s in statements} >= {"ReadPlatformJobs", "StopPlatformJobs"}
    for sid in ("ReadPlatformJobs", "StopPlatformJobs"):
        (s,) = [s for s in statements if s.get("Sid") == sid]
        names = sorted(_joined(r).rsplit("training-job/", 1)[1] for r in _resources(s))
        # jobs the trigger started before a switch to queue mode, and those Batch names
        assert names == [
            "AWSBatchteam-a-*",
            "AWSBatchteam-b-*",
            "awsbatchteam-a-*",
            "awsbatchteam-b-*",
            "team-a-*",
            "team-b-*",
        ]
        assert s["Condition"] == {"StringEquals": {"aws:ResourceTag/ftl:platform": "ftl"}}


def test_single_team_queue_passes_the_training_role(queue):
    statements = _trigger_statements(queue)
    (passrole,) = [s for s in statements if "iam:PassRole" in _actions(s)]
    (role,) = _resources(passrole)
    assert _ssm_parameter(queue, role) == "/fine-tuning/ftl/training-role-arn"


def _rules_of(template, function: str) -> list[str]:
    """The EventBridge rules (logical IDs) that have the function as a target."""
    return [
        logical
        for logical, rule in template.find_resources("AWS::Events::Rule").items()
        if any(t["Arn"] == {"Fn::GetAtt": [function, "Arn"]} for t in rule["Properties"]["Targets"])
    ]


def _ssm_parameter(template, ref: dict) -> str:
    """The SSM parameter name behind a ``Ref`` of an SSM-typed template parameter."""
    parameter = template.to_json()["Parameters"][ref["Ref"]]
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    return parameter["Default"]


# ------------------------------------------------------------------------- job events
def test_batch_state_changes_of_this_queue_go_to_job_events(queue):
    events_fn = _events_function(queue)
    queue.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.batch"],
                "detail-type": ["Batch Service Job State Change"],
                "detail": {"jobQueue": [QUEUE_ARN]},
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Fn::GetAtt": [events_fn, "Arn"]},
                        "DeadLetterConfig": Match.any_value(),
                        "RetryPolicy": {
                            "MaximumEventAgeInSeconds": 21600,
                            "MaximumRetryAttempts": 8,
                        },
                    }
                )
            ],
        },
    )


def test_only_eventbridge_invokes_job_events_once_per_rule(queue):
    events_fn = _events_function(queue)
    rules = sorted(_rules_of(queue, events_fn))
    assert len(rules) == 3  # training jobs, Batch's service jobs, sweeps' tuning jobs
    permissions = [
        p["Properties"]
        for p in queue.find_resources("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [events_fn, "Arn"]}
    ]
    assert sorted(permissions, key=lambda p: p["SourceArn"]["Fn::GetAtt"][0]) == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [events_fn, "Arn"]},
            "Principal": "events.amazonaws.com",
            "SourceArn": {"Fn::GetAtt": [rule, "Arn"]},
        }
        for rule in rules
    ]


def test_job_events_knows_the_platform_name(queue):
    queue.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Environment": {
                "Variables": Match.object_like(
                    {"FTL_TOPIC_ARN": Match.any_value(), "FTL_PLATFORM_NAME": "ftl"}
                )
            }
        },
    )


# -------------------------------------------------------------------------- dashboard
def test_dashboard_alarms_notify_the_platform_topic(queue_teams):
    t = queue_teams
    # The platform's topic (the one the stack outputs; the teams have topics of their own).
    (output,) = t.find_outputs("JobEventsTopicArn").values()
    topic = output["Value"]["Ref"]
    for fraction in (0.8, 1.0):
        t.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            {
                "AlarmName": f"ftl-team-a-budget-{int(fraction * 100)}pct",
                "MetricName": "MonthSpendUsd",
                "Namespace": NAMESPACE,
                "Dimensions": Match.array_with([{"Name": "Team", "Value": "team-a"}]),
                "Threshold": 5000 * fraction,
                "AlarmActions": [{"Ref": topic}],
            },
        )
    t.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "QueueWaitSeconds", "Threshold": 3600, "AlarmActions": [{"Ref": topic}]},
    )
    t.resource_count_is("AWS::CloudWatch::Alarm", 3)  # team-b has no budget
    t.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "CloudWatchAlarmsPublish",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": "sns:Publish",
                                "Condition": {
                                    "StringEquals": {"aws:SourceAccount": "123456789012"},
                                    "ArnLike": {"aws:SourceArn": Match.any_value()},
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_platform_key_lets_cloudwatch_use_it_only_for_the_platforms_alarms():
    key = template("foundation", **QUEUE_CONTEXT).find_resources("AWS::KMS::Key")
    ((_, resource),) = key.items()
    (stmt,) = [
        s
        for s in resource["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert stmt["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert stmt["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    alarms = _joined(stmt["Condition"]["ArnLike"]["aws:SourceArn"])
    assert alarms.endswith(":cloudwatch:us-east-1:123456789012:alarm:ftl-*")


def test_queue_wait_alarm_follows_the_context(queue):
    queue.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmName": "ftl-queue-wait-over-45m",
            "MetricName": "QueueWaitSeconds",
            "Statistic": "Maximum",
            "Threshold": 2700,
        },
    )


def test_outputs_name_the_queue_and_the_dashboard(queue):
    outputs = queue.find_outputs("*")
    assert outputs["JobQueueArn"]["Value"]["Fn::GetAtt"][1] == "JobQueueArn"
    (dashboard,) = queue.find_resources("AWS::CloudWatch::Dashboard")
    assert outputs["FleetDashboardName"]["Value"] == {"Ref": dashboard}


# -------------------------------------------------------------------- sweeps (issue 37)
TUNER_ACTIONS = {
    "sagemaker:CreateHyperParameterTuningJob",
    "sagemaker:DescribeHyperParameterTuningJob",
    "sagemaker:ListTrainingJobsForHyperParameterTuningJob",
    "sagemaker:StopHyperParameterTuningJob",
}


def test_queue_mode_grants_the_tuner_only_when_sweeps_run_beside_the_queue(queue):
    """``ftl:queueSweeps``: ``off`` (the default) keeps the trigger off the tuner;
    ``outside-queue`` gives it a direct deployment's tuner statements and the variable."""
    off = {a for s in _trigger_statements(queue) for a in _actions(s)}
    assert not off & TUNER_ACTIONS
    assert "FTL_QUEUE_SWEEPS" not in _trigger(queue)[1]["Properties"]["Environment"]["Variables"]
    beside = template("launcher", **QUEUE_CONTEXT, **{"ftl:queueSweeps": "outside-queue"})
    statements = _trigger_statements(beside)
    assert TUNER_ACTIONS <= {a for s in statements for a in _actions(s)}
    create = next(s for s in statements if s.get("Sid") == "CreateCatalogSweeps")
    assert "sagemaker:InstanceTypes" in create["Condition"]["ForAllValues:StringEquals"]
    env = _trigger(beside)[1]["Properties"]["Environment"]["Variables"]
    assert env["FTL_QUEUE_SWEEPS"] == "outside-queue"


def test_a_bad_queue_sweeps_value_names_the_key():
    from ftl_constructs.settings import ContextError

    with pytest.raises(ContextError, match="queueSweeps"):
        template("launcher", **QUEUE_CONTEXT, **{"ftl:queueSweeps": "yes"})
