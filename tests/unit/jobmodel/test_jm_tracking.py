"""Experiment tracking in the job model (issue 27): which jobs are tracked, the refusals, the
template rule, the rendered environment, attempts of a chain, and the trigger's FTL_MLFLOW."""

from __future__ import annotations

import dataclasses
import json

import pytest

import jobmodel as jm
from jobmodel.after_training.tracking import (
    TrackingConfig,
    TrackingError,
    experiment_name,
    is_uri,
)
from jobmodel.after_training.tracking_job import (
    TRACKING_VARIABLES,
    run_view,
    tracked,
    tracking_environment,
)
from jobmodel.capacity import chain as C
from jobmodel.contract import names as N
from jobmodel.render import AttemptTracking, JobIdentity, render_attempt
from tests.unit.jobmodel.template_support import rule_of, spec_with

ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ftl-mlflow"
APP = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-ABC123"
ON = TrackingConfig(servers={"": ARN})
OFF_BY_DEFAULT = TrackingConfig(servers={"": ARN}, default=False)
PER_TEAM = TrackingConfig(servers={"team-a": ARN, "team-b": APP}, experiment="team-template")


def _tracked(requested, *, config=ON, template_tracking=None, isolated=False, team=None):
    return tracked(
        requested,
        template="t",
        template_tracking=template_tracking,
        network_isolation=isolated,
        config=config,
        team=team,
    )


@pytest.mark.parametrize(
    ("requested", "config", "template_tracking", "expected"),
    [
        (None, ON, None, True),  # the platform's default
        (None, OFF_BY_DEFAULT, None, False),
        (True, OFF_BY_DEFAULT, None, True),  # a caller may turn it on
        (False, ON, None, False),  # ... or off
        (None, ON, False, False),  # a template may turn it off
        (None, OFF_BY_DEFAULT, True, True),  # ... or on
        (False, ON, True, False),  # the caller's off wins over the template's on
        (None, TrackingConfig(), None, False),  # no server: never
    ],
)
def test_who_decides(requested, config, template_tracking, expected):
    assert _tracked(requested, config=config, template_tracking=template_tracking) is expected


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"config": TrackingConfig()}, "has none (context ftl:mlflow)"),
        ({"isolated": True}, "network-isolated"),
        ({"template_tracking": False}, "turns tracking off"),
        ({"config": PER_TEAM, "team": "team-c"}, "has none"),
    ],
)
def test_a_caller_asking_for_tracking_that_cannot_be_is_refused(kwargs, says):
    with pytest.raises(jm.ValidationError) as info:
        _tracked(True, **kwargs)
    assert info.value.field == "tracking" and says in info.value.message


def test_an_isolated_template_is_not_tracked_by_default():
    assert _tracked(None, isolated=True) is False


def test_submit_validates_the_field(catalog, platform):
    payload = {"template": "distilbert-spot"}
    req = jm.validate_submit({**payload, "tracking": False}, catalog, platform, tracking=ON)
    assert req.tracking is False and req.to_dict()["tracking"] is False
    plain = jm.validate_submit(payload, catalog, platform, tracking=ON)
    assert plain.tracking is None and "tracking" not in plain.to_dict()  # fingerprint kept
    for bad, says in (("yes", "true or false"), (True, "has none")):
        with pytest.raises(jm.ValidationError) as info:
            jm.validate_submit({**payload, "tracking": bad}, catalog, platform)
        assert info.value.field == "tracking" and says in info.value.message


def test_the_template_rule(shipped):
    base = "distilbert-spot"
    assert rule_of(spec_with(shipped, base, tracking="yes")) == "tracking"
    isolated = spec_with(shipped, base, network_isolation=True, tracking=True)
    with pytest.raises(jm.TemplateError, match="network_isolation"):
        jm.validate_template(isolated, require_image=False)
    taken = spec_with(shipped, base, environment={N.ENV_MLFLOW_TRACKING_URI: "x"})
    assert rule_of(taken) == "tracking"
    full = spec_with(shipped, base, environment={f"V{i}": "x" for i in range(95)})
    with pytest.raises(jm.TemplateError, match="adds 9 environment variables"):
        jm.validate_template(full, require_image=False)
    jm.validate_template(dataclasses.replace(full, tracking=False), require_image=False)
    round_trip = jm.TemplateSpec.from_dict(spec_with(shipped, base, tracking=False).to_dict())
    assert round_trip.tracking is False


def _rendered(catalog, platform, template="distilbert-spot", team=None, step=None, **fields):
    req = jm.validate_submit({"template": template, **fields}, catalog, platform, tracking=ON)
    name = "team-a-x-20261126-1800-ab12" if team else "x-20261126-1800-ab12"
    spec = catalog[template]
    step = step or C.plain_step(req, spec)
    job = JobIdentity(name=name, team=team, attempt=2 if step.chained else 1)
    out = render_attempt(req, spec, platform, step, AttemptTracking(ON, 12.345), job=job)
    return req, out


def test_a_tracked_job_gets_the_mlflow_environment_and_no_mlflow_config(catalog, platform):
    req, out = _rendered(catalog, platform, team="team-a")
    spec = catalog["distilbert-spot"]
    env = out["Environment"]
    assert env[N.ENV_MLFLOW_TRACKING_URI] == ARN
    assert env[N.ENV_MLFLOW_EXPERIMENT_NAME] == "ftl/team-a"
    assert env[N.ENV_MLFLOW_RUN_NAME] == out["TrainingJobName"]
    assert env[N.ENV_TRACKING_TEMPLATE] == "distilbert-spot"
    assert env[N.ENV_TRACKING_IMAGE] == spec.image_uri
    assert env[N.ENV_TRACKING_INSTANCE_TYPE] == req.instance_type
    assert env[N.ENV_TRACKING_ATTEMPT] == "1"
    assert env[N.ENV_TRACKING_COST_ESTIMATE] == "12.35"
    assert env[N.ENV_TRACKING_OUTPUT_S3_URI] == out["OutputDataConfig"]["S3OutputPath"]
    assert set(env) >= set(TRACKING_VARIABLES)
    assert all(len(v) <= 512 for v in env.values())
    assert "MlflowConfig" not in out
    assert run_view(env) == {
        "mlflow_resource_arn": ARN,
        "experiment_name": "ftl/team-a",
        "run_name": out["TrainingJobName"],
    }
    _, untracked = _rendered(catalog, platform, tracking=False)
    plain = jm.render_create_training_job(
        jm.validate_submit({"template": "distilbert-spot", "tracking": False}, catalog, platform),
        spec,
        platform,
        job_name=untracked["TrainingJobName"],
    )
    assert json.dumps(untracked, sort_keys=True) == json.dumps(plain, sort_keys=True)
    assert run_view(untracked.get("Environment", {})) is None


def test_experiments_per_team_and_template():
    assert experiment_name(ON, "ftl", None, "t") == "ftl"
    assert experiment_name(PER_TEAM, "ftl", "team-b", "bert-qa") == "ftl/team-b/bert-qa"
    env = tracking_environment(
        PER_TEAM,
        platform="ftl",
        team="team-b",
        template="bert-qa",
        job_name="j",
        image="i",
        instance_type="ml.g5.xlarge",
        attempt=1,
        estimate_usd=None,
        output_s3_uri="s3://a/",
    )
    assert env[N.ENV_MLFLOW_TRACKING_URI] == APP and N.ENV_TRACKING_COST_ESTIMATE not in env


def test_a_chains_later_attempt_continues_the_run_with_its_attempt(catalog, platform):
    step = C.Step(
        kind=C.ON_DEMAND, instance_types=("ml.g5.xlarge", "ml.g5.2xlarge"), instance_count=1
    )
    _, first = _rendered(catalog, platform, template="distilbert-chain")
    _, second = _rendered(catalog, platform, template="distilbert-chain", step=step)
    env = second["Environment"]
    assert env[N.ENV_TRACKING_ATTEMPT] == "2"
    assert env[N.ENV_TRACKING_INSTANCE_TYPE] == "ml.g5.xlarge,ml.g5.2xlarge"
    assert env[N.ENV_MLFLOW_RUN_NAME] == first["TrainingJobName"]  # the same run
    assert second["TrainingJobName"] == first["TrainingJobName"] + "-a2"


def test_the_trigger_environment_round_trips():
    env = PER_TEAM.to_env()
    back = TrackingConfig.from_env(env)
    assert back.servers == PER_TEAM.servers and back.experiment == "team-template"
    assert TrackingConfig().to_env() == {} and not TrackingConfig.from_env({}).enabled
    sandbox = TrackingConfig.from_env({N.ENV_MLFLOW: json.dumps({"servers": {"": "http://h"}})})
    assert sandbox.server_for("any") == "http://h"
    for bad in ("{", json.dumps({"servers": {}})):
        with pytest.raises(ValueError, match="FTL_MLFLOW"):
            TrackingConfig.from_env({N.ENV_MLFLOW: bad})


def test_the_context_rules_name_their_key():
    with pytest.raises(TrackingError) as info:
        TrackingConfig.parse({"create": True, "perTeam": True}, teams=None)
    assert info.value.key == "mlflow.perTeam"
    with pytest.raises(TrackingError, match="needs create"):
        TrackingConfig.parse({"trackingServerArn": ARN, "perTeam": True}, teams=["a"])
    parsed = TrackingConfig.parse({"create": True, "perTeam": True}, teams=["a", "b"])
    assert parsed.per_team and parsed.enabled and parsed.server_for("a") is None


def test_a_plain_tracking_uri_is_one_shared_server_and_nothing_else_is():
    """``trackingUri``: a plain http(s) MLflow server (the sandbox's on localhost, or a
    self-hosted one), shared by every team; no ARN, so no IAM statement names it."""
    parsed = TrackingConfig.parse({"trackingUri": "http://127.0.0.1:5000"}, teams=["a", "b"])
    assert parsed.server_for("a") == parsed.server_for("b") == "http://127.0.0.1:5000"
    assert is_uri("https://mlflow.example.com/") and not is_uri(ARN)
    assert TrackingConfig.from_env(parsed.to_env()).servers == parsed.servers
    for bad in ("ftp://h", "http://", "http://h x", ARN, 5, "http://h/" + "p" * 600):
        with pytest.raises(TrackingError) as info:
            TrackingConfig.parse({"trackingUri": bad})
        assert info.value.key == "mlflow.trackingUri"
    with pytest.raises(TrackingError, match="exactly one of"):
        TrackingConfig.parse({"trackingUri": "http://h", "trackingServerArn": ARN})
