"""An evaluation's results deployed (issue 36): a teams deploy into moto, where two Completed
``bert-large-qa`` jobs of team nlp each have a version, the group has an Approved version
with evaluated metrics, and each job's evaluation job record (planted as the start half
claims it) ends with its ``evaluation.json`` in the artifact bucket: a good model's end,
delivered to the deployed job-events function, leaves its version pending with the metrics;
a planted regression's end, found by a team's describe through the deployed trigger, makes
its version Rejected with the reason. ``models`` and describe show both.

Its own platform name (``ftlevr``), so its stacks live beside the session's other deploys.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
from typing import Any

import pytest

from ftl_ledger.items import from_item, to_item
from ftl_ledger.job_codec import from_record
from jobmodel.after_training.registry import group_name
from jobmodel.jobs import claims as CL
from jobmodel.jobs import effects as E
from sandbox.deploy import ACCOUNT, deploy
from sandbox.evaluation_output import archive, output_location
from sandbox.http_api import LocalHttpApi
from tests.sandbox.test_teams_deployed import Teams

PLATFORM = "ftlevr"
TEMPLATE = "bert-large-qa"
CONTEXT = {
    "ftl:platformName": PLATFORM,
    "ftl:teams": json.dumps(
        [{"name": "nlp", "principals": [f"arn:aws:iam::{ACCOUNT}:role/nlp-scientists"]}]
    ),
    "ftl:admins": json.dumps([f"arn:aws:iam::{ACCOUNT}:role/platform-ops"]),
    # Sandbox prices (not AWS's), so the evaluation job is priced and charged like a job.
    "ftl:prices": json.dumps({"us-east-1": {"ml.p4d.24xlarge": 40.0, "ml.g5.xlarge": 1.5}}),
}
CALLERS = {"nlpkey": f"arn:aws:sts::{ACCOUNT}:assumed-role/nlp-scientists/alice"}
BASELINE = {"eval_f1": 85.0, "eval_exact_match": 78.0}
pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def reg(deployed):
    saved = dict(os.environ)
    started = time.perf_counter()
    outputs = deploy(deployed.endpoint, context=CONTEXT)
    print(f"\nevaluation results deploy: {time.perf_counter() - started:.1f}s")
    launcher = outputs[f"{PLATFORM}-launcher"]
    with LocalHttpApi(
        deployed.endpoint,
        launcher["TriggerFunctionName"],
        credentials={k: k for k in CALLERS},
        identities=CALLERS,
    ) as api:
        teams = Teams(deployed.endpoint, outputs, api)
        _approved_baseline(teams)
        yield teams
    os.environ.clear()
    os.environ.update(saved)


def _approved_baseline(reg: Teams) -> None:
    """The version in use: Approved, with its own evaluation's metrics."""
    reg.sm.create_model_package(
        ModelPackageGroupName=group_name(PLATFORM, TEMPLATE, "nlp"),
        ModelPackageDescription="nlp-qa-old: the version in use",
        ModelApprovalStatus="Approved",
        InferenceSpecification={
            "Containers": [{"Image": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/hf:1"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={f"eval.{k}": repr(v) for k, v in BASELINE.items()},
    )


def _completed(reg: Teams, name: str) -> dict[str, Any]:
    job = reg.team("nlp", {"template": TEMPLATE, "job_name": name})
    assert "error" not in job, job
    described = reg.team("nlp", {"action": "describe", "job_name": job["job_name"]})
    assert described["status"] == "Completed" and described.get("model_package_arn"), described
    return described


def _plant(reg: Teams, parent: str, metrics: dict[str, float], status: str) -> str:
    """The parent's evaluation job record as its claim writes it (``status``), and the
    evaluation's output where SageMaker puts it."""
    item = reg.ddb.get_item(TableName=reg.table, Key={"pk": {"S": f"job#{parent}"}})["Item"]
    record = from_item(item)
    name = f"{parent[:58]}-eval"
    policy = {"task_metrics": {"channel": "validation"},
              "gate": [{"metric": "eval_f1", "max_regression": 1.0},
                       {"metric": "eval_exact_match", "max_regression": 1.0}]}  # fmt: skip
    evaluation = {
        **{
            k: v
            for k, v in record.items()
            if k
            not in (
                "client_token",
                E.OWED,
                "model_package_arn",
                "model_package_group",
                "model_package_version",
                "model_approval_status",
            )
        },  # fmt: skip
        "pk": f"job#{name}",
        "job_name": name,
        "status": status,
        "kind": "evaluation",
        "evaluation_of": parent,
        "evaluation_policy": json.dumps(policy),
        "training_job_name": name,
        CL.CARE: CL.CARE_VALUE,
    }
    if status == "Completed":
        evaluation[E.OWED] = E.owed_at_end(from_record(evaluation))
    reg.ddb.put_item(TableName=reg.table, Item=to_item(evaluation))
    rendered = json.loads(record["rendered"])
    bucket, key = output_location(rendered["OutputDataConfig"]["S3OutputPath"], name)
    report = {"status": "Completed", "metrics": metrics, "archive_kind": "full-model"}
    reg.client("s3").put_object(Bucket=bucket, Key=key, Body=archive(report))
    return name


def _events_function(reg: Teams) -> str:
    names = [f["FunctionName"] for f in reg.lam.list_functions()["Functions"]]
    (found,) = [n for n in names if n.startswith(f"{PLATFORM}-") and "JobEvents" in n]
    return found


def test_a_good_models_end_through_the_job_events_function_stays_pending(reg):
    parent = _completed(reg, "qa-good")
    name = _plant(
        reg, parent["job_name"], {"eval_f1": 85.4, "eval_exact_match": 77.5}, "InProgress"
    )
    event = {
        "id": f"{name}-completed",
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": name, "TrainingJobStatus": "Completed",
                   "BillableTimeInSeconds": 120},
    }  # fmt: skip
    reg.invoke(_events_function(reg), event)
    reg.invoke(_events_function(reg), event)  # delivered twice: nothing more
    described = reg.team("nlp", {"action": "describe", "job_name": parent["job_name"]})
    evaluation = described["evaluation"]
    assert evaluation["verdict"] == "PendingManualApproval", evaluation
    assert evaluation["metrics"] == {"eval_f1": 85.4, "eval_exact_match": 77.5}
    assert described["model_approval_status"] == "PendingManualApproval"
    version = reg.sm.describe_model_package(ModelPackageName=parent["model_package_arn"])
    assert version["ModelApprovalStatus"] == "PendingManualApproval"
    assert version["CustomerMetadataProperties"]["eval.eval_f1"] == "85.4"
    assert version["CustomerMetadataProperties"]["job_name"] == parent["job_name"]  # kept
    models = reg.team("nlp", {"action": "models", "template": TEMPLATE})["models"]
    (mine,) = [m for m in models if m["model_package_arn"] == parent["model_package_arn"]]
    assert mine["evaluation"]["verdict"] == "PendingManualApproval"


def test_a_planted_regression_found_by_a_describe_is_rejected(reg):
    parent = _completed(reg, "qa-worse")
    name = _plant(reg, parent["job_name"], {"eval_f1": 80.0, "eval_exact_match": 77.5}, "Completed")
    reg.team("nlp", {"action": "describe", "job_name": name})  # the holder does what it owes
    described = reg.team("nlp", {"action": "describe", "job_name": parent["job_name"]})
    assert described["model_approval_status"] == "Rejected", described.get("evaluation")
    assert described["evaluation"]["failed_checks"] == ["eval_f1"]
    version = reg.sm.describe_model_package(ModelPackageName=parent["model_package_arn"])
    assert version["ModelApprovalStatus"] == "Rejected"
    assert "eval_f1 80 is 5 worse than the Approved version's 85" in version["ApprovalDescription"]
    metrics = reg.client("s3").get_object(
        Bucket=reg.outputs["ArtifactBucketName"],
        Key=f"nlp/{parent['job_name']}/evaluation/model-metrics.json",
    )
    assert json.loads(metrics["Body"].read())["verdict"] == "Rejected"


# ----------------------------------------------------------------- the start, run for real
def _run_the_evaluation(reg: Teams, request: dict[str, Any], work: Any) -> dict[str, Any]:
    """Run the evaluation job's request as its container would: each channel's S3 prefix
    downloaded to its folder, the hyperparameters as the toolkit hands them over, the
    entrypoint ``training/evaluate.py``; its output uploaded where SageMaker puts it."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(repo / "tests" / "training")]
    import ftl_train_testlib as tl

    s3 = reg.client("s3")
    channels: dict[str, Path] = {}
    for channel in request["InputDataConfig"]:
        uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
        bucket, _, prefix = uri[5:].partition("/")
        folder = work / "input" / channel["ChannelName"]
        folder.mkdir(parents=True)
        for obj in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
            target = folder / obj["Key"][len(prefix) :].lstrip("/")
            if obj["Key"] == prefix:  # a single object (the archive)
                target = folder / Path(prefix).name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
        channels[channel["ChannelName"]] = folder
    hps = {k: json.loads(v) for k, v in request["HyperParameters"].items()}
    assert hps.pop("sagemaker_program") == "evaluate.py"
    env = tl.sm_environ(work, channels, SM_HPS=json.dumps(hps), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, str(repo / "training" / "evaluate.py")],
        env=env,
        cwd=str(repo / "training"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads((work / "output_data" / "evaluation.json").read_text())
    assert done.returncode in (0, 2), done.stderr[-3000:]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        tar.add(str(work / "output_data" / "evaluation.json"), arcname="evaluation.json")
    path = request["OutputDataConfig"]["S3OutputPath"][5:]
    bucket, _, prefix = path.partition("/")
    key = "/".join(p for p in (prefix.strip("/"), request["TrainingJobName"]) if p)
    s3.put_object(Bucket=bucket, Key=f"{key}/output/output.tar.gz", Body=out.getvalue())
    return report


def _plant_the_training_output(reg: Teams, described: dict[str, Any], work: Any) -> None:
    """What the Completed job left: a tiny QA model as its ``model.tar.gz``, and held-out
    data in its validation channel (moto runs no container)."""
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(repo / "tests" / "images"), str(repo / "tests" / "training")]
    import ftl_train_testlib as tl
    import harness

    model = harness.make_model(work / "model", "bert", "qa", 2)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path in sorted(model.rglob("*")):
            if path.is_file():
                tar.add(str(path), arcname=str(path.relative_to(model)))
    s3 = reg.client("s3")
    artifact = described["output_s3_uri"][5:].rstrip("/")
    bucket, _, prefix = artifact.partition("/")
    training = described.get("training_job_name") or described["job_name"]
    root = prefix.rsplit("/", 1)[0] if prefix.endswith(described["job_name"]) else prefix
    for key in {f"{root}/{training}/output/model.tar.gz", f"{prefix}/output/model.tar.gz"}:
        s3.put_object(Bucket=bucket, Key=key.lstrip("/"), Body=out.getvalue())
    held = tl.write_records(tl.qa_records(8, seed=3, lo=10, hi=30), work / "held", "jsonl")
    for file in held.iterdir():
        s3.put_object(
            Bucket=reg.data, Key=f"nlp/{TEMPLATE}/validation/{file.name}", Body=file.read_bytes()
        )


def test_a_completed_jobs_evaluation_is_started_once_run_and_gated(reg, tmp_path):
    """The start half for real: a Completed job's describe starts exactly one evaluation job
    (its end event delivered twice to the job-events function starts nothing more); its
    request, run by the entrypoint against a tiny untrained model, scores far below the
    Approved version's 85 F1; its end puts the metrics on the version and rejects it."""
    inputs = {
        "train": f"s3://{reg.data}/nlp/{TEMPLATE}/train/",
        "validation": f"s3://{reg.data}/nlp/{TEMPLATE}/validation/",
    }
    job = reg.team("nlp", {"template": TEMPLATE, "job_name": "qa-real", "inputs": inputs})
    assert "error" not in job, job
    name = job["job_name"]
    _plant_the_training_output(reg, job, tmp_path)
    described = reg.team("nlp", {"action": "describe", "job_name": name})
    assert described["status"] == "Completed", described
    eval_name = described["evaluation"]["job_name"]
    assert eval_name == f"{name}-eval" and reg.jobs(eval_name) == [eval_name]
    end = {
        "id": f"{name}-completed",
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": name, "TrainingJobStatus": "Completed",
                   "BillableTimeInSeconds": 600},
    }  # fmt: skip
    reg.invoke(_events_function(reg), end)
    reg.invoke(_events_function(reg), end)
    assert reg.jobs(eval_name) == [eval_name]  # exactly one
    request = reg.sm.describe_training_job(TrainingJobName=eval_name)
    report = _run_the_evaluation(reg, request, tmp_path / "eval")
    assert report["status"] == "Completed", report
    assert set(report["metrics"]) >= {"eval_f1", "eval_exact_match"}
    ended = {
        "id": f"{eval_name}-completed",
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": eval_name, "TrainingJobStatus": "Completed",
                   "BillableTimeInSeconds": 120},
    }  # fmt: skip
    reg.invoke(_events_function(reg), ended)
    after = reg.team("nlp", {"action": "describe", "job_name": name})
    assert after["evaluation"]["metrics"] == report["metrics"], after["evaluation"]
    assert after["model_approval_status"] == "Rejected", after["evaluation"]
    # The evaluation job is priced and charged to the team's month like any job.
    charged = reg.team("nlp", {"action": "describe", "job_name": eval_name})
    assert charged["estimated_max_cost_usd"] == pytest.approx(1.5), charged  # 1 h of g5
    assert charged["cost_usd"] == pytest.approx(120 * 1.5 / 3600, abs=1e-4), charged
