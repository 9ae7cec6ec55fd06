"""The baseline: the SageMaker Python SDK v3 (``sagemaker.train.ModelTrainer``) building the same
training job the launcher renders, offline.

Nothing here reaches the network:

* the boto3 session carries a ``before-send`` hook that answers ``CreateTrainingJob`` and
  ``DescribeTrainingJob`` with canned responses and refuses every other call;
* role validation (an IAM call) is off (``SAGEMAKER_VALIDATE_ROLE=false``) and the role is given
  as an ARN;
* telemetry (an STS call and an HTTPS GET on a background thread per ``train()``) is replaced by
  a no-op. The SDK's own opt-out needs a SageMaker config file, and with any config file the SDK
  re-validates it against its JSON schema on every lookup (about 1 s per ``train()``), which
  would make the baseline look far worse than a default SDK set-up.

``model_trainer`` maps a rendered ``CreateTrainingJob`` request onto ModelTrainer's own
configuration objects, so the SDK builds the same job: image, role, compute and spot, stopping
condition, output and checkpoint locations, KMS key, hyperparameters, environment, channels,
tags, TensorBoard output, retry strategy and metric definitions.
"""

from __future__ import annotations

import json
import os
from typing import Any

_PREPARED: list[bool] = []
JOB_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"


def prepare_environment() -> dict[str, str]:
    """Environment variables that keep the SDK offline; also set in this process."""
    env = {"SAGEMAKER_VALIDATE_ROLE": "false"}
    os.environ.update(env)
    return env


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def _canned(request: Any, **_: Any) -> Any:
    """before-send: answer the two calls ``train(wait=False)`` makes; refuse anything else."""
    from botocore.awsrequest import AWSResponse

    target = (request.headers.get("X-Amz-Target") or b"").decode()
    if target.endswith(".CreateTrainingJob"):
        name = json.loads(request.body)["TrainingJobName"]
        body: dict[str, Any] = {"TrainingJobArn": JOB_ARN + name}
    elif target.endswith(".DescribeTrainingJob"):
        name = json.loads(request.body)["TrainingJobName"]
        body = {
            "TrainingJobName": name,
            "TrainingJobArn": JOB_ARN + name,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Starting",
            "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "x"},
            "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            "ModelArtifacts": {"S3ModelArtifacts": "s3://x/y"},
            "CreationTime": 0,
        }
    else:
        raise RuntimeError(f"the SDK baseline tried to reach AWS: {target or request.url}")
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    return AWSResponse(request.url, 200, headers, _Raw(json.dumps(body).encode()))


def _no_telemetry(*_: Any, **__: Any) -> None:
    return None


def sdk_session(region: str = "us-east-1") -> Any:
    """A ``sagemaker`` Session over a boto3 session that never leaves this process."""
    if not _PREPARED:
        prepare_environment()
        from sagemaker.core.telemetry import telemetry_logging

        telemetry_logging._send_telemetry_request = _no_telemetry
        _PREPARED.append(True)
    import boto3
    from sagemaker.core.helper.session_helper import Session

    boto_session = boto3.session.Session(
        region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    boto_session.events.register_first("before-send", _canned)
    return Session(boto_session=boto_session)


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def model_trainer(rendered: dict[str, Any], session: Any) -> Any:
    """A ModelTrainer configured for the same job as ``rendered`` (a CreateTrainingJob request)."""
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import (
        CheckpointConfig,
        Compute,
        InputData,
        MetricDefinition,
        OutputDataConfig,
        RetryStrategy,
        StoppingCondition,
        Tag,
        TensorBoardOutputConfig,
    )

    algo = rendered["AlgorithmSpecification"]
    res = rendered["ResourceConfig"]
    stop = rendered["StoppingCondition"]
    out = rendered["OutputDataConfig"]
    trainer = ModelTrainer(
        sagemaker_session=session,
        role=rendered["RoleArn"],
        training_image=algo["TrainingImage"],
        training_input_mode=algo["TrainingInputMode"],
        base_job_name=rendered["TrainingJobName"][:40].rstrip("-"),
        compute=Compute(
            instance_type=res["InstanceType"],
            instance_count=res["InstanceCount"],
            volume_size_in_gb=res["VolumeSizeInGB"],
            enable_managed_spot_training=rendered["EnableManagedSpotTraining"],
        ),
        stopping_condition=StoppingCondition(
            max_runtime_in_seconds=stop["MaxRuntimeInSeconds"],
            max_wait_time_in_seconds=stop.get("MaxWaitTimeInSeconds"),
        ),
        output_data_config=OutputDataConfig(
            s3_output_path=out["S3OutputPath"], kms_key_id=out.get("KmsKeyId")
        ),
        checkpoint_config=CheckpointConfig(
            s3_uri=rendered["CheckpointConfig"]["S3Uri"],
            local_path=rendered["CheckpointConfig"]["LocalPath"],
        ),
        hyperparameters={k: _decode(v) for k, v in rendered["HyperParameters"].items()},
        environment=dict(rendered.get("Environment", {})),
        input_data_config=[
            InputData(
                channel_name=c["ChannelName"],
                data_source=c["DataSource"]["S3DataSource"]["S3Uri"],
            )
            for c in rendered.get("InputDataConfig", [])
        ],
        tags=[Tag(key=t["Key"], value=t["Value"]) for t in rendered.get("Tags", [])],
    )
    tb = rendered.get("TensorBoardOutputConfig")
    if tb:
        trainer.with_tensorboard_output_config(
            TensorBoardOutputConfig(s3_output_path=tb["S3OutputPath"], local_path=tb["LocalPath"])
        )
    retry = rendered.get("RetryStrategy")
    if retry:
        trainer.with_retry_strategy(
            RetryStrategy(maximum_retry_attempts=retry["MaximumRetryAttempts"])
        )
    metrics = algo.get("MetricDefinitions")
    if metrics:
        trainer.with_metric_definitions(
            [MetricDefinition(name=m["Name"], regex=m["Regex"]) for m in metrics]
        )
    return trainer


def sdk_request(trainer: Any) -> dict[str, Any]:
    """The CreateTrainingJob request the SDK would send (boto3 shape), built offline."""
    return trainer._create_training_job_args(boto3=True)


def rendered_example() -> dict[str, Any]:
    """The launcher's rendering of ``bench._common.REQUEST`` (imports jobmodel only)."""
    import secrets

    from ._common import launcher_renderer

    return launcher_renderer()(secrets.token_hex(2))
