"""The tuner stand-in's rules (``sandbox/tuner.py``), called directly: no server.

Each test makes its own ``TunerStandIn`` on a frozen ``SimClock``, so times are exact.
"""

from __future__ import annotations

import copy
import math
import random
import re
import statistics
import threading
from datetime import UTC, datetime

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from sandbox.clock import SimClock
from sandbox.tuner import TunerStandIn
from sandbox.tuner_space import Range, grid, ranges_of, sample
from tests.unit.sandbox_tuner.tuning_request import METRIC, RANGES, check_output, request

START = 1_800_000_000.0


@pytest.fixture
def clock() -> SimClock:
    return SimClock(start=START)


@pytest.fixture
def tuner(clock) -> TunerStandIn:
    return TunerStandIn(clock=clock)


def _refused(tuner, params, code="ValidationException") -> str:
    with pytest.raises(ClientError) as caught:
        tuner.create_hyper_parameter_tuning_job(**params)
    assert caught.value.response["Error"]["Code"] == code
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return caught.value.response["Error"]["Message"]


def _config(params) -> dict:
    return params["HyperParameterTuningJobConfig"]


def _running(tuner, name) -> int:
    counters = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
    return counters["TrainingJobStatusCounters"]["InProgress"]


# ---------------------------------------------------------------- the request checks
def _edit(change):
    params = request()
    change(params)
    return params


def _too_many_ranges(p):  # 31 in all, though no kind has over 30 (the model's limit)
    _config(p)["ParameterRanges"] = {
        "CategoricalParameterRanges": [{"Name": f"c{i}", "Values": ["a"]} for i in range(16)],
        "IntegerParameterRanges": [
            {"Name": f"i{i}", "MinValue": "1", "MaxValue": "2"} for i in range(15)
        ],
    }


def top(**fields):
    return lambda p: p.update(fields)


def cfg(**fields):
    return lambda p: _config(p).update(fields)


def limits(**fields):
    return lambda p: _config(p)["ResourceLimits"].update(fields)


def rng(kind, index, **fields):
    return lambda p: _config(p)["ParameterRanges"][f"{kind}ParameterRanges"][index].update(fields)


def definition(**fields):
    return lambda p: p["TrainingJobDefinition"].update(fields)


def drop(*path):
    def change(p):
        for key in path[:-1]:
            p = p[key]
        p.pop(path[-1])

    return change


def _plural_only(p):
    p["TrainingJobDefinitions"] = [p.pop("TrainingJobDefinition")]


def _both(p):
    p["TrainingJobDefinitions"] = [copy.deepcopy(p["TrainingJobDefinition"])]


def _ranged_and_static(p):
    p["TrainingJobDefinition"]["StaticHyperParameters"]["lr"] = "0.1"


OBJECTIVE = "HyperParameterTuningJobObjective"
TUNING = {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5}
RULES = [
    # (what, edit, the field the message names)
    ("name over 32", top(HyperParameterTuningJobName="a" * 33), "hyperParameterTuningJobName"),
    ("name pattern", top(HyperParameterTuningJobName="bad_name"), "hyperParameterTuningJobName"),
    ("strategy enum", cfg(Strategy="Genetic"), "hyperParameterTuningJobConfig.strategy"),
    ("750 trials", limits(MaxNumberOfTrainingJobs=751), "MaxNumberOfTrainingJobs"),
    ("100 parallel", limits(MaxParallelTrainingJobs=101), "MaxParallelTrainingJobs"),
    (
        "trials required",
        drop("HyperParameterTuningJobConfig", "ResourceLimits", "MaxNumberOfTrainingJobs"),
        "MaxNumberOfTrainingJobs",
    ),
    (
        "objective metric",
        cfg(**{OBJECTIVE: {"Type": "Maximize", "MetricName": "acc"}}),
        f"{OBJECTIVE}.MetricName",
    ),
    ("objective required", drop("HyperParameterTuningJobConfig", OBJECTIVE), OBJECTIVE),
    ("ranged and static", _ranged_and_static, "StaticHyperParameters"),
    ("31 ranges", _too_many_ranges, "at most 30 hyperparameters"),
    ("grid continuous", cfg(Strategy="Grid"), "Grid"),
    (
        "hyperband early stopping",
        cfg(Strategy="Hyperband", TrainingJobEarlyStoppingType="Auto"),
        "TrainingJobEarlyStoppingType",
    ),
    ("log needs min > 0", rng("Continuous", 0, MinValue="0"), "Logarithmic"),
    ("reverse log within [0, 1)", rng("Continuous", 1, MaxValue="1"), "ReverseLogarithmic"),
    (
        "reverse log continuous only",
        rng("Integer", 0, ScalingType="ReverseLogarithmic"),
        "IntegerParameterRanges",
    ),
    ("min below max", rng("Integer", 0, MinValue="5"), "IntegerParameterRanges"),
    ("integer bounds", rng("Integer", 0, MaxValue="2.5"), "IntegerParameterRanges"),
    ("both definitions", _both, "TrainingJobDefinitions"),
    ("plural only", _plural_only, "TrainingJobDefinition"),
    ("no definition", drop("TrainingJobDefinition"), "TrainingJobDefinition"),
    (
        "two resource configs",
        definition(HyperParameterTuningResourceConfig=TUNING),
        "HyperParameterTuningResourceConfig",
    ),
    ("tag value pattern", top(Tags=[{"Key": "k", "Value": "semi;colon"}]), "tags.1.member.value"),
]


@pytest.mark.parametrize(("what", "change", "field"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_is_a_validation_exception_naming_its_field(tuner, what, change, field):
    message = _refused(tuner, _edit(change))
    assert field.lower() in message.lower(), message
    assert tuner.jobs == {}


def test_botocores_own_checks_come_first_as_a_boto3_client_raises_them(tuner):
    params = request()
    del params["HyperParameterTuningJobConfig"]["Strategy"]
    with pytest.raises(ParamValidationError, match="Strategy"):
        tuner.create_hyper_parameter_tuning_job(**params)


def test_constraint_messages_read_as_sagemakers_and_count_every_breach(tuner):
    message = _refused(tuner, request(name="x" * 40))
    assert message.startswith("2 validation errors detected: Value 'xxxx")
    assert "Member must have length less than or equal to 32" in message
    assert "Member must satisfy regular expression pattern" in message


def test_a_name_in_use_is_resource_in_use_whatever_its_case(tuner):
    tuner.create_hyper_parameter_tuning_job(**request("Sweep-1"))
    for name in ("Sweep-1", "sweep-1"):
        assert "already exists" in _refused(tuner, request(name), "ResourceInUse")


@pytest.mark.parametrize(
    "call",
    [
        "describe_hyper_parameter_tuning_job",
        "list_training_jobs_for_hyper_parameter_tuning_job",
        "stop_hyper_parameter_tuning_job",
    ],
)
def test_an_unknown_tuning_job_is_resource_not_found(tuner, call):
    with pytest.raises(ClientError) as caught:
        getattr(tuner, call)(HyperParameterTuningJobName="nope")
    assert caught.value.response["Error"]["Code"] == "ResourceNotFound"


# ---------------------------------------------------------------- values
def test_sampled_values_stay_in_their_ranges_on_their_scales():
    rng = random.Random(7)
    ranges = {r.name: r for r in ranges_of(RANGES)}
    draws = {name: [sample(r, rng) for _ in range(4000)] for name, r in ranges.items()}
    for name, r in ranges.items():
        if r.kind == "Categorical":
            assert set(draws[name]) == set(r.values)
            continue
        values = [float(v) for v in draws[name]]
        assert r.low <= min(values) and max(values) <= r.high, name
    assert all(re.fullmatch(r"\d+", v) for v in draws["epochs"] + draws["batch"])
    assert {int(v) for v in draws["epochs"]} == {1, 2, 3, 4, 5}
    lr = [float(v) for v in draws["lr"]]
    # log-uniform: half the draws below the geometric mean, a tenth below 1e-4.4
    assert 0.45 < sum(v < math.sqrt(1e-5 * 0.1) for v in lr) / len(lr) < 0.55
    assert statistics.median(lr) < 0.01  # a uniform draw's median would be ~0.05
    # reverse logarithmic: crowded towards MaxValue (0.999), median 1 - sqrt(0.001 * 0.5)
    momentum = statistics.median(float(v) for v in draws["momentum"])
    assert momentum == pytest.approx(1 - math.sqrt(0.001 * 0.5), abs=0.01)
    batch = [int(v) for v in draws["batch"]]
    assert sum(b < 64 for b in batch) / len(batch) == pytest.approx(0.5, abs=0.05)
    assert all(isinstance(v, str) for vs in draws.values() for v in vs)


def test_floats_are_written_as_their_repr():
    rng = random.Random(1)
    r = Range("lr", "Continuous", low=0.0001, high=0.0002, scale="Linear")
    value = sample(r, rng)
    assert value == repr(float(value)) and value.startswith("0.0001")


def test_trials_get_seeded_values_named_as_sagemaker_names_them(tuner):
    tuner.create_hyper_parameter_tuning_job(**request("a", RandomSeed=11))
    tuner.create_hyper_parameter_tuning_job(**request("b", RandomSeed=11))
    tuner.create_hyper_parameter_tuning_job(**request("c"))
    a, b, c = (tuner.trials(n) for n in "abc")
    assert all(re.fullmatch(r"a-00[12]-[0-9a-f]{8}", n) for n in a)
    tuned = {n: tuner.describe_training_job(TrainingJobName=n)["HyperParameters"] for n in a + b}

    def values(name):
        return {k: v for k, v in tuned[name].items() if k != "_tuning_objective_metric"}

    assert values(a[0]) == values(b[0]) and values(a[1]) == values(b[1])  # same seed
    c0 = tuner.describe_training_job(TrainingJobName=c[0])["HyperParameters"]
    assert {k: v for k, v in c0.items() if k != "_tuning_objective_metric"} != values(a[0])
    again = TunerStandIn()
    again.create_hyper_parameter_tuning_job(**request("c"))  # seeded from its name
    assert again.describe_training_job(TrainingJobName=c[0])["HyperParameters"] == c0
    hp = tuned[a[0]]
    assert hp["warmup"] == "100" and hp["_tuning_objective_metric"] == METRIC
    assert set(hp) == {"warmup", "_tuning_objective_metric", *(r.name for r in ranges_of(RANGES))}


def test_grid_tries_every_combination_once(tuner):
    ranges = {
        "CategoricalParameterRanges": [
            {"Name": "optimizer", "Values": ["adam", "sgd", "adamw"]},
            {"Name": "schedule", "Values": ["cosine", "linear"]},
        ]
    }
    tuner.create_hyper_parameter_tuning_job(
        **request("grid", strategy="Grid", trials=None, parallel=4, ranges=ranges)
    )
    assert len(tuner.trials("grid")) == 4
    done = tuner.run_to_end("grid", objective_of=lambda hp: 0.5, seconds_per_trial=10)
    assert done["HyperParameterTuningJobStatus"] == "Completed"
    assert done["TrainingJobStatusCounters"]["Completed"] == 6
    page = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="grid", MaxResults=100
    )
    combos = [
        tuple(sorted(s["TunedHyperParameters"].items())) for s in page["TrainingJobSummaries"]
    ]
    assert len(combos) == len(set(combos)) == 6
    assert set(combos) == {tuple(sorted(g.items())) for g in grid(ranges_of(ranges))}


def test_grid_with_fewer_trials_allowed_stops_there(tuner):
    ranges = {"CategoricalParameterRanges": [{"Name": "optimizer", "Values": list("abcde")}]}
    tuner.create_hyper_parameter_tuning_job(
        **request("g3", strategy="Grid", trials=3, parallel=5, ranges=ranges)
    )
    assert len(tuner.trials("g3")) == 3


# ---------------------------------------------------------------- the life cycle
def test_the_parallel_limit_is_never_exceeded_and_every_trial_starts(tuner, clock):
    tuner.create_hyper_parameter_tuning_job(**request("par", trials=9, parallel=3))
    seen = []

    def objective(hp):
        seen.append(_running(tuner, "par"))
        return 0.2

    done = tuner.run_to_end("par", objective_of=objective, seconds_per_trial=30)
    assert max(seen) == 3 and all(n <= 3 for n in seen)
    assert done["TrainingJobStatusCounters"]["Completed"] == 9
    assert done["ConsumedResources"]["RuntimeInSeconds"] == 90  # three waves of 30 s
    assert clock() == START + 90


def test_trials_finished_out_of_order_start_the_next_ones_as_slots_free(tuner, clock):
    tuner.create_hyper_parameter_tuning_job(**request("ooo", trials=5, parallel=2))
    first, second = tuner.trials("ooo")
    tuner.run_trial(second)
    clock.advance(40)
    ended = tuner.finish_trial(second, objective=0.3)
    assert ended["BillableTimeInSeconds"] == ended["TrainingTimeInSeconds"] == 40
    assert len(tuner.trials("ooo")) == 3 and _running(tuner, "ooo") == 2
    tuner.finish_trial(first, status="Failed", reason="AlgorithmError: out of memory")
    assert _running(tuner, "ooo") == 2
    d = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="ooo")
    assert d["TrainingJobStatusCounters"]["NonRetryableError"] == 1
    assert d["ObjectiveStatusCounters"] == {"Succeeded": 1, "Pending": 2, "Failed": 1}
    failed = tuner.describe_training_job(TrainingJobName=first)
    assert failed["FailureReason"] == "AlgorithmError: out of memory"
    assert "ModelArtifacts" not in failed and "FinalMetricDataList" not in failed
    with pytest.raises(ValueError):
        tuner.finish_trial(first)


def test_a_completed_trial_has_its_artifacts_metric_and_times(tuner, clock):
    params = request("art")
    params["TrainingJobDefinition"]["OutputDataConfig"]["S3OutputPath"] = "s3://b/p"
    tuner.create_hyper_parameter_tuning_job(**params)
    name = tuner.trials("art")[0]
    tuner.run_trial(name)
    clock.advance(125)
    out = tuner.finish_trial(name, objective=0.25)
    assert out["ModelArtifacts"] == {"S3ModelArtifacts": f"s3://b/p/{name}/output/model.tar.gz"}
    assert out["FinalMetricDataList"] == [
        {"MetricName": METRIC, "Value": 0.25, "Timestamp": out["TrainingEndTime"]}
    ]
    assert out["TrainingStartTime"] == datetime.fromtimestamp(START, UTC)
    assert (out["TrainingEndTime"] - out["TrainingStartTime"]).total_seconds() == 125
    assert out["TuningJobArn"].endswith(":hyper-parameter-tuning-job/art")
    assert out["Environment"] == {"FTL_TEAM": "alpha"}
    assert out["EnableManagedSpotTraining"] is False


def test_early_stopping_auto_stops_a_trial_worse_than_the_median(tuner):
    tuner.create_hyper_parameter_tuning_job(
        **request("es", trials=6, parallel=1, TrainingJobEarlyStoppingType="Auto")
    )
    objectives = iter([0.5, 0.4, 0.6, 0.55, 0.3, 0.45])  # minimize: median of those in
    done = tuner.run_to_end("es", objective_of=lambda hp: next(objectives))
    page = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="es", SortBy="CreationTime"
    )
    statuses = [s["TrainingJobStatus"] for s in page["TrainingJobSummaries"]]
    # 4th: 0.55 > median(0.5, 0.4, 0.6); 5th: 0.3 better; 6th: 0.45 < median 0.5: completes
    assert statuses == ["Completed"] * 3 + ["Stopped", "Completed", "Completed"]
    stopped = page["TrainingJobSummaries"][3]
    assert stopped["ObjectiveStatus"] == "Succeeded"
    assert stopped["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == 0.55
    assert done["TrainingJobStatusCounters"]["Stopped"] == 1
    assert done["BestTrainingJob"]["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == 0.3
    assert done["HyperParameterTuningJobStatus"] == "Completed"


def test_early_stopping_off_lets_every_trial_complete(tuner):
    tuner.create_hyper_parameter_tuning_job(**request("noes", trials=6, parallel=1))
    objectives = iter([0.5, 0.4, 0.6, 0.9, 0.95, 0.99])
    done = tuner.run_to_end("noes", objective_of=lambda hp: next(objectives))
    assert done["TrainingJobStatusCounters"]["Completed"] == 6


def test_the_target_objective_ends_the_tuning_job_and_stops_running_trials(tuner, clock):
    tuner.create_hyper_parameter_tuning_job(
        **request(
            "target",
            trials=20,
            parallel=3,
            objective="Maximize",
            TuningJobCompletionCriteria={"TargetObjectiveMetricValue": 0.9},
        )
    )
    first, second, third = tuner.trials("target")
    tuner.run_trial(second)
    clock.advance(50)
    tuner.finish_trial(first, objective=0.5)
    assert len(tuner.trials("target")) == 4
    d = tuner.finish_trial(third, objective=0.95)  # reaches it
    assert d["TrainingJobStatus"] == "Completed"
    job = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="target")
    assert job["HyperParameterTuningJobStatus"] == "Completed"
    assert job["BestTrainingJob"]["TrainingJobName"] == third
    assert len(tuner.trials("target")) == 4  # no new trial
    stopped = tuner.describe_training_job(TrainingJobName=second)
    assert stopped["TrainingJobStatus"] == "Stopped" and stopped["BillableTimeInSeconds"] == 50
    assert job["TrainingJobStatusCounters"] == {
        "Completed": 2,
        "InProgress": 0,
        "RetryableError": 0,
        "NonRetryableError": 0,
        "Stopped": 2,
    }


def test_best_objective_not_improving_ends_the_tuning_job(tuner):
    tuner.create_hyper_parameter_tuning_job(
        **request(
            "patience",
            trials=50,
            parallel=1,
            TuningJobCompletionCriteria={
                "BestObjectiveNotImproving": {"MaxNumberOfTrainingJobsNotImproving": 3}
            },
        )
    )
    objectives = iter([0.5, 0.4, 0.45, 0.41, 0.6, 0.1])
    done = tuner.run_to_end("patience", objective_of=lambda hp: next(objectives))
    assert len(tuner.trials("patience")) == 5
    assert done["TuningJobCompletionDetails"] == {"NumberOfTrainingJobsObjectiveNotImproving": 3}
    assert done["HyperParameterTuningJobStatus"] == "Completed"


def test_every_trial_failed_fails_the_tuning_job(tuner):
    tuner.create_hyper_parameter_tuning_job(**request("fail", trials=3, parallel=2))
    while (
        tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="fail")[
            "HyperParameterTuningJobStatus"
        ]
        == "InProgress"
    ):
        running = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="fail", StatusEquals="InProgress"
        )["TrainingJobSummaries"]
        tuner.finish_trial(running[0]["TrainingJobName"], status="Failed")
    d = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="fail")
    assert d["HyperParameterTuningJobStatus"] == "Failed"
    assert "All 3 training jobs failed" in d["FailureReason"]
    assert d["TrainingJobStatusCounters"]["NonRetryableError"] == 3
    assert "BestTrainingJob" not in d
    check_output("DescribeHyperParameterTuningJob", d)


def test_stop_stops_running_trials_billed_up_to_now_and_records_each_state(tuner, clock):
    tuner.create_hyper_parameter_tuning_job(**request("stop", trials=6, parallel=2))
    first, second = tuner.trials("stop")
    tuner.run_trial(first)
    clock.advance(70)
    assert tuner.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="stop") == {}
    d = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="stop")
    assert d["HyperParameterTuningJobStatus"] == "Stopped"
    assert d["HyperParameterTuningEndTime"] == datetime.fromtimestamp(START + 70, UTC)
    assert d["TrainingJobStatusCounters"]["Stopped"] == 2
    assert tuner.describe_training_job(TrainingJobName=first)["BillableTimeInSeconds"] == 70
    assert tuner.describe_training_job(TrainingJobName=second)["BillableTimeInSeconds"] == 0
    assert len(tuner.trials("stop")) == 2
    states = [e["detail"]["HyperParameterTuningJobStatus"] for e in tuner.outbox]
    assert states == ["InProgress", "Stopping", "Stopped"]
    event = tuner.outbox[-1]
    assert event["detail-type"] == "SageMaker HyperParameter Tuning Job State Change"
    assert event["source"] == "aws.sagemaker" and event["resources"] == [
        d["HyperParameterTuningJobArn"]
    ]
    assert event["detail"]["CreationTime"] == int(START * 1000)
    with pytest.raises(ClientError) as caught:
        tuner.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="stop")
    assert caught.value.response["Error"]["Code"] == "ValidationException"


def test_a_clock_without_advance_bills_the_seconds_given(clock):
    tuner = TunerStandIn(clock=lambda: datetime.fromtimestamp(clock(), UTC))
    tuner.create_hyper_parameter_tuning_job(**request("wall", trials=2, parallel=2))
    tuner.run_to_end("wall", seconds_per_trial=33)
    for name in tuner.trials("wall"):
        assert tuner.describe_training_job(TrainingJobName=name)["BillableTimeInSeconds"] == 33


def test_the_default_objective_is_deterministic_and_the_best_is_the_best(tuner):
    tuner.create_hyper_parameter_tuning_job(**request("dflt", trials=8, parallel=2))
    done = tuner.run_to_end("dflt")
    page = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="dflt", SortBy="FinalObjectiveMetricValue"
    )
    values = [
        s["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
        for s in page["TrainingJobSummaries"]
    ]
    assert values == sorted(values) and len(set(values)) > 1
    best = done["BestTrainingJob"]
    assert best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == values[0]
    assert best["TrainingJobName"] == page["TrainingJobSummaries"][0]["TrainingJobName"]
    again = TunerStandIn()
    again.create_hyper_parameter_tuning_job(**request("dflt", trials=8, parallel=2))
    assert again.run_to_end("dflt")["BestTrainingJob"]["TrainingJobName"] == best["TrainingJobName"]


def test_list_pages_filters_and_sorts(tuner):
    tuner.create_hyper_parameter_tuning_job(**request("lst", trials=7, parallel=7))
    names = tuner.trials("lst")
    for i, name in enumerate(names[:4]):
        tuner.finish_trial(name, objective=0.1 * (4 - i))
    seen, token = [], None
    while True:
        kwargs = {"NextToken": token} if token else {}
        page = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="lst", MaxResults=3, SortOrder="Descending", **kwargs
        )
        assert len(page["TrainingJobSummaries"]) <= 3
        seen += [s["TrainingJobName"] for s in page["TrainingJobSummaries"]]
        token = page.get("NextToken")
        if not token:
            break
    assert seen == sorted(names, reverse=True)
    by_value = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="lst", SortBy="FinalObjectiveMetricValue"
    )["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in by_value] == names[:4][
        ::-1
    ]  # without objective: left out
    running = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="lst", StatusEquals="InProgress", SortBy="Status"
    )["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in running] == names[4:]
    with pytest.raises(ParamValidationError):  # botocore's minimum
        tuner.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="lst", MaxResults=0
        )
    with pytest.raises(ClientError, match="less than or equal to 100"):
        tuner.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="lst", MaxResults=101
        )
    with pytest.raises(ClientError, match="NextToken"):
        tuner.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName="lst", NextToken="garbage"
        )


def test_tags_of_the_tuning_job_and_its_trials(tuner):
    arn = tuner.create_hyper_parameter_tuning_job(**request("tags"))["HyperParameterTuningJobArn"]
    trial = tuner.describe_training_job(TrainingJobName=tuner.trials("tags")[0])
    expected = {"Tags": [{"Key": "ftl:team", "Value": "alpha"}]}
    assert tuner.list_tags(ResourceArn=arn) == expected
    assert tuner.list_tags(ResourceArn=trial["TrainingJobArn"]) == expected
    assert tuner.owns_arn(arn.upper()) and not tuner.owns_arn(arn + "x")


def test_answers_fit_botocores_output_shapes(tuner, clock):
    tuner.create_hyper_parameter_tuning_job(
        **request("shape", trials=4, parallel=2, TrainingJobEarlyStoppingType="Auto")
    )
    first = tuner.trials("shape")[0]
    check_output(
        "DescribeHyperParameterTuningJob",
        tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="shape"),
    )
    # SageMaker has no ModelArtifacts for a training job that has not completed
    starting = tuner.describe_training_job(TrainingJobName=first)
    check_output("DescribeTrainingJob", starting, allow_missing=("ModelArtifacts",))
    tuner.run_trial(first)
    clock.advance(10)
    tuner.finish_trial(first, objective=0.4)
    done = tuner.run_to_end("shape")
    assert "BestTrainingJob" in done and "HyperParameterTuningEndTime" in done
    check_output("DescribeHyperParameterTuningJob", done)
    check_output("DescribeTrainingJob", tuner.describe_training_job(TrainingJobName=first))
    page = tuner.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="shape", MaxResults=2
    )
    check_output("ListTrainingJobsForHyperParameterTuningJob", page)
    check_output("ListTags", tuner.list_tags(ResourceArn=done["HyperParameterTuningJobArn"]))
    check_output(
        "CreateHyperParameterTuningJob",
        tuner.create_hyper_parameter_tuning_job(**request("shape2")),
    )


def test_a_tuning_resource_config_gives_the_trials_its_first_instance_config(tuner):
    params = request("hprc")
    definition = params["TrainingJobDefinition"]
    del definition["ResourceConfig"]
    definition["HyperParameterTuningResourceConfig"] = {
        "AllocationStrategy": "Prioritized",
        "InstanceConfigs": [
            {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        ],
    }
    tuner.create_hyper_parameter_tuning_job(**params)
    trial = tuner.describe_training_job(TrainingJobName=tuner.trials("hprc")[0])
    assert trial["ResourceConfig"] == {
        "InstanceType": "ml.g5.2xlarge",
        "InstanceCount": 1,
        "VolumeSizeInGB": 30,
    }


def test_answers_are_copies(tuner):
    tuner.create_hyper_parameter_tuning_job(**request("copy"))
    d = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="copy")
    d["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxParallelTrainingJobs"] = 99
    again = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="copy")
    assert again["HyperParameterTuningJobConfig"]["ResourceLimits"]["MaxParallelTrainingJobs"] == 2


def test_concurrent_creates_of_one_name_make_one_tuning_job(tuner):
    results: list[str] = []
    barrier = threading.Barrier(12)

    def create():
        barrier.wait()
        try:
            tuner.create_hyper_parameter_tuning_job(**request("race"))
            results.append("created")
        except ClientError as exc:
            results.append(exc.response["Error"]["Code"])

    threads = [threading.Thread(target=create) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["ResourceInUse"] * 11 + ["created"]
    assert len(tuner.trials("race")) == 2
