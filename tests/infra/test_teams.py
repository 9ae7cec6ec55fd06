"""Teams mode (two teams and an admin): per-team roles, aliases, managed policies, outputs."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match

from ftl_constructs.settings import ContextError
from jobmodel.contract.routes import ROUTES
from stacks.assembly import build_platform
from tests.infra.synth import BASE_CONTEXT, TEAMS_CONTEXT, template

TEAMS = ("team-a", "team-b")


@pytest.fixture(scope="module")
def launcher():
    return template("launcher", **TEAMS_CONTEXT)


@pytest.fixture(scope="module")
def foundation():
    return template("foundation", **TEAMS_CONTEXT)


def _as_list(v):
    return v if isinstance(v, list) else [v]


def _policy_statements(t, path_regex):
    (doc,) = t.find_resources(
        "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp(path_regex)}}
    ).values()
    return {s.get("Sid"): s for s in doc["Properties"]["PolicyDocument"]["Statement"]}


def _text(value):
    """A resource or condition value with CloudFormation functions flattened to text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return [_text(v) for v in value]
    if "Fn::Join" in value:
        return "".join(p if isinstance(p, str) else "<ref>" for p in value["Fn::Join"][1])
    return "<ref>"


# --- foundation: one role per team, scoped to the team's prefixes ---------------------------


def test_one_training_role_per_team_and_no_shared_role(foundation):
    assert len(foundation.find_resources("AWS::IAM::Role")) == 2
    assert "TrainingRoleArn" not in foundation.find_outputs("*")


@pytest.mark.parametrize("team", TEAMS)
def test_team_role_reads_and_writes_only_its_prefixes(foundation, team):
    s = _policy_statements(foundation, f"TeamTrainingRole{team.replace('-', '')}Policy")
    assert _as_list(s["ReadTrainingData"]["Action"]) == ["s3:GetObject"]
    (data,) = _as_list(s["ReadTrainingData"]["Resource"])
    assert _text(data).endswith(f"/{team}/*")
    for sid in ("ReadWriteCheckpoints", "WriteModelArtifacts"):
        objects = [_text(r) for r in _as_list(s[sid]["Resource"]) if "/" in _text(r)]
        assert objects and all(o.endswith(f"/{team}/*") for o in objects), sid
        assert "s3:ListBucket" not in _as_list(s[sid]["Action"])
    assert s["ListTeamPrefixes"]["Action"] == "s3:ListBucket"
    assert s["ListTeamPrefixes"]["Condition"] == {"StringLike": {"s3:prefix": [f"{team}/*"]}}
    assert len(_as_list(s["ListTeamPrefixes"]["Resource"])) == 3
    # Every other object grant of the role is under the team's prefix (the statement without
    # a Sid reads the training source archive; ReadTeamBuckets is the team's own buckets).
    for sid, stmt in s.items():
        if sid in (None, "ReadTeamBuckets"):
            continue
        for r in _as_list(stmt["Resource"]):
            text = _text(r)
            if ":s3:::" in text and "/" in text.split(":s3:::")[1]:
                assert text.endswith(f"/{team}/*"), (sid, text)


def test_a_teams_own_buckets_are_readable_only_by_that_team(foundation):
    a = _policy_statements(foundation, "TeamTrainingRoleteamaPolicy")
    b = _policy_statements(foundation, "TeamTrainingRoleteambPolicy")
    assert "ReadTeamBuckets" not in b
    assert sorted(_text(r) for r in a["ReadTeamBuckets"]["Resource"]) == [
        "arn:<ref>:s3:::team-a-shared-corpus",
        "arn:<ref>:s3:::team-a-shared-corpus/*",
    ]


# --- launcher: PassRole, create conditions, aliases, policies, outputs, environment ----------


def test_pass_role_covers_exactly_the_team_roles(launcher):
    s = _policy_statements(launcher, "TriggerPolicy")["PassTrainingRoleToSageMaker"]
    outputs = launcher.find_outputs("*")
    team_roles = [outputs[f"Team{t}TrainingRoleArn"]["Value"] for t in ("Teama", "Teamb")]
    assert sorted(map(json.dumps, _as_list(s["Resource"]))) == sorted(map(json.dumps, team_roles))
    assert s["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}


def test_jobs_are_scoped_to_team_name_prefixes_and_team_tags(launcher):
    s = _policy_statements(launcher, "TriggerPolicy")
    for sid in (
        "CreateCatalogJobsOnly",
        "ReadPlatformJobs",
        "StopPlatformJobs",
        "TagJobsAtCreation",
    ):
        names = sorted(_text(r).split(":training-job/")[1] for r in _as_list(s[sid]["Resource"]))
        assert names == ["team-a-*", "team-b-*"], sid
    tags = s["CreateCatalogJobsOnly"]["Condition"]["StringEquals"]
    assert tags == {"aws:RequestTag/ftl:platform": "ftl", "aws:RequestTag/ftl:team": list(TEAMS)}


def _aliases(t):
    return {
        a["Properties"]["Name"]: (lid, a)
        for lid, a in t.find_resources("AWS::Lambda::Alias").items()
    }


def test_one_alias_per_team_plus_http_and_admin_on_one_version(launcher):
    aliases = _aliases(launcher)
    assert set(aliases) - {"chain", "sweep"} == {"http", "team-team-a", "team-team-b", "admin"}
    (version_id,) = launcher.find_resources("AWS::Lambda::Version")
    for _, alias in aliases.values():
        assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}


def test_each_managed_policy_grants_exactly_its_alias_and_the_api_routes(launcher):
    aliases = _aliases(launcher)
    policies = launcher.find_resources("AWS::IAM::ManagedPolicy")
    assert len(policies) == 3
    seen = set()
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        preflight = [s for s in statements if s["Sid"].startswith("Preflight")]
        # subscribing to notifications topics (issue 27): tests/infra/test_notifications.py
        subscribe = [s["Sid"] for s in statements if s["Sid"].startswith("Subscribe")]
        statements = [s for s in statements if not s["Sid"].startswith(("Preflight", "Subscribe"))]
        assert [s["Sid"] for s in statements] == [
            "InvokeOwnAlias",
            "CallJobApi",
            "FindLauncher",
            "ReadTrainingLogs",
            "DenyServiceDoorInvoke",
        ]
        invoke, api, find, logs, deny_http = statements
        assert find["Action"] == "cloudformation:DescribeStacks"
        assert sorted(logs["Action"]) == ["logs:DescribeLogStreams", "logs:FilterLogEvents"]
        # the http alias trusts the identity an API Gateway event names: nobody else invokes it
        assert deny_http["Effect"] == "Deny" and deny_http["Action"] == "lambda:InvokeFunction"
        doors = deny_http["Resource"]
        doors = doors if isinstance(doors, list) else [doors]
        assert {"Ref": aliases["http"][0]} in doors
        if "chain" in aliases:  # with capacity chains: the job-events function's door too
            assert {"Ref": aliases["chain"][0]} in doors
        assert invoke["Action"] == "lambda:InvokeFunction"
        (name,) = [n for n, (lid, _) in aliases.items() if invoke["Resource"] == {"Ref": lid}]
        assert name != "http"
        seen.add(name)
        # ftl doctor's reads (docs/CLIENT.md) are the admins' only: read-only, no team's.
        actions = sorted(s["Action"] for s in preflight)
        if name == "admin":
            assert actions == [
                "cloudformation:DescribeStacks",
                "iam:GetRole",
                "servicequotas:ListServiceQuotas",
                "ssm:GetParameter",
            ]
            # the one parameter the templates' CheckBootstrapVersion rule reads
            (boot,) = [s for s in preflight if s["Action"] == "ssm:GetParameter"]
            parameter = launcher.to_json()["Parameters"]["BootstrapVersion"]["Default"]
            assert _text(boot["Resource"]).endswith(f":parameter{parameter}")
        else:
            assert actions == []
        assert subscribe == ["SubscribeTeamTopics" if name == "admin" else "SubscribeOwnTopic"]
        assert api["Action"] == "execute-api:Invoke"
        routes = sorted(_text(r).split("/", 1)[1] for r in api["Resource"])
        expected = sorted(
            f"*/{r.method}/"
            + "/".join("*" if p.startswith("{") else p for p in r.path[1:].split("/"))
            for r in ROUTES
        )
        assert routes == expected
    assert seen == {"team-team-a", "team-team-b", "admin"}
    # The policies attach to nothing: the platform team attaches them to its teams' roles.
    for policy in policies.values():
        for attach in ("Roles", "Users", "Groups"):
            assert attach not in policy["Properties"]


def test_outputs_per_team_and_for_admins_plus_the_existing_ones(launcher):
    aliases = _aliases(launcher)
    outputs = launcher.find_outputs("*")
    for oid, team in (("Teama", "team-a"), ("Teamb", "team-b")):
        assert outputs[f"Team{oid}InvokeArn"]["Value"] == {"Ref": aliases[f"team-{team}"][0]}
        assert "Ref" in outputs[f"Team{oid}PolicyArn"]["Value"]
        # read from the foundation's SSM parameter, not imported (an upgrade may remove it)
        ref = outputs[f"Team{oid}TrainingRoleArn"]["Value"]["Ref"]
        parameter = launcher.to_json()["Parameters"][ref]
        assert parameter["Default"] == f"/fine-tuning/ftl/teams/{team}/training-role-arn"
    assert outputs["AdminInvokeArn"]["Value"] == {"Ref": aliases["admin"][0]}
    assert "AdminPolicyArn" in outputs
    for name in (
        "TriggerFunctionName",
        "TriggerFunctionArn",
        "JobApiUrl",
        "JobTableName",
        "JobEventsTopicArn",
    ):
        assert name in outputs


def _env(t, marker):
    (fn,) = t.find_resources(
        "AWS::Lambda::Function",
        {"Properties": {"Environment": {"Variables": {marker: Match.any_value()}}}},
    ).values()
    return fn["Properties"]["Environment"]["Variables"]


def test_trigger_and_job_events_get_teams_and_prices(launcher):
    trigger = _env(launcher, "FTL_TEAM_ROLES")
    assert json.loads(trigger["FTL_TEAMS"])[0]["name"] == "team-a"
    assert json.loads(trigger["FTL_ADMINS"]) == TEAMS_CONTEXT["ftl:admins"]
    assert json.loads(trigger["FTL_PRICES"]) == TEAMS_CONTEXT["ftl:prices"]
    assert "FTL_ROLE_ARN" not in trigger  # FTL_TEAM_ROLES names each team's role instead
    roles = _text(trigger["FTL_TEAM_ROLES"])
    assert roles.startswith('{"team-a":"') and '","team-b":"' in roles
    (events_fn,) = launcher.find_resources(
        "AWS::Lambda::Function",
        {"Properties": {"Description": Match.string_like_regexp("state changes")}},
    ).values()
    events = events_fn["Properties"]["Environment"]["Variables"]
    assert events["FTL_TOPIC_ARN"] == trigger["FTL_TOPIC_ARN"]  # both announce ends
    assert events["FTL_TEAMS"] == trigger["FTL_TEAMS"]
    assert events["FTL_PRICES"] == trigger["FTL_PRICES"]


def test_job_events_rule_matches_every_team_role(launcher):
    rules = launcher.find_resources("AWS::Events::Rule").values()
    patterns = [r["Properties"].get("EventPattern", {}) for r in rules]
    by_type = {p["detail-type"][0]: p for p in patterns if p.get("source") == ["aws.sagemaker"]}
    training = by_type["SageMaker Training Job State Change"]
    tuning = by_type["SageMaker HyperParameter Tuning Job State Change"]  # sweeps (issue 37)
    assert len(training["detail"]["RoleArn"]) == 2
    assert len(tuning["detail"]["TrainingJobDefinition"]["RoleArn"]) == 2


def test_api_still_goes_only_through_the_http_alias(launcher):
    http_id = _aliases(launcher)["http"][0]
    for p in launcher.find_resources(
        "AWS::Lambda::Permission", {"Properties": {"Principal": "apigateway.amazonaws.com"}}
    ).values():
        assert p["Properties"]["FunctionName"] == {"Ref": http_id}


# --- synth-level: bad team config fails cdk synth naming the key ----------------------------


@pytest.mark.parametrize(
    ("context", "key"),
    [
        (
            {"ftl:teams": [{"name": "Team A", "principals": ["arn:aws:iam::1:role/x"]}]},
            "ftl:teams[0].name",
        ),
        (
            {
                "ftl:teams": [
                    {
                        "name": "team-a",
                        "principals": ["arn:aws:iam::123456789012:role/a"],
                        "limits": {"max_instances": 0},
                    }
                ]
            },
            "ftl:teams[0].limits.max_instances",
        ),
        ({"ftl:admins": ["arn:aws:iam::123456789012:role/admin"]}, "ftl:admins"),
        (
            {"ftl:prices": {"us-east-1": {"ml.p4d.24xlarge": -1}}},
            'ftl:prices["us-east-1"]["ml.p4d.24xlarge"]',
        ),
    ],
)
def test_bad_team_config_fails_synth_naming_the_key(context, key):
    app = cdk.App(context={**BASE_CONTEXT, "ftl:account": "123456789012", **context})
    with pytest.raises(ContextError) as err:
        build_platform(app)
    assert err.value.key == key and key in str(err.value)
