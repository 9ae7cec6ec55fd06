"""A CreateHyperParameterTuningJob request for the tuner stand-in's tests, and a check of an
answer against botocore's output shape."""

from __future__ import annotations

import copy
from typing import Any

import botocore.session
from botocore.validate import ParamValidator

from sandbox.tuner_checks import model_errors

MODEL = botocore.session.get_session().get_service_model("sagemaker")
METRIC = "validation:loss"

RANGES = {
    "ContinuousParameterRanges": [
        {"Name": "lr", "MinValue": "0.00001", "MaxValue": "0.1", "ScalingType": "Logarithmic"},
        {
            "Name": "momentum",
            "MinValue": "0.5",
            "MaxValue": "0.999",
            "ScalingType": "ReverseLogarithmic",
        },
        {"Name": "dropout", "MinValue": "0.0", "MaxValue": "0.5"},
    ],
    "IntegerParameterRanges": [
        {"Name": "epochs", "MinValue": "1", "MaxValue": "5", "ScalingType": "Linear"},
        {"Name": "batch", "MinValue": "8", "MaxValue": "512", "ScalingType": "Logarithmic"},
    ],
    "CategoricalParameterRanges": [{"Name": "optimizer", "Values": ["adam", "sgd", "adamw"]}],
}


def request(
    name: str = "hpo-a",
    *,
    strategy: str = "Random",
    trials: int | None = 6,
    parallel: int = 2,
    objective: str = "Minimize",
    ranges: dict[str, Any] | None = None,
    **config: Any,
) -> dict[str, Any]:
    limits: dict[str, Any] = {"MaxParallelTrainingJobs": parallel}
    if trials is not None:
        limits["MaxNumberOfTrainingJobs"] = trials
    return {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobConfig": {
            "Strategy": strategy,
            "HyperParameterTuningJobObjective": {"Type": objective, "MetricName": METRIC},
            "ResourceLimits": limits,
            "ParameterRanges": copy.deepcopy(RANGES if ranges is None else ranges),
            **config,
        },
        "TrainingJobDefinition": {
            "StaticHyperParameters": {"warmup": "100"},
            "AlgorithmSpecification": {
                "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ftl:1",
                "TrainingInputMode": "File",
                "MetricDefinitions": [
                    {"Name": METRIC, "Regex": "val_loss=([0-9.]+)"},
                    {"Name": "train:loss", "Regex": "loss=([0-9.]+)"},
                ],
            },
            "RoleArn": "arn:aws:iam::123456789012:role/ftl-train",
            "OutputDataConfig": {"S3OutputPath": "s3://ftl-out/sweeps/"},
            "ResourceConfig": {
                "InstanceType": "ml.g5.xlarge",
                "InstanceCount": 1,
                "VolumeSizeInGB": 50,
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            "EnableManagedSpotTraining": False,
            "Environment": {"FTL_TEAM": "alpha"},
        },
        "Tags": [{"Key": "ftl:team", "Value": "alpha"}],
    }


def check_output(operation: str, answer: dict[str, Any], *, allow_missing: tuple = ()) -> None:
    """``answer`` fits botocore's output shape of ``operation`` at every depth: each key a
    member, each value of the member's type, each required member there (``allow_missing``:
    top-level members SageMaker itself leaves out in the answer's state)."""
    shape = MODEL.operation_model(operation).output_shape
    answer = {k: v for k, v in answer.items() if k != "ResponseMetadata"}
    report = ParamValidator().validate(answer, shape)
    errors = [
        e
        for e in report._errors
        if not (
            e[0] == "missing required field"
            and e[1] == ""
            and e[2]["required_name"] in allow_missing
        )
    ]
    assert errors == [], f"{operation}: {errors}"
    # and the constraints botocore does not check: enums (statuses), lengths, patterns
    assert model_errors(answer, shape) == []
