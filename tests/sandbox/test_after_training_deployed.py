"""After training, end to end in the sandbox (issue 27's "Done when"): a completed job has
exactly one model version, with its lineage, in its team's group, and a run in MLflow with its
metrics.

moto completes training jobs without running any code, so this test runs the job itself: a
teams platform is deployed with ``ftl:mlflow`` ``trackingUri`` naming a real ``mlflow server``
on localhost (tests/mlflow_server.py); a tracked job is submitted through its team's door; the
exact CreateTrainingJob the platform sent (the ledger's ``rendered``; moto keeps no
Environment) is run with the shipped entrypoint (training/train.py) on the CPU: its
Environment and HyperParameters as the SageMaker toolkit passes them, with only the container's
paths (``/opt/ml``: SM_* variables, the checkpoint folder) in a tmp folder, a tiny model in
place of the template's hub model and generated data in the channels. The job's end event is
then delivered to the deployed rule's function as EventBridge would (twice: it delivers at
least once), and the run, the version and ``describe`` are read back.

Its own platform name (``ftlafter``), so its stacks live beside the session's other deploys.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobmodel.after_training.registry import group_name
from sandbox.deploy import deploy
from sandbox.event_pump import EventPump
from tests.mlflow_server import mlflow_server
from tests.sandbox.test_teams_deployed import CONTEXT as TEAMS_CONTEXT
from tests.sandbox.test_teams_deployed import Teams, small

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
from ftl_train_testlib import (  # noqa: E402
    cls_records,
    make_model_dir,
    run_entry,
    sm_environ,
    write_records,
)

PLATFORM = "ftlafter"
TEMPLATE = "distilbert-spot"
# What the caller may override (the template's bounds): a short run of small batches. The
# template's own logging_steps (50) stays, so the run logs steps 50 and 100.
OVERRIDES = {"max_steps": 100, "per_device_train_batch_size": 4, "learning_rate": 0.0005}
pytestmark = [pytest.mark.sandbox, pytest.mark.xdist_group("sandbox")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri


@pytest.fixture(scope="module")
def platform(deployed, server):
    saved = dict(os.environ)  # as test_teams_deployed: the functions' environments stay theirs
    context = {
        **TEAMS_CONTEXT,
        "ftl:platformName": PLATFORM,
        "ftl:mlflow": json.dumps({"trackingUri": server}),
    }
    started = time.perf_counter()
    outputs = deploy(deployed.endpoint, context=context)
    print(f"\nafter-training deploy: {time.perf_counter() - started:.1f}s")
    yield Teams(deployed.endpoint, outputs, api=None)  # type: ignore[arg-type]
    os.environ.clear()
    os.environ.update(saved)


def toolkit_argv(hyperparameters: dict[str, str]) -> list[str]:
    """``--name value`` as the SageMaker training toolkit passes the job's HyperParameters
    (JSON-encoded by the SDK's convention) to the entry point, ``sagemaker_*`` left out."""
    argv: list[str] = []
    for name, raw in sorted(hyperparameters.items()):
        if name.startswith("sagemaker_"):
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        argv += [f"--{name}", value if isinstance(value, str) else json.dumps(value)]
    return argv


def binary(n: int, seed: int) -> list[dict[str, Any]]:
    """Generated text records with the template's two labels (its num_labels is 2)."""
    return [{**r, "label": min(r["label"], 1)} for r in cls_records(n, seed=seed)]


def end_event(sm: Any, name: str) -> dict[str, Any]:
    """SageMaker's ``Training Job State Change`` for the job as moto describes it."""
    job = sm.describe_training_job(TrainingJobName=name)
    arn = job["TrainingJobArn"]
    return {
        "version": "0",
        "id": f"{name}-Completed",
        "detail-type": "SageMaker Training Job State Change",
        "source": "aws.sagemaker",
        "account": arn.split(":")[4],
        "time": "2026-11-26T12:00:00Z",
        "region": arn.split(":")[3],
        "resources": [arn],
        "detail": {
            "TrainingJobName": name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": "Completed",
            "SecondaryStatus": "Completed",
            "RoleArn": job["RoleArn"],
            "EnableManagedSpotTraining": bool(job.get("EnableManagedSpotTraining")),
            "TrainingTimeInSeconds": 120,
            "BillableTimeInSeconds": 120,
            "Tags": {},
        },
    }


@pytest.fixture(scope="module")
def finished(platform, server, tmp_path_factory) -> dict[str, Any]:
    """The tracked job: submitted, run locally as rendered, its end delivered twice."""
    job = platform.team(
        "nlp", {"action": "submit", **small("after", hyperparameters=OVERRIDES), "tracking": True}
    )
    assert "error" not in job, job
    name = job["job_name"]
    item = platform.ddb.get_item(TableName=platform.table, Key={"pk": {"S": f"job#{name}"}})
    rendered = json.loads(item["Item"]["rendered"]["S"])
    described_hp = platform.sm.describe_training_job(TrainingJobName=name)["HyperParameters"]
    assert described_hp == rendered["HyperParameters"]  # what SageMaker got is what we run

    root = tmp_path_factory.mktemp("job")
    channels = {
        "train": write_records(binary(32, seed=0), root / "train", "jsonl"),
        "validation": write_records(binary(8, seed=1), root / "validation", "jsonl"),
    }
    model = make_model_dir(root / "model", "classification")
    hyperparameters = dict(rendered["HyperParameters"])
    hyperparameters["model_name_or_path"] = json.dumps(str(model))  # the tiny model
    argv = [*toolkit_argv(hyperparameters), "--checkpoint_dir", str(root / "checkpoints")]
    env = sm_environ(
        root, channels, **rendered["Environment"], TRAINING_JOB_NAME=rendered["TrainingJobName"]
    )
    started = time.perf_counter()
    ran = run_entry(argv, env, timeout=600)
    print(f"\nentrypoint: {time.perf_counter() - started:.1f}s")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "tracking off" not in ran.stderr, ran.stderr[-3000:]

    pump = EventPump(SimpleNamespace(outbox=[]), platform.endpoint)
    event = end_event(platform.sm, name)
    first = pump.deliver(event)  # only this platform's rule matches its training role
    assert len(first) == 1 and not first[0].error, first
    group = group_name(PLATFORM, TEMPLATE, "nlp")
    versions = platform.sm.list_model_packages(ModelPackageGroupName=group)[
        "ModelPackageSummaryList"
    ]  # registered by the end event's function, before anyone describes the job
    described = platform.team("nlp", {"action": "describe", "job_name": name})
    again = pump.deliver(event)  # EventBridge delivers at least once
    assert len(again) == 1 and not again[0].error, again
    return {
        "name": name,
        "rendered": rendered,
        "described": described,
        "group": group,
        "versions": versions,
        "after_again": platform.sm.list_model_packages(ModelPackageGroupName=group)[
            "ModelPackageSummaryList"
        ],
        "described_again": platform.team("nlp", {"action": "describe", "job_name": name}),
        "server": server,
    }


def test_the_job_is_tracked_to_the_sandbox_server_under_its_name(finished):
    tracking = finished["described"]["tracking"]
    assert tracking["mlflow_resource_arn"] == finished["server"]
    assert tracking["run_name"] == finished["name"]
    assert tracking["experiment_name"] == f"{PLATFORM}/nlp"


def test_the_mlflow_run_has_the_jobs_metrics_params_and_tags(finished):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(finished["server"])
    tracking = finished["described"]["tracking"]
    experiment = client.get_experiment_by_name(tracking["experiment_name"])
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert [r.info.run_name for r in runs] == [finished["name"]]
    run = runs[0]
    assert run.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert steps == [50, 100]
    assert "final/train_loss" in run.data.metrics and "final/eval_loss" in run.data.metrics
    params = run.data.params
    assert params["task"] == "classification" and params["max_steps"] == "100"
    assert params["learning_rate"] == "0.0005" and params["per_device_train_batch_size"] == "4"
    tags = run.data.tags
    assert tags["ftl.template"] == TEMPLATE
    assert tags["ftl.instance_type"] == finished["rendered"]["ResourceConfig"]["InstanceType"]
    assert tags["ftl.image"] == finished["rendered"]["AlgorithmSpecification"]["TrainingImage"]
    assert tags["ftl.attempt"] == "1"
    output = finished["rendered"]["OutputDataConfig"]["S3OutputPath"]
    assert tags["ftl.model_s3_uri"] == f"{output}{finished['name']}/output/model.tar.gz"


def test_the_completed_job_has_one_version_with_its_lineage_in_its_teams_group(finished):
    name, described = finished["name"], finished["described"]
    assert described["status"] == "Completed", described
    mine = [v for v in finished["versions"] if v["ModelPackageDescription"].startswith(name)]
    assert len(mine) == 1, finished["versions"]
    assert described["model_package_arn"] == mine[0]["ModelPackageArn"]
    assert described["model_package_group"] == finished["group"]
    assert described["model_approval_status"] == "PendingManualApproval"


def test_the_version_holds_the_jobs_lineage(platform, finished):
    version = platform.sm.describe_model_package(
        ModelPackageName=finished["described"]["model_package_arn"]
    )
    meta = version["CustomerMetadataProperties"]
    assert meta["job_name"] == finished["name"] and meta["team"] == "nlp"
    assert meta["template"] == TEMPLATE and meta["requested_by"] == "team-nlp alias"
    assert meta["source_hash"]
    channels = {c["ChannelName"]: c for c in finished["rendered"]["InputDataConfig"]}
    for channel, spec in channels.items():
        assert meta[f"input.{channel}"] == spec["DataSource"]["S3DataSource"]["S3Uri"]
    assert meta["hp.max_steps"] == "100"


def test_a_second_end_event_changes_nothing(finished):
    assert finished["after_again"] == finished["versions"]
    again = finished["described_again"]
    assert again["model_package_arn"] == finished["described"]["model_package_arn"]
    assert again["tracking"] == finished["described"]["tracking"]
