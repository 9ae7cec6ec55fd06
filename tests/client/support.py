"""Stubbed boto3 clients for the client's unit tests (no network)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from ftl_client import LauncherClient

FUNCTION = "ftl-trigger"


def aws(service: str) -> Any:
    return boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url="http://localhost:9",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def payload(body: Any) -> StreamingBody:
    data = json.dumps(body).encode()
    return StreamingBody(io.BytesIO(data), len(data))


class Stubbed:
    """A LauncherClient over stubbed lambda and sagemaker clients; records each event sent."""

    def __init__(self) -> None:
        self.lam = aws("lambda")
        self.sm = aws("sagemaker")
        self.lambda_stub = Stubber(self.lam)
        self.sm_stub = Stubber(self.sm)
        self.events: list[dict[str, Any]] = []
        self.lam.meta.events.register("before-parameter-build.lambda.Invoke", self._record)
        self.client = LauncherClient(
            function_name=FUNCTION, clients={"lambda": self.lam, "sagemaker": self.sm}
        )

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.events.append(json.loads(params["Payload"]))

    def answer(self, body: Any, *, function_error: str | None = None) -> Stubbed:
        reply: dict[str, Any] = {"StatusCode": 200, "Payload": payload(body)}
        if function_error:
            reply["FunctionError"] = function_error
        self.lambda_stub.add_response("invoke", reply, {"FunctionName": FUNCTION, "Payload": ANY})
        return self

    def training_job(self, name: str, metrics: dict[str, float], transitions: list[str]) -> None:
        now = datetime(2026, 11, 22, 1, 53, tzinfo=UTC)
        self.sm_stub.add_response(
            "describe_training_job",
            {
                "TrainingJobName": name,
                "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
                "ModelArtifacts": {
                    "S3ModelArtifacts": f"s3://artifacts/{name}/output/model.tar.gz"
                },
                "TrainingJobStatus": "Completed",
                "SecondaryStatus": "Completed",
                "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
                "CreationTime": now,
                "SecondaryStatusTransitions": [
                    {"Status": s, "StartTime": now} for s in transitions
                ],
                "FinalMetricDataList": [
                    {"MetricName": k, "Value": v, "Timestamp": now} for k, v in metrics.items()
                ],
            },
            {"TrainingJobName": name},
        )

    def no_training_job_access(self) -> None:
        self.sm_stub.add_client_error(
            "describe_training_job",
            service_error_code="AccessDeniedException",
            http_status_code=403,
        )

    def __enter__(self) -> Stubbed:
        self.lambda_stub.activate()
        self.sm_stub.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lambda_stub.deactivate()
        self.sm_stub.deactivate()


def job(name: str = "sbx-20261122-0153-a1b2", **fields: Any) -> dict[str, Any]:
    base = {
        "job_name": name,
        "job_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "template": "distilbert-spot",
        "status": "InProgress",
        "secondary_status": "Training",
        "instance_type": "ml.g5.xlarge",
        "instance_count": 1,
        "spot": True,
        "checkpoint_s3_uri": f"s3://ckpt/{name}/",
        "output_s3_uri": f"s3://artifacts/{name}/",
        "console_url": f"https://console/{name}",
        "created_at": "2026-11-22T01:53:00.000Z",
        "requested_by": "direct-invoke",
    }
    base.update(fields)
    return base
