"""ftl:mlflow (issue 27): the tracking servers the stacks create, the trigger's FTL_MLFLOW, the
training roles' MLflow rights (each team's on its own server only), and context errors."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from ftl_constructs.mlflow_tracking import TRAINING_ACTIONS
from ftl_constructs.settings import ContextError, PlatformSettings
from tests.infra.synth import TEAMS_CONTEXT, template

APP = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-ABCDEF123456"
SERVER = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/shared"


def _trigger_env(launcher) -> dict:
    (fn,) = [
        props
        for logical, props in launcher.find_resources("AWS::Lambda::Function").items()
        if logical.startswith("LauncherTriggerFunction")
    ]
    return fn["Properties"]["Environment"]["Variables"]


def _mlflow_statements(foundation) -> list[dict]:
    return [
        s
        for policy in foundation.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "TrackExperiments"
    ]


def _join(value) -> str:
    """A Fn::Join of literal parts and pseudo-parameters, as text."""
    if isinstance(value, str):
        return value
    sep, parts = value["Fn::Join"]
    return sep.join(p if isinstance(p, str) else "<" + p["Ref"] + ">" for p in parts)


def test_no_context_creates_nothing_and_tracks_nothing():
    foundation, launcher = template("foundation"), template("launcher")
    foundation.resource_count_is("AWS::SageMaker::MlflowTrackingServer", 0)
    assert "FTL_MLFLOW" not in _trigger_env(launcher)
    assert _mlflow_statements(foundation) == []


def test_an_existing_app_is_used_as_is():
    ctx = {"ftl:mlflow": {"trackingServerArn": APP, "default": False}}
    foundation, launcher = template("foundation", **ctx), template("launcher", **ctx)
    foundation.resource_count_is("AWS::SageMaker::MlflowTrackingServer", 0)
    env = json.loads(_trigger_env(launcher)["FTL_MLFLOW"])
    assert env == {"servers": {"": APP}, "default": False, "experiment": "team"}
    (statement,) = _mlflow_statements(foundation)
    assert statement["Action"] == "sagemaker:CallMlflowAppApi"
    assert statement["Resource"] == APP


def test_a_plain_tracking_uri_reaches_the_trigger_and_no_role_gets_mlflow_rights():
    uri = "http://127.0.0.1:5000"
    ctx = {"ftl:mlflow": {"trackingUri": uri}}
    foundation, launcher = template("foundation", **ctx), template("launcher", **ctx)
    foundation.resource_count_is("AWS::SageMaker::MlflowTrackingServer", 0)
    assert json.loads(_trigger_env(launcher)["FTL_MLFLOW"])["servers"] == {"": uri}
    assert _mlflow_statements(foundation) == []


def test_create_makes_one_server_in_the_artifact_bucket_and_the_role_logs_only_there():
    ctx = {"ftl:mlflow": {"create": True}}
    foundation, launcher = template("foundation", **ctx), template("launcher", **ctx)
    foundation.has_resource_properties(
        "AWS::SageMaker::MlflowTrackingServer",
        {
            "TrackingServerName": "ftl-mlflow",
            "TrackingServerSize": "Small",
            "AutomaticModelRegistration": False,
            "ArtifactStoreUri": Match.object_like(
                {"Fn::Join": ["", ["s3://", Match.any_value(), "/mlflow/"]]}
            ),
        },
    )
    (statement,) = _mlflow_statements(foundation)
    assert sorted(statement["Action"]) == sorted(TRAINING_ACTIONS)
    arn = _join(statement["Resource"])
    assert arn.endswith(":mlflow-tracking-server/ftl-mlflow")
    env = json.loads(_join(_trigger_env(launcher)["FTL_MLFLOW"]))
    assert env["default"] is True and env["experiment"] == "team"
    assert env["servers"][""] == arn  # formatted in the launcher stack from the same name


def test_per_team_servers_scope_each_teams_role_to_its_own():
    ctx = {**TEAMS_CONTEXT, "ftl:mlflow": {"create": True, "perTeam": True}}
    foundation = template("foundation", **ctx)
    foundation.resource_count_is("AWS::SageMaker::MlflowTrackingServer", 2)
    for team in ("team-a", "team-b"):
        foundation.has_resource_properties(
            "AWS::SageMaker::MlflowTrackingServer",
            {
                "TrackingServerName": f"ftl-{team}-mlflow",
                "ArtifactStoreUri": Match.object_like(
                    {"Fn::Join": ["", ["s3://", Match.any_value(), f"/{team}/mlflow/"]]}
                ),
            },
        )
    arns = sorted(_join(s["Resource"]) for s in _mlflow_statements(foundation))
    assert [a.rsplit("/", 1)[1] for a in arns] == ["ftl-team-a-mlflow", "ftl-team-b-mlflow"]
    for logical, policy in foundation.find_resources("AWS::IAM::Policy").items():
        for s in policy["Properties"]["PolicyDocument"]["Statement"]:
            if s.get("Sid") == "TrackExperiments":
                team = "team-a" if "team-a" in logical.replace("teama", "team-a") else "team-b"
                assert _join(s["Resource"]).endswith(f"/ftl-{team}-mlflow"), logical


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"create": True, "perTeam": True}, "ftl:mlflow.perTeam"),
        ({"trackingServerArn": "arn:aws:s3:::bucket"}, "ftl:mlflow.trackingServerArn"),
        ({"trackingServerArn": SERVER, "create": True}, "ftl:mlflow"),
        ({"create": True, "default": "yes"}, "ftl:mlflow.default"),
        ({"create": True, "experiment": "job"}, "ftl:mlflow.experiment"),
        ({"create": True, "serverSize": "Huge"}, "ftl:mlflow.serverSize"),
        ({"create": True, "colour": "blue"}, "ftl:mlflow.colour"),
        ({"teamTrackingServerArns": {"a": SERVER}}, "ftl:mlflow.teamTrackingServerArns"),
        ([SERVER], "ftl:mlflow"),
    ],
)
def test_a_bad_value_names_the_key(value, key):
    with pytest.raises(ContextError) as info:
        PlatformSettings.from_mapping({"mlflow": value})
    assert info.value.key == key.split(".")[0] or f"'{key}'" in str(info.value)
    assert f"'{key}'" in str(info.value)


def test_team_servers_must_name_every_team():
    teams = TEAMS_CONTEXT["ftl:teams"]
    with pytest.raises(ContextError, match="one ARN for each team"):
        PlatformSettings.from_mapping(
            {"teams": teams, "mlflow": {"teamTrackingServerArns": {"team-a": SERVER}}}
        )
    ok = PlatformSettings.from_mapping(
        {"teams": teams, "mlflow": {"teamTrackingServerArns": {"team-a": SERVER, "team-b": APP}}}
    )
    assert ok.mlflow.server_for("team-b") == APP
    assert PlatformSettings.from_mapping({"mlflow": json.dumps({"create": True})}).mlflow.create
