"""Capacity chains end to end (issue 20's sandbox scenario) through the deployed trigger.

One deploy (platform ``ftlcap``: team ``alpha``, two training plans, sandbox prices) into the
session's sandbox, with SageMaker's capacity stand-in switched on (``sandbox/capacity.py``
mounted by ``sandbox/capacity_api.py``), so the deployed trigger's own boto3 client meets
spot capacity errors, ``InstancePreferences`` with ``SelectedInstanceType``, training plans
and instances that run out. Jobs go in through the team's alias (direct door) or the HTTP
door (``sandbox/http_api.py``); every test ends its jobs (``settle``).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sandbox.capacity import CapacityStandIn
from sandbox.deploy import ACCOUNT, REGION, deploy
from sandbox.http_api import LocalHttpApi

PLATFORM = "ftlcap"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/alpha-scientists"
PLAN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/cap-g5"
LATER = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/cap-later"
PRICES = {"ml.g5.xlarge": 1.0, "ml.g5.2xlarge": 1.5, "ml.g6.xlarge": 2.0, "ml.p4d.24xlarge": 30.0}
PLANS = [
    # llm-sft-fsdp's only plan: its window has not opened.
    {
        "name": "cap-later",
        "arn": LATER,
        "instanceType": "ml.p4d.24xlarge",
        "instanceCount": 4,
        "start": "2098-01-01T00:00Z",
        "end": "2099-01-01T00:00Z",
        "teams": ["alpha"],
        "templates": ["llm-sft-fsdp"],
    },
    {
        "name": "cap-g5",
        "arn": PLAN,
        "instanceType": "ml.g5.xlarge",
        "instanceCount": 1,
        "start": "2020-01-01T00:00Z",
        "end": "2099-01-01T00:00Z",
        "teams": ["alpha"],
        "templates": ["distilbert-chain"],
    },
]
CONTEXT = {
    "ftl:platformName": PLATFORM,
    "ftl:teams": json.dumps([{"name": "alpha", "principals": [ROLE]}]),
    "ftl:trainingPlans": json.dumps(PLANS),
    "ftl:prices": json.dumps({REGION: PRICES}),
}
CALLERS = {"alphakey": f"arn:aws:sts::{ACCOUNT}:assumed-role/alpha-scientists/ann"}
pytestmark = pytest.mark.sandbox


class Cap:
    """The deploy's two doors, the capacity stand-in, and read-backs of the ledger."""

    def __init__(self, deployed: Any, outputs: dict[str, Any], api: LocalHttpApi) -> None:
        self.deployed, self.api = deployed, api
        self.outputs = {k: v for o in outputs.values() for k, v in o.items()}
        self.alias = self.outputs["TeamAlphaInvokeArn"]
        self.standin: CapacityStandIn = deployed.sandbox.capacity.standin
        self.ddb = deployed.client("dynamodb")

    def invoke(self, event: dict[str, Any]) -> Any:
        reply = self.deployed.client("lambda").invoke(
            FunctionName=self.alias, Payload=json.dumps(event).encode()
        )
        body = json.loads(reply["Payload"].read())
        assert "FunctionError" not in reply, body
        return body

    def submit(self, **fields: Any) -> dict[str, Any]:
        return self.invoke({"template": "distilbert-chain", "job_name": "cap", **fields})

    def describe(self, name: str) -> dict[str, Any]:
        return self.invoke({"action": "describe", "job_name": name})

    def http(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        url = self.api.url.rstrip("/") + path
        data = json.dumps(body).encode() if body is not None else None
        request = AWSRequest(method=method, url=url, data=data)
        if data:
            request.headers["content-type"] = "application/json"
        SigV4Auth(Credentials("alphakey", "alphakey"), "execute-api", REGION).add_auth(request)
        sent = urllib.request.Request(url, data=data, headers=dict(request.headers), method=method)
        try:
            with urllib.request.urlopen(sent, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def items(self, prefix: str) -> list[dict[str, Any]]:
        items = self.ddb.scan(TableName=self.outputs["JobTableName"], ConsistentRead=True)
        return [i for i in items["Items"] if i["pk"]["S"].startswith(prefix)]

    def spend(self) -> float:
        return float(self.invoke({"action": "whoami"})["usage"]["month_spend_usd"])

    def rules(self, **rules: Any) -> None:
        s = self.standin
        s.no_spot = set(rules.get("no_spot", ()))
        s.no_on_demand = set(rules.get("no_on_demand", ()))
        s.instances = dict(rules.get("instances", {}))

    def settle(self) -> None:
        """End every running job (Completed) and let the trigger record it; a Completed job
        of a template with an evaluation policy starts its evaluation job (issue 36), which
        the next round ends."""
        for _ in range(3):
            for name, job in list(self.standin.jobs.items()):
                if job["TrainingJobStatus"] == "InProgress":
                    self.standin.finish(name, "Completed", billable=60)
            for job in self.invoke({"action": "list", "limit": 100})["jobs"]:
                if job["status"] not in ("Completed", "Failed", "Stopped", "FailedToStart"):
                    self.describe(job["job_name"])
        assert self.invoke({"action": "whoami"})["usage"]["instances"] == 0


@pytest.fixture(scope="module")
def cap(deployed):
    saved = dict(os.environ)  # the sandbox loads a function into os.environ: put it back
    started = time.perf_counter()
    outputs = deploy(deployed.endpoint, context=CONTEXT)
    print(f"\ncapacity deploy: {time.perf_counter() - started:.1f}s")
    layer = deployed.sandbox.capacity
    layer.enable(plans={PLAN: ("ml.g5.xlarge", 1), LATER: ("ml.p4d.24xlarge", 4)})
    launcher = outputs[f"{PLATFORM}-launcher"]
    try:
        with LocalHttpApi(
            deployed.endpoint,
            launcher["TriggerFunctionName"],
            credentials={k: k for k in CALLERS},
            identities=CALLERS,
        ) as api:
            yield Cap(deployed, outputs, api)
    finally:
        layer.disable()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def scenario(cap):
    yield cap
    cap.settle()
    cap.rules()


def test_no_spot_then_on_demand_preferences_then_the_plan_and_the_costs_add_up(scenario):
    cap = scenario
    cap.rules(no_spot={"ml.g5.xlarge"}, no_on_demand={"ml.g5.xlarge"})
    before = cap.spend()
    job = cap.submit(instance_type="ml.g5.xlarge")
    name = job["job_name"]
    assert job["capacity_chain"] == ["spot", "on-demand", "training-plan"], job
    spot = cap.standin.jobs[name]
    assert spot["EnableManagedSpotTraining"] and spot["SecondaryStatus"] == "Starting"

    # The spot wait runs out: describe starts the on-demand attempt on the preference list,
    # where SageMaker selects the first type with capacity.
    cap.standin.expire_waits()
    job = cap.describe(name)
    assert job["attempt"] == 2 and job["status"] == "InProgress", job
    second = cap.standin.jobs[f"{name}-a2"]["ResourceConfig"]
    assert [p["InstanceType"] for p in second["InstancePreferences"]][:2] == [
        "ml.g5.xlarge",
        "ml.g6.xlarge",
    ]
    assert second["SelectedInstanceType"] == "ml.g6.xlarge"
    cap.standin.run(f"{name}-a2")
    job = cap.describe(name)
    assert job["attempts"][1]["instance_type"] == "ml.g6.xlarge"
    assert job["instance_type"] == "ml.g6.xlarge"

    # On-demand loses its capacity after 10 minutes: the plan's attempt starts.
    cap.standin.finish(
        f"{name}-a2", "Failed", billable=600, reason="CapacityError: Insufficient capacity"
    )
    job = cap.describe(name)
    assert job["attempt"] == 3
    third = cap.standin.jobs[f"{name}-a3"]["ResourceConfig"]
    assert third["TrainingPlanArn"] == PLAN and third["InstanceType"] == "ml.g5.xlarge"
    # Every attempt resumes from the job's one checkpoint prefix.
    uris = {
        r["CheckpointConfig"]["S3Uri"]
        for r in cap.standin.requests
        if r["TrainingJobName"].startswith(name)
    }
    assert uris == {job["checkpoint_s3_uri"]}

    cap.standin.run(f"{name}-a3")
    cap.standin.finish(f"{name}-a3", "Completed", billable=1200)
    job = cap.describe(name)
    assert job["status"] == "Completed"
    attempts = job["attempts"]
    assert [(a["capacity"], a["instance_type"], a["status"]) for a in attempts] == [
        ("spot", "ml.g5.xlarge", "Stopped"),
        ("on-demand", "ml.g6.xlarge", "Failed"),
        ("training-plan", "ml.g5.xlarge", "Completed"),
    ]
    assert [a["billable_seconds"] for a in attempts] == [0, 600, 1200]
    assert attempts[1]["cost_usd"] == pytest.approx(600 / 3600 * 2.0, abs=1e-4)
    assert attempts[2]["cost_usd"] == pytest.approx(1200 / 3600 * 1.0, abs=1e-4)
    total = sum(a["cost_usd"] for a in attempts)
    assert job["cost_usd"] == pytest.approx(total, abs=1e-3)
    # The team's month is charged with every attempt's cost.
    assert cap.spend() - before == pytest.approx(total, abs=1e-3)
    assert all(a.get("started_at") and a.get("ended_at") for a in attempts[1:])


def test_stop_during_an_attempt_stops_it_and_the_chain(scenario):
    cap = scenario
    cap.rules(no_spot={"ml.g5.xlarge"})
    name = cap.submit(instance_type="ml.g5.xlarge")["job_name"]
    cap.standin.expire_waits()
    assert cap.describe(name)["attempt"] == 2
    stopped = cap.invoke({"action": "stop", "job_name": name})
    assert stopped["status"] in ("Stopping", "Stopped"), stopped
    assert cap.standin.stopped == [*cap.standin.stopped[:-1], f"{name}-a2"]
    job = cap.describe(name)
    assert job["status"] == "Stopped" and job["attempt"] == 2
    assert f"{name}-a3" not in cap.standin.jobs  # the plan's attempt never started


def test_stop_between_attempts_stops_the_chain_and_starts_nothing(scenario):
    """The stop arrives while the next attempt's start is in flight (its claim written, the
    CreateTrainingJob not yet answered)."""
    cap = scenario
    cap.rules(no_spot={"ml.g5.xlarge"})
    name = cap.submit(instance_type="ml.g5.xlarge")["job_name"]
    cap.standin.expire_waits()
    gate = cap.standin.hold(f"{name}-a2")
    with ThreadPoolExecutor(max_workers=1) as pool:
        moving = pool.submit(cap.describe, name)  # starts attempt 2, held at SageMaker
        assert cap.standin.wait_held(f"{name}-a2")
        stop = cap.invoke({"action": "stop", "job_name": name})
        gate.set()
        moved = moving.result(timeout=60)
    assert "error" not in moved, moved
    # Refused while the start is in flight (nothing to stop yet), as for a job Submitting.
    assert stop["error"]["type"] == "Conflict" and "still starting" in stop["error"]["message"]
    stop = cap.invoke({"action": "stop", "job_name": name})
    assert stop["status"] in ("Stopping", "Stopped"), stop
    job = cap.describe(name)
    assert job["status"] == "Stopped", job
    assert cap.standin.jobs[f"{name}-a2"]["TrainingJobStatus"] == "Stopped"
    assert f"{name}-a3" not in cap.standin.jobs


def test_twenty_concurrent_duplicate_submits_make_one_job(scenario):
    cap = scenario
    arn = cap.alias
    request = {"template": "distilbert-chain", "job_name": "dup", "client_token": "cap-dup-1"}

    def submit(_: int) -> dict[str, Any]:
        reply = cap.deployed.client("lambda").invoke(
            FunctionName=arn, Payload=json.dumps(request).encode()
        )
        return json.loads(reply["Payload"].read())

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(submit, range(20)))
    names = {a.get("job_name") for a in answers}
    assert len(names) == 1 and None not in names, answers[:3]
    (name,) = names
    assert [r["TrainingJobName"] for r in cap.standin.requests].count(name) == 1
    assert len(cap.items(f"job#{name}")) == 1
    assert len([i for i in cap.items("job#") if "dup" in i["pk"]["S"]]) == 1


def test_a_race_for_the_last_instances_moves_the_loser_on_or_refuses_it(scenario):
    cap = scenario
    # One g5.xlarge left on demand, no other type: one job gets it, the other the plan.
    cap.rules(no_on_demand={"ml.g6.xlarge", "ml.g5.2xlarge"}, instances={"ml.g5.xlarge": 1})
    chain = ["on-demand", "training-plan"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = list(pool.map(lambda i: cap.submit(job_name=f"race{i}", capacity=chain), range(2)))
    assert all("error" not in j for j in jobs), jobs
    kinds = sorted(j["attempts"][-1]["capacity"] for j in jobs)
    assert kinds == ["on-demand", "training-plan"], jobs
    loser = next(j for j in jobs if j["attempt"] == 2)
    assert "Insufficient capacity" in loser["attempts"][0]["reason"]
    cap.settle()

    # The plan alone, one instance, two jobs: exactly one starts, the other is refused with
    # the reason and leaves nothing behind.
    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(
            pool.map(
                lambda i: cap.submit(job_name=f"plan{i}", capacity=["training-plan"]), range(2)
            )
        )
    won = [a for a in answers if "error" not in a]
    lost = [a["error"] for a in answers if "error" in a]
    assert len(won) == 1 and len(lost) == 1, answers
    assert lost[0]["type"] == "CapacityError" and "training plan" in lost[0]["message"], lost
    running = [n for n, j in cap.standin.jobs.items() if j["TrainingJobStatus"] == "InProgress"]
    assert running == [won[0]["job_name"]]
    listed = cap.invoke({"action": "list", "limit": 100})["jobs"]
    states = {j["job_name"]: j["status"] for j in listed if "-plan" in j["job_name"]}
    assert sorted(states.values()) == ["FailedToStart", "InProgress"], states


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"capacity": ["gpu"]}, "gpu"),
        ({"capacity": "spot"}, "list"),
        ({"capacity": ["spot", "spot"]}, "must not repeat"),
        ({"template": "distilbert-spot", "capacity": ["spot"]}, "no capacity chain"),
        # The spot flag off and the plan's window not open: no step is left.
        ({"capacity": ["spot"], "spot": False}, "spot false"),
        # The template's only plan has not opened yet.
        ({"template": "llm-sft-fsdp", "capacity": ["training-plan"]}, "no training plan open"),
    ],
)
def test_bad_capacity_choices_get_the_same_error_through_both_doors(cap, body, words):
    request = {"template": "distilbert-chain", "job_name": "bad", **body}
    direct = cap.invoke(request)["error"]
    status, http = cap.http("POST", "/jobs", request)
    assert status == 400 and http["error"] == direct, (status, http, direct)
    assert direct["type"] == "ValidationError" and direct["field"] == "capacity", direct
    assert words in direct["message"], direct
    assert not [i for i in cap.items("job#") if "-bad-" in i["pk"]["S"]]
