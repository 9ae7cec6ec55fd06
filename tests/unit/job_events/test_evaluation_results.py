"""The ``evaluation_results`` end effect against moto (issue 36): an evaluation job's end reads
its ``evaluation.json`` from S3, gates the evaluated job's version against the group's latest
Approved version, updates it once, writes the metrics JSON its ModelMetrics names, gives the
job its ``evaluation`` (metrics, verdict, reason) and sends the ``evaluated`` notice; also
when the end repeats, or a failure falls between the update and the done mark."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from jobmodel.after_training import registry as R
from jobmodel.jobs import effects as E
from sandbox.evaluation_output import archive
from tests.lambda_support import client

TEMPLATE = "bert-large-qa"
BUCKET = "ftl-eval-art"
RENDERED = {
    "TrainingJobName": "x",
    "AlgorithmSpecification": {"TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/hf:1"},
    "HyperParameters": {"sagemaker_submit_directory": json.dumps("s3://assets/abc.tar.gz")},
    "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/"},
}
GATE = [{"metric": "eval_f1", "max_regression": 1.0}, {"metric": "eval_exact_match", "min": 50}]


def _policy(**extra: Any) -> str:
    return json.dumps({"task_metrics": {"channel": "validation"}, "gate": GATE, **extra})


def _event(name: str, status: str, event_id: str) -> dict:
    return {
        "id": event_id,
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {
            "TrainingJobName": name,
            "TrainingJobStatus": status,
            "BillableTimeInSeconds": 60,
        },
    }


class Counting:
    """moto's SageMaker, counting updates; ``fail_updates`` raises after that many updates."""

    def __init__(self, real: Any) -> None:
        self.real, self.updates, self.fail_after_update = real, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def update_model_package(self, **kwargs: Any) -> Any:
        answer = self.real.update_model_package(**kwargs)
        self.updates += 1
        if self.fail_after_update:
            self.fail_after_update -= 1
            raise ClientError({"Error": {"Code": "InternalFailure", "Message": "lost"}}, "Update")
        return answer


@pytest.fixture
def setup(events, moto_endpoint, prefix, monkeypatch):
    sm = client("sagemaker", moto_endpoint)
    group = R.group_name("ftl-test", TEMPLATE)
    names = [g["ModelPackageGroupName"] for g in sm.list_model_package_groups()[
        "ModelPackageGroupSummaryList"]]  # fmt: skip
    if group not in names:
        sm.create_model_package_group(ModelPackageGroupName=group)
    s3 = client("s3", moto_endpoint)
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    counting = Counting(sm)
    monkeypatch.setattr(events.runtime, "sagemaker", counting)
    monkeypatch.setattr(events.runtime, "s3", s3)
    return counting, group, s3


def _completed_job(events, name: str) -> dict[str, Any]:
    events.put_job(name, status="InProgress", template=TEMPLATE, rendered=json.dumps(RENDERED),
                   training_job_name=name, output_s3_uri=f"s3://{BUCKET}/{name}/")  # fmt: skip
    events(_event(name, "Completed", f"{name}-done"))
    job = events.job(name)
    assert job["model_package_arn"], job
    return job


def _evaluate(events, s3, parent: str, result: dict | None, *, status="Completed", policy=None):
    """The evaluation job of ``parent`` as its claim wrote it, its output in S3, and its end."""
    name = f"{parent}-eval"
    events.put_job(name, status="InProgress", template=TEMPLATE, training_job_name=name,
                   kind="evaluation", evaluation_of=parent, evaluation_policy=policy or _policy(),
                   rendered=json.dumps({**RENDERED, "TrainingJobName": name}))  # fmt: skip
    if result is not None:
        s3.put_object(Bucket=BUCKET, Key=f"{name}/output/output.tar.gz", Body=archive(result))
    events(_event(name, status, f"{name}-{status}"))
    return name


def _approved(sm, group: str, metrics: dict[str, float]) -> str:
    """An earlier version of the group, Approved, with its evaluation's entries."""
    arn = sm.create_model_package(
        ModelPackageGroupName=group,
        ModelPackageDescription="older: model",
        ModelApprovalStatus="Approved",
        InferenceSpecification={
            "Containers": [{"Image": "123.dkr.ecr.us-east-1.amazonaws.com/hf:1"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        CustomerMetadataProperties={f"eval.{k}": repr(v) for k, v in metrics.items()},
    )["ModelPackageArn"]
    return str(arn)


def _version(sm, job: dict[str, Any]) -> dict[str, Any]:
    return sm.real.describe_model_package(ModelPackageName=job["model_package_arn"])


def test_a_good_model_passes_and_the_results_reach_every_place(events, setup, prefix):
    sm, group, s3 = setup
    _approved(sm.real, group, {"eval_f1": 80.0, "eval_exact_match": 70.0})
    _completed_job(events, prefix)
    name = _evaluate(events, s3, prefix, {"status": "Completed",
                     "metrics": {"eval_f1": 80.5, "eval_exact_match": 71.0}})  # fmt: skip
    assert E.OWED not in events.job(name)
    job = events.job(prefix)
    evaluation = job["evaluation"]
    assert evaluation["verdict"] == "PendingManualApproval" and evaluation["failed_checks"] == []
    assert evaluation["metrics"] == {"eval_f1": 80.5, "eval_exact_match": 71.0}
    assert evaluation["reason"] == "gate passed; left for review"
    version = _version(sm, job)
    assert version["ModelApprovalStatus"] == "PendingManualApproval"
    assert version["ApprovalDescription"] == "gate passed; left for review"
    meta = version["CustomerMetadataProperties"]
    assert meta["eval.eval_f1"] == "80.5" and meta["eval.job"] == name
    assert meta["eval.verdict"] == "PendingManualApproval" and meta["eval.status"] == "Completed"
    written = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/evaluation/model-metrics.json")
    document = json.loads(written["Body"].read())
    assert document["metrics"]["eval_f1"] == {"value": 80.5}
    (notice,) = events.messages("evaluated")
    assert (
        notice["dedup_id"] == f"{prefix}/evaluated" and notice["status"] == "PendingManualApproval"
    )
    assert notice["evaluation_job_name"] == name and notice["metrics"]["eval_f1"] == 80.5
    assert E.OWED not in job  # the notice was sent by the same holder


def test_a_planted_regression_is_rejected_with_every_failed_check(events, setup, prefix):
    sm, group, s3 = setup
    _approved(sm.real, group, {"eval_f1": 90.0})
    _completed_job(events, prefix)
    _evaluate(events, s3, prefix, {"status": "Completed",
              "metrics": {"eval_f1": 85.0, "eval_exact_match": 40.0}})  # fmt: skip
    job = events.job(prefix)
    assert job["model_approval_status"] == "Rejected"
    assert job["evaluation"]["failed_checks"] == ["eval_f1", "eval_exact_match"]
    version = _version(sm, job)
    assert version["ModelApprovalStatus"] == "Rejected"
    assert "eval_f1 85 is 5 worse than the Approved version's 90" in version["ApprovalDescription"]
    assert "eval_exact_match 40 is below the minimum 50" in version["ApprovalDescription"]
    assert version["CustomerMetadataProperties"]["eval.failed"] == "eval_f1 eval_exact_match"
    (notice,) = events.messages("evaluated")
    assert notice["verdict"] == "Rejected" and notice["failed_checks"] == job["evaluation"][
        "failed_checks"]  # fmt: skip


def test_approve_on_pass_approves_and_no_baseline_passes_saying_so(events, setup, prefix):
    sm, group, s3 = setup
    policy = _policy(approve_on_pass=True)
    # a group whose only Approved version was never evaluated: no baseline for eval_f1
    _approved(sm.real, group, {})
    _completed_job(events, prefix)
    _evaluate(events, s3, prefix, {"status": "Completed",
              "metrics": {"eval_f1": 1.0, "eval_exact_match": 60.0}}, policy=policy)  # fmt: skip
    job = events.job(prefix)
    assert job["model_approval_status"] == "Approved"
    assert job["evaluation"]["reason"].startswith("gate passed (no Approved baseline for eval_f1)")
    assert _version(sm, job)["ModelApprovalStatus"] == "Approved"


@pytest.mark.parametrize(
    ("status", "result", "why"),
    [
        ("Failed", {"status": "Failed", "reason": "archive has no adapter_config.json"},
         "archive has no adapter_config.json"),
        ("Completed", None, "no results: NoSuchKey"),
        ("Stopped", None, "evaluation job Stopped"),
    ],
)  # fmt: skip
def test_a_failed_evaluation_leaves_the_version_pending_and_says_why(
    events, setup, prefix, status, result, why
):
    sm, group, s3 = setup
    _completed_job(events, prefix)
    _evaluate(events, s3, prefix, result, status=status)
    job = events.job(prefix)
    assert job["model_approval_status"] == "PendingManualApproval"
    assert job["evaluation"]["verdict"] == "PendingManualApproval"
    assert why in job["evaluation"]["reason"] and "left for review" in job["evaluation"]["reason"]
    version = _version(sm, job)
    assert version["ModelApprovalStatus"] == "PendingManualApproval"
    assert why in version["ApprovalDescription"]
    assert version["CustomerMetadataProperties"]["eval.status"] == "Failed"


def test_repeats_and_a_lost_update_answer_update_the_version_once(events, setup, prefix):
    sm, group, s3 = setup
    _approved(sm.real, group, {"eval_f1": 90.0})
    _completed_job(events, prefix)
    sm.fail_after_update = 1  # the update happens, its answer is lost: the effect stays owed
    with pytest.raises(ClientError):
        _evaluate(events, s3, prefix, {"status": "Completed",
                  "metrics": {"eval_f1": 80.0, "eval_exact_match": 60.0}})  # fmt: skip
    name = f"{prefix}-eval"
    assert E.RESULTS in events.job(name)[E.OWED]
    events(_event(name, "Completed", "retry"))  # EventBridge's retry
    events(_event(name, "Completed", "again"))  # and a repeat after it is done
    assert E.OWED not in events.job(name)
    assert sm.updates == 1
    job = events.job(prefix)
    assert job["model_approval_status"] == "Rejected"
    assert len(events.messages("evaluated")) == 1


def test_an_admins_review_before_the_results_stands(events, setup, prefix):
    sm, group, s3 = setup
    _approved(sm.real, group, {"eval_f1": 90.0})
    job = _completed_job(events, prefix)
    review = {"ModelApprovalStatus": "Approved", "ApprovalDescription": "ok by me"}
    sm.real.update_model_package(ModelPackageArn=job["model_package_arn"], **review)
    _evaluate(events, s3, prefix, {"status": "Completed",
              "metrics": {"eval_f1": 10.0, "eval_exact_match": 60.0}})  # fmt: skip
    version = _version(sm, events.job(prefix))
    assert version["ModelApprovalStatus"] == "Approved"
    assert version["ApprovalDescription"] == "ok by me"
    assert version["CustomerMetadataProperties"]["eval.verdict"] == "Rejected"
    assert events.job(prefix)["evaluation"]["verdict"] == "Rejected"
