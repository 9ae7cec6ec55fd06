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
from jobmodel.after_training.registry import group_name
from jobmodel.jobs import claims as CL
from jobmodel.jobs import effects as E
from sandbox.deploy import ACCOUNT, deploy
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


def _archive(metrics: dict[str, float]) -> bytes:
    raw = json.dumps({"status": "Completed", "metrics": metrics, "archive_kind": "full-model"})
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("evaluation.json")
        info.size = len(raw)
        tar.addfile(info, io.BytesIO(raw.encode()))
    return out.getvalue()


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
        evaluation[E.OWED] = E.owed_at_end(evaluation)
    reg.ddb.put_item(TableName=reg.table, Item=to_item(evaluation))
    rendered = json.loads(record["rendered"])
    bucket, _, path = rendered["OutputDataConfig"]["S3OutputPath"][5:].partition("/")
    key = "/".join(p for p in (path.strip("/"), name, "output/output.tar.gz") if p)
    reg.client("s3").put_object(Bucket=bucket, Key=key, Body=_archive(metrics))
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
