"""Experiment tracking (issue 27): the entrypoint logs a tracked job to its MLflow run.

A real MLflow tracking server on localhost (tests/mlflow_server.py) stands in for SageMaker
managed MLflow; the entrypoint trains a tiny classifier on the CPU against it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ftl_train_testlib import cls_records, make_model_dir, run_entry, sm_environ, write_records

from ftl_train import tracking
from jobmodel.contract import names as N

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.mlflow_server import mlflow_server  # noqa: E402

JOB = "team-a-cls-20261126-1800-ab12"
EXPERIMENT = "ftl/team-a"
MAX_STEPS = 6


def test_the_entrypoint_reads_the_names_the_launcher_writes():
    assert tracking.ENV_TRACKING_URI == N.ENV_MLFLOW_TRACKING_URI
    assert tracking.ENV_EXPERIMENT_NAME == N.ENV_MLFLOW_EXPERIMENT_NAME
    assert tracking.ENV_RUN_NAME == N.ENV_MLFLOW_RUN_NAME
    assert set(tracking.TAG_VARIABLES.values()) | {tracking.ENV_OUTPUT_S3_URI} == {
        N.ENV_TRACKING_TEMPLATE,
        N.ENV_TRACKING_IMAGE,
        N.ENV_TRACKING_INSTANCE_TYPE,
        N.ENV_TRACKING_ATTEMPT,
        N.ENV_TRACKING_COST_ESTIMATE,
        N.ENV_TRACKING_OUTPUT_S3_URI,
    }


def test_an_untracked_job_has_no_settings():
    assert tracking.settings({}) is None
    assert tracking.settings({N.ENV_MLFLOW_TRACKING_URI: "http://x"}) is None


def test_the_model_uri_is_where_sagemaker_uploads_the_attempts_model():
    env = {
        N.ENV_MLFLOW_TRACKING_URI: "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-X",
        N.ENV_MLFLOW_RUN_NAME: JOB,
        N.ENV_TRACKING_OUTPUT_S3_URI: "s3://art/team-a/",
        "TRAINING_JOB_NAME": JOB + "-a2",
    }
    config = tracking.settings(env)
    assert config is not None and config.experiment == JOB
    assert config.model_s3_uri == f"s3://art/team-a/{JOB}-a2/output/model.tar.gz"


def test_requirements_pin_a_client_for_every_image_python():
    lines = [
        line.split("#", 1)[0].strip()
        for line in Path(tracking.REQUIREMENTS).read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]
    assert all("==" in line for line in lines)
    skinny = [line for line in lines if line.startswith("mlflow-skinny==")]
    assert any('python_version < "3.10"' in line for line in skinny)
    assert any('python_version >= "3.10"' in line for line in skinny)
    assert any(line.startswith("sagemaker-mlflow==") for line in lines)


def test_a_missing_client_is_installed_from_the_pins_and_a_failure_only_warns(monkeypatch, caplog):
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None)
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "no route to PyPI")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert tracking.ensure_client("arn:aws:sagemaker:x", {}) is False
    assert calls and calls[0][-2:] == ["-r", tracking.REQUIREMENTS]
    assert "tracking off" in caplog.text


# ------------------------------------------------------------------ end to end
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tracking")
    return {
        "model": make_model_dir(root / "model", "classification"),
        "train": write_records(cls_records(24, seed=0), root / "train", "jsonl"),
        "validation": write_records(cls_records(8, seed=1), root / "validation", "jsonl"),
    }


def _args(ckpt: Path, max_steps: int = MAX_STEPS) -> list[str]:
    return [
        *("--task", "classification", "--max_steps", str(max_steps)),
        *("--per_device_train_batch_size", "4", "--learning_rate", "5e-3"),
        *("--max_seq_length", "64", "--logging_steps", "1", "--eval_steps", "3"),
        *("--save_steps", "3", "--checkpoint_dir", str(ckpt)),
    ]


def _env(tmp: Path, data: dict, uri: str, attempt: int = 1) -> dict[str, str]:
    return sm_environ(
        tmp,
        data,
        **{
            N.ENV_MLFLOW_TRACKING_URI: uri,
            N.ENV_MLFLOW_EXPERIMENT_NAME: EXPERIMENT,
            N.ENV_MLFLOW_RUN_NAME: JOB,
            N.ENV_TRACKING_TEMPLATE: "cls",
            N.ENV_TRACKING_IMAGE: "123456789012.dkr.ecr.us-east-1.amazonaws.com/hf:1",
            N.ENV_TRACKING_INSTANCE_TYPE: "ml.g5.xlarge",
            N.ENV_TRACKING_ATTEMPT: str(attempt),
            N.ENV_TRACKING_COST_ESTIMATE: "12.34",
            N.ENV_TRACKING_OUTPUT_S3_URI: "s3://artifacts/team-a/",
            "TRAINING_JOB_NAME": JOB if attempt == 1 else f"{JOB}-a{attempt}",
        },
    )


def _runs(uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    return client, client.search_runs([experiment.experiment_id])


def test_a_tracked_job_logs_its_run_and_a_resumed_attempt_continues_it(server, data, tmp_path):
    ckpt = tmp_path / "ckpt"
    first = run_entry(_args(ckpt, max_steps=3), _env(tmp_path, data, server), timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    client, runs = _runs(server)
    assert [r.info.run_name for r in runs] == [JOB]
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["learning_rate"] == "0.005"
    assert run.data.params["task"] == "classification"
    assert run.data.tags["ftl.template"] == "cls"
    assert run.data.tags["ftl.instance_type"] == "ml.g5.xlarge"
    assert run.data.tags["ftl.image"].endswith("/hf:1")
    assert run.data.tags["ftl.attempt"] == "1"
    assert run.data.tags["ftl.cost_estimate_usd"] == "12.34"
    assert run.data.tags["ftl.model_s3_uri"] == f"s3://artifacts/team-a/{JOB}/output/model.tar.gz"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert steps == [1, 2, 3]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval_loss")][:1] == [3]
    assert "final/train_runtime" in run.data.metrics and "final/eval_loss" in run.data.metrics
    assert (ckpt / tracking.RUN_ID_FILE).read_text() == run.info.run_id
    results = json.loads((tmp_path / "output_data" / "results.json").read_text())
    assert run.data.metrics["final/eval_loss"] == pytest.approx(results["eval_loss"])

    # Attempt 2 (after a spot interruption) resumes from the checkpoint: the same run goes on.
    second = run_entry(_args(ckpt), _env(tmp_path, data, server, attempt=2), timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    client, runs = _runs(server)
    assert len(runs) == 1 and runs[0].info.run_id == run.info.run_id
    assert runs[0].data.tags["ftl.attempt"] == "2"
    assert runs[0].data.tags["ftl.model_s3_uri"].endswith(f"/{JOB}-a2/output/model.tar.gz")
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_an_unreachable_server_never_fails_training(data, tmp_path):
    env = _env(tmp_path, data, "http://127.0.0.1:9")  # the discard port: nothing listens
    res = run_entry(_args(tmp_path / "ckpt", max_steps=2), env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "tracking off after an MLflow error" in res.stderr
    assert (tmp_path / "model_out" / "config.json").is_file()


def test_every_mlflow_call_the_tracker_makes_is_in_the_authorization_check(
    server, tmp_path, monkeypatch
):
    """The authorization check (tests/authz) maps MlflowClient methods to IAM actions
    (testsupport/authz/mlflow.py): every method the tracker calls, in a first attempt, a
    continued one and a stopped one, must be mapped."""
    import mlflow.tracking

    from testsupport.authz.mlflow import CLIENT_CALLS

    called: list[str] = []
    real = mlflow.tracking.MlflowClient

    class Recording:
        def __init__(self, *args, **kwargs):
            self._inner = real(*args, **kwargs)

        def __getattr__(self, name):
            called.append(name)
            return getattr(self._inner, name)

    monkeypatch.setattr(mlflow.tracking, "MlflowClient", Recording)

    class State:
        is_world_process_zero = True
        global_step = 2

    env = {
        N.ENV_MLFLOW_TRACKING_URI: server,
        N.ENV_MLFLOW_EXPERIMENT_NAME: "calls",
        N.ENV_MLFLOW_RUN_NAME: "calls-job",
        N.ENV_TRACKING_OUTPUT_S3_URI: "s3://a/",
    }
    for attempt, end in ((1, "finish"), (2, "stop"), (3, "finish")):
        tracker = tracking.Tracker(
            tracking.settings({**env, N.ENV_TRACKING_ATTEMPT: str(attempt)}), {}
        )
        tracker.params, tracker.checkpoint_dir = {"lr": 0.1}, str(tmp_path)
        tracker.on_train_begin(None, State(), None)
        tracker.on_log(None, State(), None, logs={"loss": 1.5, "epoch": 0.5, "note": "x"})
        if end == "finish":
            tracker.finish({"eval_loss": 1.0}, 2)
        else:
            tracker.stop("KILLED")
        assert tracker.client is not None, f"attempt {attempt} stopped tracking"
    assert called and set(called) <= set(CLIENT_CALLS), sorted(set(called) - set(CLIENT_CALLS))
    assert {"create_run", "log_batch", "set_terminated", "update_run"} <= set(called)


def test_a_sweeps_trials_log_their_own_runs_under_the_sweeps_parent_run(server, data, tmp_path):
    """A tuner's trial (issue 37) has the sweep's environment (its run name is the sweep's);
    the tuner adds ``_tuning_objective_metric`` to its hyperparameters. Each trial logs a run
    of its own, named as its training job, under one parent run named as the sweep."""
    from mlflow.tracking import MlflowClient

    sweep = "nlp-lr-20261128-1100-ab12"
    trials = [f"{sweep}-001-0a1b2c3d", f"{sweep}-002-4e5f6a7b"]
    for n, trial in enumerate(trials):
        env = _env(tmp_path / trial, data, server)
        env |= {
            N.ENV_MLFLOW_EXPERIMENT_NAME: "sweeps",
            N.ENV_MLFLOW_RUN_NAME: sweep,
            "TRAINING_JOB_NAME": trial,
            "SM_HPS": json.dumps({"_tuning_objective_metric": "eval_loss"}),
        }
        res = run_entry(_args(tmp_path / trial / "ckpt", max_steps=2), env, timeout=600)
        assert res.returncode == 0, (n, res.stderr[-3000:])
    client = MlflowClient(server)
    experiment = client.get_experiment_by_name("sweeps")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == sorted([sweep, *trials])
    parent = runs[sweep].info.run_id
    for trial in trials:
        tags = runs[trial].data.tags
        assert tags["mlflow.parentRunId"] == parent and tags["ftl.sweep"] == sweep
        assert tags["ftl.model_s3_uri"].endswith(f"/{trial}/output/model.tar.gz")
        assert "final/eval_loss" in runs[trial].data.metrics
