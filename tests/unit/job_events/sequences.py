"""Realistic events of one queued job's life: Batch service-job state changes (detail shaped
like DescribeServiceJob) and SageMaker training-job state changes of the job Batch created."""

from __future__ import annotations

from typing import Any

from testsupport import ACCOUNT, REGION

T0 = 1_795_000_000_000  # epoch ms of the submit
QUEUE = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/ftl-training"
HEX = "0123456789abcdef" * 2


def training_name(job: str) -> str:
    return f"AWSBatch{job}{HEX}"


def training_arn(job: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{training_name(job).lower()}"


def batch(job: str, status: str, **extra: Any) -> dict[str, Any]:
    """A ``Batch Service Job State Change`` event; ``extra`` overrides detail fields."""
    detail: dict[str, Any] = {
        "jobId": f"id-{job}",
        "jobName": job,
        "jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/id-{job}",
        "jobQueue": QUEUE,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": status,
        "createdAt": T0,
        "retryAttempts": 0,
        "shareIdentifier": "nlp",
        "schedulingPriority": 50,
    }
    if status == "RUNNABLE":
        detail["statusReason"] = "Waiting for capacity"
    if status in ("SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED"):
        detail["scheduledAt"] = T0 + 60_000
        detail["latestAttempt"] = {
            "serviceResourceId": {"name": "TrainingJobArn", "value": training_arn(job)}
        }
    if status in ("RUNNING", "SUCCEEDED"):
        detail["startedAt"] = T0 + 70_000
    if status == "SUCCEEDED":
        detail["stoppedAt"] = T0 + 4_001_000
    detail.update(extra)
    return {
        "version": "0",
        "id": f"batch-{job}-{status}",
        "detail-type": "Batch Service Job State Change",
        "source": "aws.batch",
        "account": ACCOUNT,
        "time": "2026-11-19T10:00:00Z",
        "region": REGION,
        "resources": [detail["jobArn"]],
        "detail": detail,
    }


def sagemaker(job: str, status: str, secondary: str, at_ms: int, **extra: Any) -> dict[str, Any]:
    """A ``SageMaker Training Job State Change`` event of the training job Batch created."""
    detail: dict[str, Any] = {
        "TrainingJobName": training_name(job),
        "TrainingJobArn": training_arn(job),
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
        "EnableManagedSpotTraining": True,
        "CreationTime": T0 + 60_000,
        "LastModifiedTime": at_ms,
        "SecondaryStatusTransitions": [{"Status": "Starting", "StartTime": T0 + 61_000}],
        **extra,
    }
    return {
        "version": "0",
        "id": f"sm-{job}-{status}",
        "detail-type": "SageMaker Training Job State Change",
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "time": "2026-11-19T10:00:00Z",
        "region": REGION,
        "resources": [training_arn(job)],
        "detail": detail,
    }


COMPLETED_TRANSITIONS = ["Starting", "Downloading", "Training", "Interrupted", "Starting"]
COMPLETED_TRANSITIONS += ["Training", "Uploading", "Completed"]


def life(job: str) -> list[dict[str, Any]]:
    """RUNNABLE, SCHEDULED, SageMaker InProgress, RUNNING, SageMaker Completed, SUCCEEDED."""
    completed = sagemaker(
        job,
        "Completed",
        "Completed",
        T0 + 4_000_000,
        BillableTimeInSeconds=1200,
        TrainingTimeInSeconds=4000,
        FinalMetricDataList=[
            {"MetricName": "eval_f1", "Value": 91.5, "Timestamp": T0 + 3_990_000},
            {"MetricName": "train_loss", "Value": 0.25, "Timestamp": T0 + 3_990_000},
        ],
        SecondaryStatusTransitions=[{"Status": s, "StartTime": T0} for s in COMPLETED_TRANSITIONS],
    )
    return [
        batch(job, "RUNNABLE"),
        batch(job, "SCHEDULED"),
        sagemaker(job, "InProgress", "Starting", T0 + 61_000),
        batch(job, "RUNNING"),
        completed,
        batch(job, "SUCCEEDED"),
    ]
