"""A sweep through the trigger (issue 37), against moto, with a small tuner in front of
moto's SageMaker client: the request it gets, the one record, the trials charged once as they
end, the cap, the stop, the best trial registered, and refusals that create nothing.

The tuner here (``Tuner``) is the least the flow needs: it keeps each tuning job's request
and the trials a test gives it. The sandbox's stand-in (``sandbox/tuner.py``) plays the
tuner's documented life cycle end to end (``tests/sandbox/test_sweeps_deployed.py``)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError

from jobmodel.after_training.registry import group_name
from tests.lambda_support import client, create_ledger_table, load_handler, trigger_env
from tests.unit.trigger.conftest import TRIGGER_DIR, Launcher
from tests.unit.trigger.test_teams import teams_env

TEMPLATE = "distilbert-spot"
MODEL = botocore.session.get_session().get_service_model("sagemaker")


def _error(code: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, op)


class Tuner:
    """moto's SageMaker client with tuning jobs and trials kept here."""

    def __init__(self, moto: Any) -> None:
        self.moto = moto
        self.jobs: dict[str, dict[str, Any]] = {}
        self.trials: dict[str, list[dict[str, Any]]] = {}
        self.billable: dict[str, int] = {}
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.moto, name)

    def create_hyper_parameter_tuning_job(self, **request: Any) -> dict[str, Any]:
        self.calls.append("create")
        botocore.validate.validate_parameters(
            request, MODEL.operation_model("CreateHyperParameterTuningJob").input_shape
        )
        name = request["HyperParameterTuningJobName"]
        if name in self.jobs:
            raise _error("ResourceInUse", "CreateHyperParameterTuningJob")
        arn = f"arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/{name}"
        self.jobs[name] = {"request": request, "status": "InProgress", "arn": arn}
        self.trials[name] = []
        return {"HyperParameterTuningJobArn": arn}

    def describe_hyper_parameter_tuning_job(self, HyperParameterTuningJobName: str) -> dict:
        job = self.jobs.get(HyperParameterTuningJobName)
        if job is None:
            raise _error("ResourceNotFound", "DescribeHyperParameterTuningJob")
        out = {
            "HyperParameterTuningJobStatus": job["status"],
            "HyperParameterTuningJobArn": job["arn"],
        }
        done = [t for t in self.trials[HyperParameterTuningJobName] if "Value" in t]
        if done:
            kind = job["request"]["HyperParameterTuningJobConfig"][
                "HyperParameterTuningJobObjective"
            ]
            pick = max if kind["Type"] == "Maximize" else min
            best = pick(done, key=lambda t: t["Value"])
            out["BestTrainingJob"] = self._summary(best)
        return out

    def _summary(self, trial: dict[str, Any]) -> dict[str, Any]:
        out = {
            "TrainingJobName": trial["name"],
            "TrainingJobStatus": trial["status"],
            "TunedHyperParameters": trial["tuned"],
        }
        if "Value" in trial:
            out["FinalHyperParameterTuningJobObjectiveMetric"] = {
                "MetricName": "eval_accuracy",
                "Value": trial["Value"],
            }
        return out

    def list_training_jobs_for_hyper_parameter_tuning_job(self, **kw: Any) -> dict:
        return {
            "TrainingJobSummaries": [
                self._summary(t) for t in self.trials[kw["HyperParameterTuningJobName"]]
            ]
        }

    def stop_hyper_parameter_tuning_job(self, HyperParameterTuningJobName: str) -> dict:
        self.calls.append("stop")
        job = self.jobs[HyperParameterTuningJobName]
        job["status"] = "Stopping"
        return {}

    def describe_training_job(self, TrainingJobName: str) -> dict:
        if TrainingJobName in self.billable:
            self.calls.append(f"describe {TrainingJobName}")
            return {"BillableTimeInSeconds": self.billable[TrainingJobName]}
        return self.moto.describe_training_job(TrainingJobName=TrainingJobName)

    # what a test makes the tuner do
    def trial(self, sweep: str, status: str, value: float | None = None, billable: int = 0,
              lr: str = "0.0001") -> str:  # fmt: skip
        name = f"{sweep}-{len(self.trials[sweep]) + 1:03d}-{uuid.uuid4().hex[:8]}"
        entry = {"name": name, "status": status, "tuned": {"learning_rate": lr}}
        if value is not None:
            entry["Value"] = value
        self.trials[sweep].append(entry)
        if status != "InProgress":
            self.billable[name] = billable
        return name


@pytest.fixture
def sweeping(moto_endpoint, monkeypatch, tmp_path):
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    env = trigger_env(moto_endpoint, tmp_path, table=table) | teams_env(
        {"max_instances": 3, "max_job_cost_usd": 500.0, "monthly_budget_usd": 1000.0}
    )
    topic = client("sns", moto_endpoint).create_topic(Name=f"t-{table}")["TopicArn"]
    sqs = client("sqs", moto_endpoint)
    queue = sqs.create_queue(QueueName=f"q-{table}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    client("sns", moto_endpoint).subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn["QueueArn"])
    env |= {"FTL_TOPIC_ARN": topic, "FTL_MODEL_REGISTRY": "on"}
    launcher = Launcher(load_handler(TRIGGER_DIR, monkeypatch, env), moto_endpoint, table)
    tuner = Tuner(launcher.module.RUNTIME.sagemaker)
    launcher.module.RUNTIME.sagemaker = tuner
    platform = launcher.module.RUNTIME.platform.platform_name
    for team in ("alpha", "beta"):
        launcher.sagemaker.create_model_package_group(
            ModelPackageGroupName=group_name(platform, TEMPLATE, team)
        )
    launcher.tuner = tuner  # type: ignore[attr-defined]
    launcher.notices = lambda: _notices(sqs, queue)  # type: ignore[attr-defined]
    return launcher


def _notices(sqs: Any, queue: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return out
        out += [json.loads(json.loads(m["Body"])["Message"]) for m in got]
        for m in got:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])


def sweep(**extra: Any) -> dict[str, Any]:
    return {
        "action": "sweep",
        "template": TEMPLATE,
        "job_name": "lr",
        "ranges": {"learning_rate": {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"}},
        "objective": "eval_accuracy",
        "direction": "Maximize",
        "max_trials": 4,
        "max_parallel": 2,
        "max_runtime_seconds": 3600,
        "cap_usd": 100.0,
        **extra,
    }


def _usage(launcher: Launcher, team: str) -> dict[str, Any]:
    from ftl_ledger.ledger import Ledger

    return Ledger(launcher.dynamodb, launcher.table).get_usage(team) or {}


def _hourly(launcher: Launcher) -> float:
    runtime = launcher.module.RUNTIME
    return runtime.prices.hourly(runtime.platform.region, "ml.g5.xlarge")[0]


def test_a_dry_run_shows_the_worst_case_and_the_request_and_creates_nothing(sweeping):
    answer = sweeping(sweep(dry_run=True), alias="team-beta")
    hourly = _hourly(sweeping)
    assert answer["dry_run"] is True and answer["kind"] == "sweep"
    assert answer["worst_case_usd"] == pytest.approx(4 * hourly, abs=1e-3)
    assert answer["instances_held"] == 2 and len(answer["job_name"]) <= 32
    request = answer["request"]
    config = request["HyperParameterTuningJobConfig"]
    assert config["ParameterRanges"]["ContinuousParameterRanges"][0]["ScalingType"] == "Logarithmic"
    definition = request["TrainingJobDefinition"]
    assert "learning_rate" not in definition["StaticHyperParameters"]
    assert "CheckpointConfig" not in definition and definition["EnableManagedSpotTraining"]
    assert any("checkpoints" in x for x in answer["not_carried"])
    assert sweeping.tuner.calls == [] and sweeping.ledger_items() == []


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"cap_usd": 1.0}, "cap_usd"),
        ({"max_trials": 700, "max_parallel": 1, "cap_usd": 1e6}, "cap_usd"),  # the per-job cap
        ({"max_parallel": 4, "max_trials": 4}, "max_instances"),
        ({"objective": "no_such_metric"}, "objective"),
        (
            {"ranges": {"seed": {"values": [1, 2]}}, "strategy": "Grid", "max_trials": 3},
            "max_trials",
        ),
        ({"hyperparameters": {"learning_rate": 1e-4}}, "hyperparameters"),
        ({"template": "distilbert-chain"}, "template"),
    ],
)
def test_a_refused_sweep_names_its_field_and_creates_nothing(sweeping, extra, field):
    answer = sweeping(sweep(**extra), alias="team-beta")
    assert "error" in answer, answer
    got = answer["error"].get("field") or answer["error"].get("limit")
    assert field in json.dumps(answer["error"]), (field, got, answer)
    assert sweeping.tuner.calls == [] and sweeping.ledger_items() == []


def test_a_sweep_is_one_record_its_trials_are_charged_once_and_its_best_is_registered(sweeping):
    hourly = _hourly(sweeping)
    started = sweeping(sweep(), alias="team-beta")
    name = started["job_name"]
    assert started["status"] == "InProgress" and started["kind"] == "sweep", started
    assert sweeping.tuner.calls == ["create"]
    usage = _usage(sweeping, "beta")
    assert int(usage["instances"]) == 2 and float(usage["reserved"]) == pytest.approx(4 * hourly)

    tuner = sweeping.tuner
    first = tuner.trial(name, "Completed", 0.81, billable=1800, lr="0.0002")
    tuner.trial(name, "InProgress")
    described = sweeping({"action": "describe", "job_name": name}, alias="team-beta")
    progress = described["sweep"]
    assert progress["trials"]["completed"] == 1 and progress["trials"]["running"] == 1
    assert progress["best"]["trial"] == first and progress["best"]["objective"] == 0.81
    assert progress["spend_usd"] == pytest.approx(hourly / 2, abs=1e-4)
    assert float(_usage(sweeping, "beta")["spend"]) == pytest.approx(hourly / 2, abs=1e-4)
    # Described again: nothing is charged twice.
    sweeping({"action": "describe", "job_name": name}, alias="team-beta")
    assert tuner.calls.count(f"describe {first}") == 1
    assert float(_usage(sweeping, "beta")["spend"]) == pytest.approx(hourly / 2, abs=1e-4)

    tuner.trials[name][1].update(status="Completed", Value=0.9)
    tuner.billable[tuner.trials[name][1]["name"]] = 3600
    tuner.jobs[name]["status"] = "Completed"
    ended = sweeping({"action": "describe", "job_name": name}, alias="team-beta")
    best = tuner.trials[name][1]["name"]
    assert ended["status"] == "Completed", ended
    assert ended["sweep"]["best"]["trial"] == best
    assert ended["cost_usd"] == pytest.approx(1.5 * hourly, abs=1e-3)
    # Its best model's evaluation job (the template's policy), started as a job's is; the
    # sweep's instances and worst case are given back (moto ends the evaluation job at once).
    assert ended["evaluation"]["job_name"] == f"{name}-eval", ended
    evaluation = sweeping({"action": "describe", "job_name": f"{name}-eval"}, alias="team-beta")
    assert evaluation["kind"] == "evaluation" and evaluation["evaluation_of"] == name
    usage = _usage(sweeping, "beta")
    assert int(usage["instances"]) == 0 and float(usage["reserved"]) == pytest.approx(0, abs=1e-6)
    assert float(usage["spend"]) >= 1.5 * hourly - 1e-3
    # The best trial's model, registered as a Completed job's is.
    assert ended.get("model_package_arn"), ended
    package = sweeping.sagemaker.describe_model_package(ModelPackageName=ended["model_package_arn"])
    url = package["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    assert url.endswith(f"/{best}/output/model.tar.gz"), url
    listed = sweeping({"action": "list"}, alias="team-beta")["jobs"]
    assert sorted(j["job_name"] for j in listed) == [name, f"{name}-eval"]
    line = next(j for j in listed if j["job_name"] == name)
    assert line["sweep"]["trials"]["completed"] == 2
    # One started and one ended notice for the sweep, none for its trials.
    about = [(n.get("event"), n.get("job_name")) for n in sweeping.notices()]
    assert about.count(("started", name)) == 1 and about.count(("ended", name)) == 1, about
    assert not [a for a in about if str(a[1]).startswith(f"{name}-0")]


def test_a_sweep_at_its_cap_is_stopped(sweeping):
    hourly = _hourly(sweeping)
    name = sweeping(sweep(cap_usd=4 * hourly + 0.01), alias="team-beta")["job_name"]
    # A trial billed past its runtime limit (a retried trial, a price that rose): the cap holds.
    sweeping.tuner.trial(name, "Completed", 0.7, billable=5 * 3600)
    sweeping.tuner.trial(name, "InProgress")
    described = sweeping({"action": "describe", "job_name": name}, alias="team-beta")
    assert described["status"] == "Stopping", described
    assert "cap" in described["failure_reason"]
    assert sweeping.tuner.calls == [
        "create",
        f"describe {sweeping.tuner.trials[name][0]['name']}",
        "stop",
    ]
    # The tuner ends it Stopped and says no more: why it stopped (its cap) stays on it.
    sweeping.tuner.trials[name][1].update(status="Stopped")
    sweeping.tuner.billable[sweeping.tuner.trials[name][1]["name"]] = 10
    sweeping.tuner.jobs[name]["status"] = "Stopped"
    ended = sweeping({"action": "describe", "job_name": name}, alias="team-beta")
    assert ended["status"] == "Stopped", ended
    assert ended["failure_reason"] == described["failure_reason"], ended


def test_stop_stops_the_whole_sweep_and_its_early_stopped_trials_are_told_apart(sweeping):
    name = sweeping(sweep(), alias="team-beta")["job_name"]
    sweeping.tuner.trial(name, "Stopped", 0.5, billable=60)  # the tuner's early stop
    stopped = sweeping({"action": "stop", "job_name": name}, alias="team-beta")
    assert stopped["status"] == "Stopping" and "stop" in sweeping.tuner.calls
    sweeping.tuner.trial(name, "Stopped", billable=30)  # stopped by our stop
    sweeping.tuner.jobs[name]["status"] = "Stopped"
    ended = sweeping({"action": "describe", "job_name": name}, alias="team-beta")
    assert ended["status"] == "Stopped"
    trials = ended["sweep"]["trials"]
    assert trials["stopped_early"] == 1 and trials["stopped"] == 1, trials
    assert "model_package_arn" not in ended


def test_another_team_cannot_see_or_stop_a_sweep(sweeping):
    name = sweeping(sweep(), alias="team-beta")["job_name"]
    answer = sweeping({"action": "stop", "job_name": name}, alias="team-alpha")
    assert answer["error"]["type"] == "NotFound"
    assert sweeping.tuner.calls == ["create"]


def test_a_replayed_token_starts_one_tuning_job(sweeping):
    first = sweeping(sweep(client_token="tok-1"), alias="team-beta")
    again = sweeping(sweep(client_token="tok-1"), alias="team-beta")
    assert first["job_name"] == again["job_name"] and sweeping.tuner.calls == ["create"]
    other = sweeping(sweep(client_token="tok-1", max_trials=3), alias="team-beta")
    assert other["error"]["type"] == "Conflict"


def test_the_schedules_recovery_is_not_the_public_sweep(sweeping):
    from ftl_trigger import adapters
    from jobmodel.contract.names import SWEEP_ALIAS
    from tests.lambda_support import FakeContext

    teams = sweeping.module.RUNTIME.teams
    call = adapters.parse({"action": "sweep"}, FakeContext(alias=SWEEP_ALIAS), teams)
    assert call.action == "recover"  # the schedule's door stays {"action": "sweep"}
    public = adapters.parse(sweep(), FakeContext(alias="team-beta"), teams)
    assert public.action == "sweep"


def test_in_queue_mode_sweeps_are_off_unless_the_platform_runs_them_beside_the_queue(
    batch_sandbox, monkeypatch, tmp_path
):
    """Queue mode: a sweep's trials are the tuner's, which the Batch queue cannot see. Off
    (the default) refuses the sweep and writes nothing; ``outside-queue`` runs it beside the
    queue, admitted by the team's quota and budget, its trials never in the queue."""
    from tests.unit.trigger.conftest import queue_launcher

    limits = teams_env({"max_instances": 3, "max_job_cost_usd": 500.0})
    off = queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=4, env=limits)
    refused = off(sweep(), alias="team-beta")
    assert refused["error"]["field"] == "action", refused
    assert "ftl:queueSweeps" in refused["error"]["message"] and off.ledger_items() == []

    env = limits | {"FTL_QUEUE_SWEEPS": "outside-queue"}
    on = queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=4, env=env)
    started = on(sweep(), alias="team-beta")
    name = started["job_name"]
    assert started["status"] == "InProgress", started
    assert name in batch_sandbox.tuner.jobs and on.batch_jobs() == []
    assert int(_usage(on, "beta")["instances"]) == 2
    over = on(sweep(max_parallel=4), alias="team-beta")  # 4 instances > the team's 3
    assert over["error"]["type"] == "QuotaExceeded", over
    batch_sandbox.tuner.run_to_end(name, seconds_per_trial=600)
    ended = on({"action": "describe", "job_name": name}, alias="team-beta")
    assert ended["status"] == "Completed" and ended["sweep"]["trials"]["completed"] >= 1, ended
    assert ended["cost_usd"] == pytest.approx(4 * 600 * _hourly(on) / 3600, abs=1e-3)
