"""Capacity chains in the launcher: spot, then on-demand preferences, then the team's plan;
attempts in the ledger, their costs in the team's month, stop mid-chain (issue 20)."""

from __future__ import annotations

import json

import pytest

from ftl_ledger.items import from_item
from ftl_ledger.job_codec import from_record
from jobmodel.capacity.plans import CapacityConfig
from jobmodel.jobs.attempts import starting
from jobmodel.money.pricing import PriceTable
from sandbox.capacity import CapacityStandIn
from tests.lambda_support import http_event
from tests.unit.trigger.test_teams import ALICE, make

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/alpha-g5"
PLANS = [
    {
        "name": "alpha-g5",
        "arn": PLAN,
        "instanceType": "ml.g5.xlarge",
        "instanceCount": 2,
        "start": "2020-01-01T00:00Z",
        "end": "2099-01-01T00:00Z",
        "teams": ["alpha"],
        "templates": ["distilbert-chain"],
    }
]
PRICES = {"us-east-1": {"ml.g5.xlarge": 1.0, "ml.g5.2xlarge": 1.5, "ml.g6.xlarge": 2.0}}


@pytest.fixture
def chain(moto_endpoint, monkeypatch, tmp_path):
    launcher = make(moto_endpoint, monkeypatch, tmp_path)
    runtime = launcher.module.RUNTIME
    runtime.capacity = CapacityConfig.from_env({"FTL_CAPACITY": json.dumps(PLANS)})
    runtime.prices = PriceTable.load(json.dumps(PRICES))
    standin = CapacityStandIn(no_spot={"ml.g5.xlarge"}, plans={PLAN: ("ml.g5.xlarge", 2)})
    launcher.module.RUNTIME.sagemaker = standin
    return launcher, standin


def _call(launcher, method, path, body=None):
    return json.loads(launcher(http_event(method, path, body, user_arn=ALICE))["body"])


def _submit(launcher, **extra):
    body = {"template": "distilbert-chain", "instance_type": "ml.g5.xlarge", **extra}
    return _call(launcher, "POST", "/jobs", body)


def _usage(launcher) -> dict:
    items = [from_item(i) for i in launcher.ledger_items()]
    return next(i for i in items if i["pk"] == "usage#alpha")


def test_a_job_moves_through_its_chain_and_its_attempts_add_up(chain):
    launcher, standin = chain
    job = _submit(launcher)
    name = job["job_name"]
    first = standin.requests[0]
    runtime = first["StoppingCondition"]["MaxRuntimeInSeconds"]
    # Worst case: 1 instance for the whole runtime on each step's dearest type (spot g5 1.0,
    # on-demand g6 2.0, plan g5 1.0): the estimate, and what the team's limits see.
    assert job["estimated_max_cost_usd"] == pytest.approx(4.0 * runtime / 3600)
    assert job["capacity_chain"] == ["spot", "on-demand", "training-plan"]
    assert [a["capacity"] for a in job["attempts"]] == ["spot"]
    assert first["EnableManagedSpotTraining"] is True and first["TrainingJobName"] == name
    assert first["StoppingCondition"]["MaxWaitTimeInSeconds"] == runtime + 1800

    # No spot capacity: the wait runs out, describe moves the job to on-demand preferences.
    standin.expire_waits()
    job = _call(launcher, "GET", f"/jobs/{name}")
    assert job["status"] == "InProgress" and job["attempt"] == 2
    second = standin.requests[1]
    assert second["TrainingJobName"] == f"{name}-a2"
    prefs = second["ResourceConfig"]["InstancePreferences"]
    assert [p["InstanceType"] for p in prefs] == ["ml.g5.xlarge", "ml.g6.xlarge", "ml.g5.2xlarge"]
    assert "InstanceType" not in second["ResourceConfig"]
    assert "EnableManagedSpotTraining" not in second  # exclusive with InstancePreferences
    assert "MaxWaitTimeInSeconds" not in second["StoppingCondition"]
    # every attempt resumes from the job's one checkpoint prefix
    assert second["CheckpointConfig"] == first["CheckpointConfig"]

    # On-demand ran 10 minutes on the type SageMaker selected, then lost its capacity.
    standin.finish(
        f"{name}-a2", "Failed", billable=600, reason="CapacityError: Insufficient capacity"
    )
    job = _call(launcher, "GET", f"/jobs/{name}")
    assert job["attempt"] == 3
    third = standin.requests[2]
    assert third["ResourceConfig"]["TrainingPlanArn"] == PLAN
    # Every attempt starts its container the same way: the platform's init as PID 1.
    assert "ContainerEntrypoint" in first["AlgorithmSpecification"]
    assert first["AlgorithmSpecification"] == second["AlgorithmSpecification"]
    assert third["AlgorithmSpecification"] == first["AlgorithmSpecification"]
    assert third["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    ended = job["attempts"][1]
    assert ended["instance_type"] == "ml.g5.xlarge" and ended["status"] == "Failed"
    assert ended["cost_usd"] == pytest.approx(600 / 3600 * 1.0, abs=1e-4)
    # The ended attempt is charged to the team's month as it ends.
    assert _usage(launcher)["spend"] == pytest.approx(ended["cost_usd"], abs=1e-4)

    standin.finish(f"{name}-a3", "Completed", billable=3600)
    job = _call(launcher, "GET", f"/jobs/{name}")
    assert job["status"] == "Completed"
    assert [a["status"] for a in job["attempts"]] == ["Stopped", "Failed", "Completed"]
    assert job["cost_usd"] == pytest.approx(600 / 3600 + 1.0, abs=1e-3)
    usage = _usage(launcher)
    assert usage["spend"] == pytest.approx(job["cost_usd"], abs=1e-3)
    assert usage["instances"] == 0


def test_a_start_without_capacity_moves_on_at_submit(chain):
    launcher, standin = chain
    standin.no_on_demand = {"ml.g5.xlarge", "ml.g6.xlarge", "ml.g5.2xlarge"}
    job = _submit(launcher, capacity=["on-demand", "training-plan"])
    assert "error" not in job, job
    # on-demand could not start: the plan's attempt started at once
    assert job["attempt"] == 2 and job["status"] == "InProgress"
    assert [a["capacity"] for a in job["attempts"]] == ["on-demand", "training-plan"]
    assert "Insufficient capacity" in job["attempts"][0]["reason"]
    assert standin.requests[-1]["ResourceConfig"]["TrainingPlanArn"] == PLAN


def test_stop_mid_chain_stops_the_attempt_and_the_chain(chain):
    launcher, standin = chain
    name = _submit(launcher)["job_name"]
    standin.expire_waits()
    _call(launcher, "GET", f"/jobs/{name}")  # attempt 2 (on-demand) runs
    stopped = _call(launcher, "POST", f"/jobs/{name}/stop")
    assert standin.stopped == [f"{name}-a2"]
    assert stopped["status"] in ("Stopping", "Stopped")
    job = _call(launcher, "GET", f"/jobs/{name}")
    assert job["status"] == "Stopped" and job["attempt"] == 2
    assert len(standin.requests) == 2  # the plan's attempt never started


def test_a_chain_step_the_caller_did_not_choose_is_not_run(chain):
    launcher, _ = chain
    bad = launcher(
        http_event(
            "POST", "/jobs", {"template": "distilbert-chain", "capacity": ["gpu"]}, user_arn=ALICE
        )
    )
    assert bad["statusCode"] == 400 and json.loads(bad["body"])["error"]["field"] == "capacity"
    refused = launcher(
        http_event(
            "POST", "/jobs", {"template": "distilbert-spot", "capacity": ["spot"]}, user_arn=ALICE
        )
    )
    assert refused["statusCode"] == 400


def test_the_selected_type_and_the_attempts_start_are_recorded_while_it_runs(chain):
    """SageMaker's newer view under the same status (InProgress) still records the type it
    selected and the attempt's start (they were dropped with the status unchanged)."""
    launcher, standin = chain
    standin.no_on_demand = {"ml.g5.xlarge"}
    name = _submit(launcher)["job_name"]
    standin.expire_waits()
    _call(launcher, "GET", f"/jobs/{name}")  # attempt 2 starts
    standin.run(f"{name}-a2")
    job = _call(launcher, "GET", f"/jobs/{name}")
    running = job["attempts"][1]
    assert (running["status"], running["instance_type"]) == ("InProgress", "ml.g6.xlarge")
    assert running["started_at"] and job["instance_type"] == "ml.g6.xlarge"


def test_an_attempt_is_starting_from_its_claim_until_its_training_job_is_known(chain):
    """What makes a stop a Conflict (the deployed test stops during the start)."""
    launcher, standin = chain
    name = _submit(launcher)["job_name"]
    standin.expire_waits()
    _call(launcher, "GET", f"/jobs/{name}")
    items = [from_item(i) for i in launcher.ledger_items()]
    record = next(i for i in items if i["pk"] == f"job#{name}")
    # The claim of attempt 2 written, its CreateTrainingJob not answered yet.
    claimed = {**record, "job_arn": None}
    claimed["attempts"] = [
        {**a, "status": "Starting"} if a["attempt"] == 2 else a for a in record["attempts"]
    ]
    assert starting(from_record(claimed)) and not starting(from_record(record))
    # queue mode: a service job
    assert not starting(from_record({**claimed, "batch_job_id": "b-1"}))
