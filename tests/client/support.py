"""Stubbed boto3 clients for the client's unit tests (no network)."""

from __future__ import annotations

import io
import json
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
    """A LauncherClient over a stubbed lambda client; records each event sent. The client
    gets no other AWS client: it must learn everything about a job from the launcher."""

    def __init__(self) -> None:
        self.lam = aws("lambda")
        self.lambda_stub = Stubber(self.lam)
        self.events: list[dict[str, Any]] = []
        self.lam.meta.events.register("before-parameter-build.lambda.Invoke", self._record)
        self.client = LauncherClient(function_name=FUNCTION, clients={"lambda": self.lam})

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.events.append(json.loads(params["Payload"]))

    def answer(self, body: Any, *, function_error: str | None = None) -> Stubbed:
        reply: dict[str, Any] = {"StatusCode": 200, "Payload": payload(body)}
        if function_error:
            reply["FunctionError"] = function_error
        self.lambda_stub.add_response("invoke", reply, {"FunctionName": FUNCTION, "Payload": ANY})
        return self

    def __enter__(self) -> Stubbed:
        self.lambda_stub.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lambda_stub.deactivate()
        # Only the launcher was called (no SageMaker DescribeTrainingJob around it).
        assert set(self.client._clients) <= {"lambda"}, sorted(self.client._clients)


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
