"""Experiment tracking through the trigger (issue 27): FTL_MLFLOW makes submitted jobs
tracked, describe names their MLflow run, and a refused ``tracking`` names the field."""

from __future__ import annotations

import json
import uuid

import pytest

from jobmodel.contract import names as N
from tests.lambda_support import client, create_ledger_table, load_handler, trigger_env
from tests.unit.trigger.conftest import TRIGGER_DIR, Launcher

ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ftl-mlflow"


@pytest.fixture
def tracked(moto_endpoint, monkeypatch, tmp_path) -> Launcher:
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    env = trigger_env(moto_endpoint, tmp_path, table=table)
    env[N.ENV_MLFLOW] = json.dumps({"servers": {"": ARN}, "default": True})
    return Launcher(load_handler(TRIGGER_DIR, monkeypatch, env), moto_endpoint, table)


def _rendered(launcher: Launcher, name: str) -> dict:
    (item,) = [i for i in launcher.ledger_items() if i["pk"]["S"] == f"job#{name}"]
    return json.loads(item["rendered"]["S"])


def test_a_submitted_job_is_tracked_and_describe_names_its_run(tracked):
    job = tracked({"template": "distilbert-spot", "job_name": "track"})
    name = job["job_name"]
    env = _rendered(tracked, name)["Environment"]
    assert env[N.ENV_MLFLOW_TRACKING_URI] == ARN
    assert env[N.ENV_MLFLOW_RUN_NAME] == name
    assert env[N.ENV_MLFLOW_EXPERIMENT_NAME] == "ftl"
    assert float(env[N.ENV_TRACKING_COST_ESTIMATE]) == pytest.approx(
        job["estimated_max_cost_usd"], abs=0.01
    )
    described = tracked({"action": "describe", "job_name": name})
    assert described["tracking"] == {
        "mlflow_resource_arn": ARN,
        "experiment_name": "ftl",
        "run_name": name,
    }


def test_a_caller_turns_it_off(tracked):
    name = tracked({"template": "distilbert-spot", "tracking": False})["job_name"]
    assert N.ENV_MLFLOW_TRACKING_URI not in _rendered(tracked, name).get("Environment", {})
    assert "tracking" not in tracked({"action": "describe", "job_name": name})


def test_without_a_server_asking_for_tracking_is_refused(launcher):
    answer = launcher({"template": "distilbert-spot", "tracking": True})
    assert answer["error"]["type"] == "ValidationError"
    assert answer["error"]["field"] == "tracking"
    assert "ftl:mlflow" in answer["error"]["message"]
