"""The evaluation's results on the evaluated job's MLflow run (issue 36): the evaluation job
gets the evaluated job's MLflow variables (``jobmodel.evaluation.tracking``) and the
entrypoint logs ``eval/<name>`` metrics and its tags on that run, against a real MLflow server
on localhost; a failure is tagged with its reason; an unreachable server never fails it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from eval_testlib import eval_environ, tar_archive
from ftl_train_testlib import cls_records, write_records

from ftl_eval import tracking
from ftl_eval.main import main
from jobmodel.contract import names as N
from jobmodel.evaluation.tracking import evaluation_tracking_environment

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.mlflow_server import mlflow_server  # noqa: E402

JOB = "team-a-cls-20261128-0800-ab12"
EXPERIMENT = "ftl/team-a"
POLICY = {"task_metrics": {"channel": "validation"}}
HPS = {"task": "classification", "max_seq_length": 64, "num_labels": 3}
TRAINING_ENV = {
    N.ENV_MLFLOW_TRACKING_URI: "http://mlflow.example",
    N.ENV_MLFLOW_EXPERIMENT_NAME: EXPERIMENT,
    N.ENV_MLFLOW_RUN_NAME: JOB,
    N.ENV_TRACKING_TEMPLATE: "cls",
    N.ENV_TRACKING_ATTEMPT: "2",
}


def test_the_evaluation_gets_the_evaluated_jobs_run_and_nothing_else():
    record = {"job_name": JOB, "rendered": json.dumps({"Environment": TRAINING_ENV})}
    assert evaluation_tracking_environment(record) == {
        N.ENV_MLFLOW_TRACKING_URI: "http://mlflow.example",
        N.ENV_MLFLOW_EXPERIMENT_NAME: EXPERIMENT,
        N.ENV_MLFLOW_RUN_NAME: JOB,
    }
    assert evaluation_tracking_environment(TRAINING_ENV)[N.ENV_MLFLOW_RUN_NAME] == JOB
    assert evaluation_tracking_environment({"job_name": JOB, "rendered": "{}"}) == {}
    assert tracking.log_results({"m": 1.0}, "Completed", {}) is False  # untracked


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow-eval")) as uri:
        yield uri


def _training_run(uri: str, name: str) -> str:
    """The run training left (FINISHED), as ftl_train's tracker makes it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(EXPERIMENT)
    experiment = found.experiment_id if found else client.create_experiment(EXPERIMENT)
    run = client.create_run(experiment, run_name=name)
    client.log_metric(run.info.run_id, "final/eval_loss", 0.5)
    client.set_terminated(run.info.run_id, status="FINISHED")
    return str(run.info.run_id)


def _env(tmp_path, model_dirs, uri: str, name: str, *, broken: bool = False):
    archive = tar_archive(model_dirs("classification"), tmp_path / "archive")
    held = write_records(cls_records(12, seed=4), tmp_path / "validation", "jsonl")
    channels = {"archive": archive, "validation": held}
    if broken:
        channels = {"archive": archive}  # the held-out channel is missing: the run fails
    env = eval_environ(tmp_path, POLICY, HPS, channels)
    record = {"job_name": name, "rendered": json.dumps({"Environment": {
        **TRAINING_ENV, N.ENV_MLFLOW_TRACKING_URI: uri, N.ENV_MLFLOW_RUN_NAME: name}})}  # fmt: skip
    return {**env, **evaluation_tracking_environment(record)}


def test_the_metrics_reach_the_evaluated_jobs_run(server, tmp_path, model_dirs, capsys):
    from mlflow.tracking import MlflowClient

    run_id = _training_run(server, JOB)
    assert main([], _env(tmp_path, model_dirs, server, JOB)) == 0
    run = MlflowClient(server).get_run(run_id)
    assert 0 <= run.data.metrics["eval/eval_accuracy"] <= 1
    assert "eval/eval_f1" in run.data.metrics and "final/eval_loss" in run.data.metrics
    assert run.data.tags["ftl.evaluation_job"] == "job-eval"
    assert run.data.tags["ftl.evaluation_status"] == "Completed"
    assert run.info.status == "FINISHED"  # training's status stays
    body = json.loads((tmp_path / "output_data" / "evaluation.json").read_text())
    assert run.data.metrics["eval/eval_accuracy"] == pytest.approx(body["metrics"]["eval_accuracy"])


def test_a_failed_evaluation_is_tagged_with_its_reason(server, tmp_path, model_dirs):
    from mlflow.tracking import MlflowClient

    run_id = _training_run(server, JOB + "-f")
    assert main([], _env(tmp_path, model_dirs, server, JOB + "-f", broken=True)) == 2
    tags = MlflowClient(server).get_run(run_id).data.tags
    assert tags["ftl.evaluation_status"] == "Failed"
    assert "no validation channel" in tags["ftl.evaluation_reason"]


def test_an_unreachable_server_never_fails_the_evaluation(tmp_path, model_dirs, capfd):
    env = _env(tmp_path, model_dirs, "http://127.0.0.1:9", JOB)  # nothing listens there
    assert main([], env) == 0
    assert "evaluation not logged to MLflow" in capfd.readouterr().err
