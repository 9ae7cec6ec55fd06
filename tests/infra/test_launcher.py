"""The launcher stack: guardrails in IAM, the HTTP API, the ledger and job events."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match

from ftl_constructs.job_template import TrainingJobTemplate
from jobmodel import TemplateError, shipped_catalog
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.routes import ROUTES
from jobmodel.instances import INSTANCE_TYPES
from jobmodel.platform import PlatformConfig
from tests.infra.synth import template


@pytest.fixture(scope="module")
def launcher():
    return template("launcher")


@pytest.fixture(scope="module")
def launcher_vpc():
    return template("launcher", **{"ftl:network": "new"})


def _statements(t, path_regex):
    docs = t.find_resources(
        "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp(path_regex)}}
    )
    (doc,) = docs.values()
    return {s.get("Sid"): s for s in doc["Properties"]["PolicyDocument"]["Statement"]}


def test_create_training_job_is_pinned_by_condition_keys(launcher):
    s = _statements(launcher, "TriggerPolicy")["CreateCatalogJobsOnly"]
    cond = s["Condition"]
    types = cond["ForAllValues:StringEquals"]["sagemaker:InstanceTypes"]
    catalog_types = {t for spec in shipped_catalog().values() for t in spec.instance_types}
    assert set(types) == catalog_types
    assert cond["NumericLessThanEquals"]["sagemaker:MaxRuntimeInSeconds"] == str(
        max(spec.max_runtime_seconds for spec in shipped_catalog().values())
    )
    assert "sagemaker:OutputKmsKeyArn" in cond["ArnEquals"]
    assert "sagemaker:VolumeKmsKeyArn" in cond["ArnEqualsIfExists"]
    assert cond["StringEquals"] == {"aws:RequestTag/ftl:platform": "ftl"}
    assert cond["Bool"] == {
        "sagemaker:NetworkIsolation": "false",
        "sagemaker:InterContainerTrafficEncryption": "false",
    }


def test_vpc_mode_pins_subnets_and_security_groups(launcher_vpc):
    cond = _statements(launcher_vpc, "TriggerPolicy")["CreateCatalogJobsOnly"]["Condition"]
    assert len(cond["ForAllValues:StringEquals"]["sagemaker:VpcSubnets"]) == 2
    assert len(cond["ForAllValues:StringEquals"]["sagemaker:VpcSecurityGroupIds"]) == 1
    assert cond["Null"] == {
        "sagemaker:InstanceTypes": "false",
        "sagemaker:VpcSubnets": "false",
        "sagemaker:VpcSecurityGroupIds": "false",
    }


def test_pass_role_only_for_the_training_role_to_sagemaker(launcher):
    s = _statements(launcher, "TriggerPolicy")["PassTrainingRoleToSageMaker"]
    assert s["Action"] == "iam:PassRole"
    assert s["Resource"] != "*"
    assert s["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}


def test_stop_only_for_platform_tagged_jobs(launcher):
    s = _statements(launcher, "TriggerPolicy")["StopPlatformJobs"]
    assert s["Condition"] == {"StringEquals": {"aws:ResourceTag/ftl:platform": "ftl"}}


def test_trigger_has_no_wildcard_actions_and_no_managed_policies(launcher):
    for stmt in _statements(launcher, "TriggerPolicy").values():
        actions = stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]]
        assert not any("*" in a for a in actions), stmt
    roles = launcher.find_resources("AWS::IAM::Role")
    assert all("ManagedPolicyArns" not in r["Properties"] for r in roles.values())


def test_every_route_requires_iam_auth(launcher):
    routes = launcher.find_resources("AWS::ApiGatewayV2::Route")
    assert {r["Properties"]["RouteKey"] for r in routes.values()} == {
        "POST /jobs",
        "GET /jobs",
        "GET /jobs/{job_name}",
        "GET /models",
        "POST /jobs/{job_name}/review",
        "POST /jobs/{job_name}/stop",
        "POST /sweeps",
        "GET /templates",
        "GET /whoami",
    }
    assert all(r["Properties"]["AuthorizationType"] == "AWS_IAM" for r in routes.values())


def test_api_stage_has_access_logs_and_throttling(launcher):
    launcher.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "$default",
            "AccessLogSettings": {
                "DestinationArn": Match.any_value(),
                "Format": Match.string_like_regexp("userArn"),
            },
            "DefaultRouteSettings": {"ThrottlingRateLimit": 20, "ThrottlingBurstLimit": 40},
        },
    )


def test_ledger_is_encrypted_recoverable_and_retained(launcher):
    launcher.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "SSESpecification": {
                    "SSEEnabled": True,
                    "SSEType": "KMS",
                    "KMSMasterKeyId": Match.any_value(),
                },
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "GlobalSecondaryIndexes": [
                    Match.object_like({"IndexName": "by-created"}),
                    Match.object_like(
                        {
                            "IndexName": "by-team",
                            "KeySchema": [
                                {"AttributeName": "team", "KeyType": "HASH"},
                                {"AttributeName": "gsi_sk", "KeyType": "RANGE"},
                            ],
                        }
                    ),
                    # the sweep's (issue 30): only jobs still claimed or owing end effects
                    Match.object_like(
                        {
                            "IndexName": "needs-care",
                            "KeySchema": [
                                {"AttributeName": "care", "KeyType": "HASH"},
                                {"AttributeName": "gsi_sk", "KeyType": "RANGE"},
                            ],
                        }
                    ),
                ],
            },
            "DeletionPolicy": "Retain",
        },
    )


def test_trigger_gets_its_configuration_from_the_stacks(launcher):
    launcher.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "handler.handler",
            "Architectures": ["arm64"],
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "FTL_PLATFORM_NAME": "ftl",
                        "FTL_REGION": "us-east-1",
                        "FTL_ROLE_ARN": Match.any_value(),
                        "FTL_SOURCE_S3_URI": Match.any_value(),
                        "FTL_JOB_TABLE": Match.any_value(),
                        "FTL_KMS_KEY_ARN": Match.any_value(),
                    }
                )
            },
        },
    )


def test_job_events_rule_matches_only_this_platforms_jobs(launcher):
    launcher.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.sagemaker"],
                "detail-type": ["SageMaker Training Job State Change"],
                "detail": {"RoleArn": [Match.any_value()]},
            },
            "Targets": [
                Match.object_like(
                    {"DeadLetterConfig": Match.any_value(), "RetryPolicy": Match.any_value()}
                )
            ],
        },
    )


def test_topic_is_encrypted_with_the_platform_key(launcher):
    launcher.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


def test_contract_outputs_live_on_the_stack_that_owns_them(launcher):
    outputs = launcher.find_outputs("*")
    for name in (
        "TriggerFunctionName",
        "TriggerFunctionArn",
        "JobApiUrl",
        "JobTableName",
        "JobEventsTopicArn",
    ):
        assert name in outputs
    foundation = template("foundation").find_outputs("*")
    for name in ("DataBucketName", "CheckpointBucketName", "ArtifactBucketName", "TrainingRoleArn"):
        assert name in foundation


def test_training_role_may_pull_only_the_catalogs_images():
    t = template("foundation")
    docs = t.find_resources("AWS::IAM::Policy")
    pulls = [
        s
        for d in docs.values()
        for s in d["Properties"]["PolicyDocument"]["Statement"]
        if "ecr:BatchGetImage" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    resources = {
        json.dumps(r)
        for s in pulls
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    # The catalog's images: Hugging Face training images, and the SMP v2 image of llm-smp-v2.
    repos = ("repository/huggingface-pytorch-training", "repository/smdistributed-modelparallel")
    assert resources and all(any(repo in r for repo in repos) for r in resources)
    assert any(repos[1] in r for r in resources)


def _bad_spec(**changes):
    spec = shipped_catalog()["bert-large-qa"]
    data = {**spec.to_dict(), "name": "bad-template", **changes}
    return type(spec).from_dict(data)


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        (
            {"instance_types": ["ml.g5.xlarge"], "default_instance_type": "ml.g5.xlarge"},
            "smddp-instance",
        ),
        (
            {
                "max_wait_seconds": 3600,
                "max_runtime_seconds": 7200,
                "default_runtime_seconds": 3600,
            },
            "max-wait",
        ),
        ({"checkpoint": False}, "spot-checkpoint"),
        (
            {
                "framework": {
                    "transformers_version": "0.0.1",
                    "pytorch_version": "0.1",
                    "py_version": "py27",
                }
            },
            "image",
        ),
    ],
)
def test_a_bad_python_template_fails_synth_naming_template_and_rule(changes, rule):
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-east-1"))
    try:
        spec = _bad_spec(**changes)
    except TemplateError as err:  # some rules already fire when the spec is built
        assert err.template == "bad-template" and err.rule == rule
        return
    with pytest.raises(TemplateError) as err:
        TrainingJobTemplate(stack, "Bad", spec=spec)
    assert err.value.template == "bad-template" and err.value.rule == rule
    assert "bad-template" in str(err.value) and rule in str(err.value)


def test_catalog_file_adds_templates_and_bad_ones_fail_synth(tmp_path):
    good = dict(shipped_catalog()["distilbert-spot"].to_dict(), name="team-distilbert")
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"version": 1, "templates": [good]}))
    t = template("launcher", **{"ftl:catalogFile": str(path)})
    env = t.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "handler.handler"}})
    assert env  # synthesized with the extra template; the catalog ships in the asset
    bad = dict(good, name="team-bad", spot=True, checkpoint=False)
    path.write_text(json.dumps({"version": 1, "templates": [bad]}))
    with pytest.raises(TemplateError) as err:
        template("launcher", **{"ftl:catalogFile": str(path), "ftl:platformName": "ftl2"})
    assert err.value.template == "team-bad"


# --- IAM hardening (issue 9): each statement asserted -------------------------------------


def test_create_requires_the_instance_type_key_and_refuses_vpc_config_without_a_vpc(launcher):
    cond = _statements(launcher, "TriggerPolicy")["CreateCatalogJobsOnly"]["Condition"]
    # ForAllValues is true when the key is absent: Null makes the instance types mandatory.
    assert cond["Null"] == {
        "sagemaker:InstanceTypes": "false",
        "sagemaker:VpcSubnets": "true",
        "sagemaker:VpcSecurityGroupIds": "true",
    }
    assert cond["NumericLessThanEqualsIfExists"] == {
        "sagemaker:KeepAlivePeriod": str(
            max(spec.keep_alive_seconds for spec in shipped_catalog().values())
        )
    }
    assert s_resources(_statements(launcher, "TriggerPolicy")["CreateCatalogJobsOnly"]) == [
        "training-job/*"
    ]


def s_resources(statement):
    """The resource names of a statement's training-job ARNs (after 'training-job/')."""
    resources = statement["Resource"]
    resources = resources if isinstance(resources, list) else [resources]
    return [
        "training-job/" + json.dumps(r).split(":training-job/")[1].split('"')[0] for r in resources
    ]


def test_remote_debugging_is_denied(launcher):
    s = _statements(launcher, "TriggerPolicy")["DenyRemoteDebug"]
    assert s["Effect"] == "Deny"
    assert s["Action"] == "sagemaker:CreateTrainingJob"
    assert s["Condition"] == {"Bool": {"sagemaker:EnableRemoteDebug": "true"}}


def test_ebs_instance_types_must_name_a_volume_key(launcher):
    s = _statements(launcher, "TriggerPolicy")["DenyEbsVolumesWithoutPlatformKey"]
    assert s["Effect"] == "Deny" and s["Action"] == "sagemaker:CreateTrainingJob"
    assert s["Condition"]["Null"] == {"sagemaker:VolumeKmsKeyArn": "true"}
    ebs = set(s["Condition"]["ForAnyValue:StringEquals"]["sagemaker:InstanceTypes"])
    assert ebs == {n for n, i in INSTANCE_TYPES.items() if not i.local_nvme}
    for nvme in ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.g5.xlarge"):
        assert nvme not in ebs
    assert {"ml.p3.2xlarge", "ml.m5.xlarge"} <= ebs


def test_tags_only_at_creation(launcher):
    s = _statements(launcher, "TriggerPolicy")["TagJobsAtCreation"]
    assert s["Action"] == "sagemaker:AddTags"
    assert s["Condition"] == {"StringEquals": {"sagemaker:TaggingAction": "CreateTrainingJob"}}


def test_describe_only_platform_tagged_jobs(launcher):
    s = _statements(launcher, "TriggerPolicy")["ReadPlatformJobs"]
    assert s["Action"] == "sagemaker:DescribeTrainingJob"
    assert s["Condition"] == {"StringEquals": {"aws:ResourceTag/ftl:platform": "ftl"}}
    actions = [
        a
        for stmt in _statements(launcher, "TriggerPolicy").values()
        for a in (stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]])
        if a.startswith("sagemaker:") and stmt["Effect"] == "Allow"
    ]
    assert sorted(actions) == [
        "sagemaker:AddTags",
        "sagemaker:AddTags",  # a sweep's tuning job, at its creation (issue 37)
        # the model registry (issue 27; tests/infra/test_model_registry.py)
        "sagemaker:CreateHyperParameterTuningJob",
        "sagemaker:CreateModelPackage",
        "sagemaker:CreateTrainingJob",
        "sagemaker:DescribeHyperParameterTuningJob",
        "sagemaker:DescribeModelPackage",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:ListModelPackages",
        "sagemaker:ListTrainingJobs",
        "sagemaker:ListTrainingJobsForHyperParameterTuningJob",
        "sagemaker:StopHyperParameterTuningJob",
        "sagemaker:StopTrainingJob",
        "sagemaker:UpdateModelPackage",
        # an evaluation's results: metadata only (issue 36; tests/infra/test_model_registry.py)
        "sagemaker:UpdateModelPackage",
    ]
    # Whether a claim's unanswered start happened: listing has no resource-level permissions
    # (issue 30); it reads names and statuses only.
    (listing,) = [
        s
        for s in _statements(launcher, "TriggerPolicy").values()
        if s["Action"] == "sagemaker:ListTrainingJobs"
    ]
    assert listing["Resource"] == "*" and "Condition" not in listing


def _refs(value):
    return json.dumps(value)


def test_http_api_invokes_only_the_http_alias(launcher):
    aliases = launcher.find_resources("AWS::Lambda::Alias", {"Properties": {"Name": "http"}})
    (http_id,) = aliases
    integrations = launcher.find_resources("AWS::ApiGatewayV2::Integration")
    assert integrations and all(
        _refs(i["Properties"]["IntegrationUri"]) == _refs({"Ref": http_id})
        for i in integrations.values()
    )
    api_permissions = launcher.find_resources(
        "AWS::Lambda::Permission", {"Properties": {"Principal": "apigateway.amazonaws.com"}}
    )
    assert len(api_permissions) == len(ROUTES)
    assert all(
        p["Properties"]["FunctionName"] == {"Ref": http_id} for p in api_permissions.values()
    )
    # Single-team: the http alias is the only door for callers (the chain alias is the
    # job-events function's, issue 20; the sweep alias the sweep schedule's, issue 30), and no
    # per-team policies or outputs.
    names = {
        a["Properties"]["Name"] for a in launcher.find_resources("AWS::Lambda::Alias").values()
    }
    assert names == {"http", "chain", "sweep"}
    launcher.resource_count_is("AWS::IAM::ManagedPolicy", 0)
    assert not [o for o in launcher.find_outputs("*") if o.startswith(("Team", "Admin"))]


def test_single_team_environment_has_no_team_variables(launcher):
    (fn,) = launcher.find_resources(
        "AWS::Lambda::Function",
        {
            "Properties": {
                "Environment": {
                    "Variables": {
                        "FTL_JOB_TABLE": Match.any_value(),
                        "FTL_ROLE_ARN": Match.any_value(),
                    }
                }
            }
        },
    ).values()
    variables = fn["Properties"]["Environment"]["Variables"]
    config = PlatformConfig(
        region="r",
        role_arn="x",
        data_bucket="d",
        checkpoint_bucket="c",
        artifact_bucket="a",
        source_s3_uri="s3://b/k",
    )
    # The launcher writes exactly what PlatformConfig.to_env and a direct-mode
    # SchedulerConfig.to_env name (plus the ledger table, the topic it announces ends on and
    # the event bus of the notifications; no team topics).
    scheduler = SchedulerConfig(scheduler="direct")
    assert set(variables) == {
        *config.to_env(),
        *scheduler.to_env(),
        "FTL_JOB_TABLE",
        "FTL_TOPIC_ARN",
        "FTL_MODEL_REGISTRY",
        "FTL_EVENT_BUS",
    }
    assert variables["FTL_SCHEDULER"] == "direct"


def test_platform_config_env_round_trips():
    config = PlatformConfig(
        region="eu-west-1",
        role_arn="arn:aws:iam::123456789012:role/train",
        data_bucket="data",
        checkpoint_bucket="ckpt",
        artifact_bucket="art",
        kms_key_arn="arn:aws:kms:eu-west-1:123456789012:key/abc",
        subnets=("subnet-1", "subnet-2"),
        security_groups=("sg-1",),
        source_s3_uri="s3://assets/source.tar.gz",
        allowed_input_buckets=("shared",),
        platform_tags={"project": "x"},
        platform_name="ftl2",
    )
    assert PlatformConfig.from_env(config.to_env()) == config


def test_only_eventbridge_invokes_the_job_events_function_for_its_rule(launcher):
    (events_fn,) = launcher.find_resources(
        "AWS::Lambda::Function",
        {
            "Properties": {
                "Environment": {"Variables": {"FTL_TOPIC_ARN": Match.any_value()}},
                "Description": Match.string_like_regexp("state changes"),
            }
        },
    )
    rule_ids = [
        logical
        for logical, rule in launcher.find_resources("AWS::Events::Rule").items()
        if any(
            t["Arn"] == {"Fn::GetAtt": [events_fn, "Arn"]} for t in rule["Properties"]["Targets"]
        )
    ]
    # Training jobs' state changes, and (issue 37) sweeps' tuning jobs'.
    assert len(rule_ids) == 2
    permissions = [
        p["Properties"]
        for p in launcher.find_resources("AWS::Lambda::Permission").values()
        if events_fn in _refs(p["Properties"]["FunctionName"])
    ]
    assert sorted(permissions, key=str) == sorted(
        (
            {
                "Action": "lambda:InvokeFunction",
                "FunctionName": {"Fn::GetAtt": [events_fn, "Arn"]},
                "Principal": "events.amazonaws.com",
                "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]},
            }
            for rule_id in rule_ids
        ),
        key=str,
    )
