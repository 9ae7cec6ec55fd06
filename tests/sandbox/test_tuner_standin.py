"""The tuner stand-in on the sandbox's endpoint, through boto3's real ``sagemaker`` client.

No deployed platform: one ``BatchSandbox`` for the module (its ``tuner`` layer is always on),
on a frozen ``SimClock``, a tuning job per test. The rules themselves are covered without a
server in ``tests/unit/sandbox_tuner``; this checks the routing, the JSON protocol (times,
errors) and that what the stand-in does not own still reaches moto.
"""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.exceptions import ClientError

from sandbox.batch_api import BatchSandbox
from sandbox.clock import SimClock
from tests.unit.sandbox_tuner.tuning_request import check_output, request

START = 1_800_000_000.0


@pytest.fixture(scope="module")
def sandbox():
    with BatchSandbox() as sb:
        sb.clock = SimClock(start=START)
        sb.tuner.use_clock(sb.clock)
        yield sb


@pytest.fixture(scope="module")
def sm(sandbox):
    return boto3.client(
        "sagemaker",
        endpoint_url=sandbox.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _error(call, **params) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call(**params)
    response = caught.value.response
    return (
        response["Error"]["Code"],
        response["Error"]["Message"],
        response["ResponseMetadata"]["HTTPStatusCode"],
    )


def test_create_describe_and_run_a_tuning_job(sandbox, sm):
    arn = sm.create_hyper_parameter_tuning_job(**request("rt-1", trials=4, parallel=2))[
        "HyperParameterTuningJobArn"
    ]
    assert arn == "arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/rt-1"
    d = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="rt-1")
    assert d["HyperParameterTuningJobStatus"] == "InProgress"
    assert d["CreationTime"] == datetime.fromtimestamp(sandbox.clock(), UTC)
    assert d["TrainingJobStatusCounters"]["InProgress"] == 2
    assert d["ObjectiveStatusCounters"] == {"Succeeded": 0, "Pending": 2, "Failed": 0}
    assert d["TrainingJobDefinition"]["StaticHyperParameters"] == {"warmup": "100"}
    check_output("DescribeHyperParameterTuningJob", d)

    sandbox.tuner.run_to_end("rt-1", objective_of=lambda hp: float(hp["epochs"]) / 10)
    d = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="rt-1")
    assert d["HyperParameterTuningJobStatus"] == "Completed"
    assert d["TrainingJobStatusCounters"]["Completed"] == 4
    assert d["ConsumedResources"]["RuntimeInSeconds"] == 120  # two waves of 60 s
    best = d["BestTrainingJob"]
    assert best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == pytest.approx(
        float(best["TunedHyperParameters"]["epochs"]) / 10
    )
    check_output("DescribeHyperParameterTuningJob", d)

    trial = sm.describe_training_job(TrainingJobName=best["TrainingJobName"])
    assert trial["TuningJobArn"] == arn
    assert trial["HyperParameters"]["_tuning_objective_metric"] == "validation:loss"
    assert trial["ModelArtifacts"]["S3ModelArtifacts"] == (
        f"s3://ftl-out/sweeps/{best['TrainingJobName']}/output/model.tar.gz"
    )
    assert trial["BillableTimeInSeconds"] == 60
    check_output("DescribeTrainingJob", trial)


def test_list_pages_sorts_and_filters(sandbox, sm):
    sm.create_hyper_parameter_tuning_job(**request("rt-list", trials=5, parallel=5))
    names = sandbox.tuner.trials("rt-list")
    for value, name in zip((0.3, 0.1, 0.2), names, strict=False):
        sandbox.tuner.finish_trial(name, objective=value)
    paginator = sm.get_paginator("list_training_jobs_for_hyper_parameter_tuning_job")
    pages = list(
        paginator.paginate(
            HyperParameterTuningJobName="rt-list",
            SortBy="Name",
            SortOrder="Descending",
            PaginationConfig={"PageSize": 2},
        )
    )
    assert [len(p["TrainingJobSummaries"]) for p in pages] == [2, 2, 1]
    listed = [s["TrainingJobName"] for p in pages for s in p["TrainingJobSummaries"]]
    assert listed == sorted(names, reverse=True)
    check_output("ListTrainingJobsForHyperParameterTuningJob", pages[0])
    by_value = sm.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="rt-list", SortBy="FinalObjectiveMetricValue"
    )["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in by_value] == [names[1], names[2], names[0]]
    running = sm.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="rt-list", StatusEquals="InProgress"
    )["TrainingJobSummaries"]
    assert {s["ObjectiveStatus"] for s in running} == {"Pending"} and len(running) == 2


def test_stop(sandbox, sm):
    sm.create_hyper_parameter_tuning_job(**request("rt-stop", trials=6, parallel=3))
    first = sandbox.tuner.trials("rt-stop")[0]
    sandbox.tuner.run_trial(first)
    sandbox.clock.advance(45)
    sm.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="rt-stop")
    d = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="rt-stop")
    assert d["HyperParameterTuningJobStatus"] == "Stopped"
    assert d["TrainingJobStatusCounters"]["Stopped"] == 3
    trial = sm.describe_training_job(TrainingJobName=first)
    assert trial["TrainingJobStatus"] == "Stopped" and trial["BillableTimeInSeconds"] == 45
    code, message, status = _error(
        sm.stop_hyper_parameter_tuning_job, HyperParameterTuningJobName="rt-stop"
    )
    assert (code, status) == ("ValidationException", 400) and "Stopped" in message


@pytest.mark.parametrize(
    ("name", "change", "field"),
    [
        ("x" * 33, {}, "hyperParameterTuningJobName"),
        ("rt-v2", {"TrainingJobEarlyStoppingType": "Auto", "Strategy": "Hyperband"}, "Hyperband"),
        ("rt-v3", {"Strategy": "Grid"}, "Grid strategy"),
    ],
)
def test_a_broken_rule_is_a_validation_exception_naming_its_field(sm, name, change, field):
    params = request(name)
    params["HyperParameterTuningJobConfig"].update(change)
    code, message, status = _error(sm.create_hyper_parameter_tuning_job, **params)
    assert (code, status) == ("ValidationException", 400)
    assert field in message


def test_a_wrong_metric_and_a_name_in_use(sm):
    params = request("rt-inuse")
    params["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]["MetricName"] = (
        "accuracy"
    )
    code, message, _ = _error(sm.create_hyper_parameter_tuning_job, **params)
    assert code == "ValidationException" and "MetricDefinitions" in message
    sm.create_hyper_parameter_tuning_job(**request("rt-inuse"))
    code, message, status = _error(sm.create_hyper_parameter_tuning_job, **request("rt-inuse"))
    assert (code, status) == ("ResourceInUse", 400)


def test_unknown_tuning_jobs_are_resource_not_found(sm):
    for call in (
        sm.describe_hyper_parameter_tuning_job,
        sm.list_training_jobs_for_hyper_parameter_tuning_job,
        sm.stop_hyper_parameter_tuning_job,
    ):
        code, _, status = _error(call, HyperParameterTuningJobName="rt-none")
        assert (code, status) == ("ResourceNotFound", 400)


def test_tags_and_what_is_not_the_stand_ins_reaches_moto(sandbox, sm):
    arn = sm.create_hyper_parameter_tuning_job(**request("rt-tags"))["HyperParameterTuningJobArn"]
    trial_arn = sm.describe_training_job(TrainingJobName=sandbox.tuner.trials("rt-tags")[0])[
        "TrainingJobArn"
    ]
    for resource in (arn, trial_arn):
        assert sm.list_tags(ResourceArn=resource)["Tags"] == [{"Key": "ftl:team", "Value": "alpha"}]
    # a training job of moto's own: created, described and tagged by moto
    sm.create_training_job(
        TrainingJobName="rt-plain",
        RoleArn="arn:aws:iam::123456789012:role/ftl-train",
        AlgorithmSpecification={"TrainingImage": "img:1", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://ftl-out/"},
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 60},
        Tags=[{"Key": "mine", "Value": "moto"}],
    )
    plain = sm.describe_training_job(TrainingJobName="rt-plain")
    assert "TuningJobArn" not in plain
    assert sm.list_tags(ResourceArn=plain["TrainingJobArn"])["Tags"] == [
        {"Key": "mine", "Value": "moto"}
    ]
    code, _, _ = _error(sm.describe_training_job, TrainingJobName="rt-nobody")
    assert code == "ValidationException"  # moto's answer for a job nobody has
