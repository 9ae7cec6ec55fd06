"""Capacity chains in queue mode (issue 20: "in queue mode Batch's own retry stays, and a next
step is a new service job"): the real handler on the sandbox's AWS Batch stand-in
(sandbox/batch.py, whose training jobs moto holds), the job-events handler for Batch's and
SageMaker's state changes, botocore's model for every payload."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.session import get_session
from botocore.validate import validate_parameters

from ftl_ledger.items import from_item
from ftl_trigger.backends.queue import service_jobs as batch
from jobmodel.money.pricing import PriceTable
from sandbox.clock import SimClock, use_clock
from tests.lambda_support import client, load_handler
from tests.unit.job_events.conftest import EVENTS_DIR
from tests.unit.trigger.conftest import queue_launcher

PRICES = {"us-east-1": {"ml.g5.xlarge": 1.0, "ml.g5.2xlarge": 1.5, "ml.g6.xlarge": 2.0}}
TRAINING_INPUT = (
    get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
)
NO_SPOT = {"secondary": "MaxWaitTimeExceeded"}  # a spot attempt's wait ran out
NO_CAPACITY = {"reason": "CapacityError: Insufficient capacity to launch ml.g5.xlarge"}


@pytest.fixture
def clock(batch_sandbox):
    with use_clock(batch_sandbox.batch, SimClock(frozen=False)) as moving:
        yield moving


@pytest.fixture
def chained(batch_sandbox, monkeypatch, tmp_path, clock):
    """Queue mode on a queue of 4 instances: every attempt starts at once."""
    launcher = queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=4)
    launcher.module.RUNTIME.prices = PriceTable.load(json.dumps(PRICES))
    return launcher


def submit(launcher, **extra) -> dict[str, Any]:
    body = {
        "template": "distilbert-chain",
        "instance_type": "ml.g5.xlarge",
        "capacity": ["spot", "on-demand"],
        **extra,
    }
    return launcher(body)


def describe(launcher, name: str) -> dict[str, Any]:
    return launcher({"action": "describe", "job_name": name})


def record(launcher, name: str) -> dict[str, Any]:
    (item,) = [i for i in launcher.ledger_items() if i["pk"]["S"] == f"job#{name}"]
    return from_item(item)


def payload(service_job) -> dict[str, Any]:
    body = json.loads(service_job.request["serviceRequestPayload"])
    validate_parameters(body, TRAINING_INPUT)  # raises on anything off botocore's model
    return body


def training_job(service_job) -> str:
    return service_job.training_arn.rsplit("/", 1)[-1]


def end_attempt(launcher, clock, service_job, *, ran_s: int, status: str, **how) -> None:
    """The attempt's training job trains ``ran_s`` seconds, then ends as ``how`` says."""
    launcher.standin.run_training_job(training_job(service_job))
    clock.advance(ran_s)
    launcher.standin.finish_training_job(training_job(service_job), status, **how)


def test_attempt_one_is_a_service_job_of_the_steps_request_with_batchs_retry(chained, prefix):
    job = submit(chained, client_token=prefix)
    assert job["status"] == "Queued" and job["attempt"] == 1, job
    (first,) = chained.batch_jobs()
    name = job["job_name"]
    assert job["batch_job_id"] == first.job_id and first.request["jobName"] == name
    # Batch's own retries of one attempt stay: the strategy every queued job gets, which
    # retries a capacity error within the attempt before the chain moves on.
    assert first.request["retryStrategy"] == batch.RETRY_STRATEGY
    assert {
        "action": "RETRY",
        "onStatusReason": "Received status from SageMaker: CapacityError*",
    } in (first.request["retryStrategy"]["evaluateOnExit"])
    assert first.request["clientToken"] == batch.batch_client_token(None, prefix)
    sent = payload(first)
    rendered = json.loads(record(chained, name)["rendered"])
    assert sent == rendered and {"Key": "ftl:job-name", "Value": name} in sent["Tags"]
    assert sent["TrainingJobName"] == name and sent["EnableManagedSpotTraining"] is True
    assert "MaxWaitTimeInSeconds" in sent["StoppingCondition"]
    assert sent["AlgorithmSpecification"]["ContainerEntrypoint"][:2] == ["bash", "-c"]


@pytest.mark.parametrize("status,how", [("Stopped", NO_SPOT), ("Failed", NO_CAPACITY)])
def test_an_attempt_without_capacity_moves_on_to_a_new_service_job(chained, clock, status, how):
    job = submit(chained)
    name = job["job_name"]
    (first,) = chained.batch_jobs()
    end_attempt(chained, clock, first, ran_s=600, status=status, **how)
    assert first.status == "FAILED"  # Batch reports the service job failed
    job = describe(chained, name)
    assert job["attempt"] == 2 and job["status"] not in ("Failed", "Stopped"), job
    first_sent, (_, second) = payload(first), chained.batch_jobs()
    assert second.job_id != first.job_id and job["batch_job_id"] == second.job_id
    assert second.request["jobName"] == f"{name}-a2"
    # Its own token, derived from the attempt's name: a replay of this start queues no other.
    assert second.request["clientToken"] == batch.batch_client_token(None, None, f"{name}-a2")
    assert second.request["clientToken"] != first.request["clientToken"]
    assert second.request["retryStrategy"] == batch.RETRY_STRATEGY
    sent = payload(second)
    assert sent["TrainingJobName"] == f"{name}-a2" and "EnableManagedSpotTraining" not in sent
    assert [p["InstanceType"] for p in sent["ResourceConfig"]["InstancePreferences"]][0] == (
        "ml.g5.xlarge"
    )
    assert sent["CheckpointConfig"] == first_sent["CheckpointConfig"]  # resumes from it
    # The same container start: the platform's init as PID 1 (issue 34).
    assert sent["AlgorithmSpecification"] == first_sent["AlgorithmSpecification"]
    assert sent["AlgorithmSpecification"]["ContainerArguments"][-1] == "train"
    assert {"Key": "ftl:job-name", "Value": f"{name}-a2"} in sent["Tags"]
    ended = job["attempts"][0]
    assert ended["billable_seconds"] == 600
    assert ended["cost_usd"] == pytest.approx(600 / 3600 * 1.0, abs=1e-4)
    assert ("MaxWaitTimeExceeded" in ended["reason"]) or ("Insufficient" in ended["reason"])

    # The on-demand attempt finishes: the job completes with both attempts' costs.
    end_attempt(chained, clock, second, ran_s=1200, status="Completed")
    job = describe(chained, name)
    assert job["status"] == "Completed", job
    # SageMaker's status of the attempt's end (Batch says FAILED for both)
    assert [a["status"] for a in job["attempts"]] == [status, "Completed"]
    # one attempt per service job, each with its cost
    assert len(job["attempts"]) == len(chained.batch_jobs()) == 2
    assert job["attempts"][1]["billable_seconds"] == 1200
    assert job["cost_usd"] == pytest.approx((600 + 1200) / 3600, abs=1e-3)
    assert len(chained.batch_jobs()) == 2


def test_a_failure_for_another_reason_ends_the_chain(chained, clock):
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    end_attempt(chained, clock, first, ran_s=60, status="Failed", reason="AlgorithmError: oops")
    job = describe(chained, name)
    assert job["status"] == "Failed" and job["attempt"] == 1
    assert len(chained.batch_jobs()) == 1


class Invoker:
    """The job-events function's Lambda client: its ``advance`` goes to the trigger's
    ``chain`` alias at once (asynchronously in AWS)."""

    def __init__(self, launcher) -> None:
        self.launcher, self.calls = launcher, []

    def invoke(self, *, FunctionName, InvocationType, Payload):  # noqa: N803 - boto3's names
        event = json.loads(Payload)
        self.calls.append(event)
        self.launcher(event, alias="chain")
        return {"StatusCode": 202}


@pytest.fixture
def job_events(chained, batch_sandbox, monkeypatch):
    """The job-events handler on the launcher's ledger, its advance wired to the launcher."""
    sns = client("sns", batch_sandbox.endpoint)
    env = {
        "AWS_ENDPOINT_URL": batch_sandbox.endpoint,
        "FTL_JOB_TABLE": chained.table,
        "FTL_TOPIC_ARN": sns.create_topic(Name=f"ftl-{chained.table}")["TopicArn"],
    }
    module = load_handler(EVENTS_DIR, monkeypatch, env)
    module.RUNTIME.chain_function = "ftl-trigger:chain"
    module.RUNTIME.lambda_client = Invoker(chained)
    return module


def test_batchs_failed_event_starts_the_next_service_job(chained, clock, job_events):
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    outbox = chained.standin.outbox
    start = len(outbox)
    end_attempt(chained, clock, first, ran_s=300, status="Failed", **NO_CAPACITY)
    seen = outbox[start:]
    kinds = [
        (e["source"], e["detail"].get("status") or e["detail"]["TrainingJobStatus"]) for e in seen
    ]
    assert kinds[-2:] == [("aws.sagemaker", "Failed"), ("aws.batch", "FAILED")]
    calls = job_events.RUNTIME.lambda_client.calls
    for event in seen[:-1]:  # SageMaker's Failed of one try: Batch may still retry it
        job_events.handler(event, None)
    assert calls == [] and len(chained.batch_jobs()) == 1
    job_events.handler(seen[-1], None)  # Batch's FAILED ends the attempt
    assert calls == [{"action": "advance", "job_name": name}]
    (_, second) = chained.batch_jobs()
    assert second.request["jobName"] == f"{name}-a2"
    job = record(chained, name)
    assert job["attempt"] == 2 and job["batch_job_id"] == second.job_id
    assert job["attempts"][0]["cost_usd"] == pytest.approx(300 / 3600, abs=1e-4)
    # The new service job's own events follow attempt 2 (Batch's training job name is cut
    # to fit; its ftl:job-name tag names the attempt).
    start = len(outbox)
    end_attempt(chained, clock, second, ran_s=900, status="Completed")
    for event in outbox[start - 3 :]:
        job_events.handler(event, None)
    job = record(chained, name)
    assert job["status"] == "Completed" and job["attempt"] == 2
    assert [a["status"] for a in job["attempts"]] == ["Failed", "Completed"]
    assert job["attempts"][1]["cost_usd"] == pytest.approx(900 / 3600, abs=1e-4)
    # One ask for the next attempt; the Completed job owes its evaluation (the template has
    # a policy, issue 36), which the job-events function asks the trigger for on each event.
    advances = [c for c in calls if c["action"] == "advance"]
    assert len(chained.batch_jobs()) == 2 and len(advances) == 1
    assert {c["action"] for c in calls} == {"advance", "evaluate"}


def test_twenty_replays_of_a_submit_queue_one_service_job(chained, clock, prefix):
    request = {
        "template": "distilbert-chain",
        "instance_type": "ml.g5.xlarge",
        "capacity": ["spot", "on-demand"],
        "client_token": prefix,
    }
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(lambda _: chained(dict(request)), range(20)))
    assert len({r.get("job_name") for r in results}) == 1, results
    (first,) = chained.batch_jobs()
    name = results[0]["job_name"]
    end_attempt(chained, clock, first, ran_s=60, status="Stopped", **NO_SPOT)
    with ThreadPoolExecutor(max_workers=10) as pool:
        replays = list(pool.map(lambda _: chained(dict(request)), range(20)))
        described = list(pool.map(lambda _: describe(chained, name), range(20)))
    assert {r["job_name"] for r in replays} == {name}
    odd = [d for d in described if d.get("attempt") != 2]
    assert not odd, odd
    # the concurrent describes started the next attempt once, as a service job of its own
    assert [j.request["jobName"] for j in chained.batch_jobs()] == [name, f"{name}-a2"]
    assert len(record(chained, name)["attempts"]) == 2


def test_stop_mid_chain_terminates_the_current_service_job(chained, clock):
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    end_attempt(chained, clock, first, ran_s=60, status="Stopped", **NO_SPOT)
    assert describe(chained, name)["attempt"] == 2
    (_, second) = chained.batch_jobs()
    chained.standin.run_training_job(training_job(second))
    stopped = chained({"action": "stop", "job_name": name})
    assert stopped["status"] in ("Stopping", "Stopped"), stopped
    assert second.status == "FAILED" and second.terminated
    job = describe(chained, name)
    assert job["status"] == "Stopped" and job["attempt"] == 2, job
    assert job["next_attempt_pending"] is False
    assert not record(chained, name).get("chain_pending")
    assert len(chained.batch_jobs()) == 2  # nothing else queued


@pytest.mark.parametrize("ending", [NO_SPOT, NO_CAPACITY])
def test_a_stop_after_an_attempt_ended_for_capacity_queues_no_next_one(chained, clock, ending):
    """The stop's own look finds the attempt ended for want of capacity: the job stops
    between the two attempts (it started the next service job and terminated it at once)."""
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    status = "Stopped" if ending is NO_SPOT else "Failed"
    end_attempt(chained, clock, first, ran_s=120, status=status, **ending)
    stopped = chained({"action": "stop", "job_name": name})
    assert stopped["status"] == "Stopped" and stopped["attempt"] == 2, stopped
    assert chained.batch_jobs() == [first]  # no service job for attempt 2
    job = describe(chained, name)
    assert job["status"] == "Stopped" and job["next_attempt_pending"] is False
    assert [a["status"] for a in job["attempts"]] == [status, "Stopped"]
    assert job["attempts"][0]["cost_usd"] == pytest.approx(120 / 3600, abs=1e-4)
    assert chained.batch_jobs() == [first]


def test_a_bad_capacity_choice_queues_nothing(chained):
    resp = submit(chained, capacity=["gpu"])
    assert resp["error"]["field"] == "capacity"
    assert chained.batch_jobs() == [] and chained.ledger_items() == []


# ------------------------------------------------- Batch's end before SageMaker's (any order)
GENERIC = "Received status from SageMaker: Training job failed"  # Batch says no more than this
NO_LUCK = {"reason": "AlgorithmError: the script exited with code 1"}


def attempt_ends(launcher, clock, service_job, status: str, how: dict[str, str]):
    """The attempt's training job ends; Batch's reason says only that it failed. Returns the
    events before the end, SageMaker's event of the end and Batch's FAILED."""
    outbox = launcher.standin.outbox
    start = len(outbox)
    end_attempt(launcher, clock, service_job, ran_s=300, status=status, **how)
    service_job.reason = GENERIC  # DescribeServiceJob says what the event says
    *before, sagemaker_end, batch_end = outbox[start:]
    assert (sagemaker_end["source"], batch_end["source"]) == ("aws.sagemaker", "aws.batch")
    assert batch_end["detail"]["status"] == "FAILED"
    batch_end["detail"]["statusReason"] = GENERIC
    return before, sagemaker_end, batch_end


def deliver(job_events, events) -> None:
    for event in events:
        job_events.handler(event, None)


ORDERS = ["batch-first", "sagemaker-first"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("status,how", [("Stopped", NO_SPOT), ("Failed", NO_CAPACITY)])
def test_an_end_for_capacity_moves_the_chain_whichever_event_comes_first(
    chained, clock, job_events, order, status, how
):
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    before, sagemaker_end, batch_end = attempt_ends(chained, clock, first, status, how)
    deliver(job_events, before)
    pair = [batch_end, sagemaker_end] if order == "batch-first" else [sagemaker_end, batch_end]
    deliver(job_events, pair)
    job = record(chained, name)
    assert job["status"] not in ("Failed", "Stopped") and job["attempt"] == 2, job
    (_, second) = chained.batch_jobs()
    assert second.request["jobName"] == f"{name}-a2" and job["batch_job_id"] == second.job_id
    ended = job["attempts"][0]
    assert ended["status"] == status and ended["cost_usd"] == pytest.approx(300 / 3600, abs=1e-4)
    assert ("MaxWaitTimeExceeded" in ended["reason"]) or ("Insufficient" in ended["reason"])
    # one ask of the chain alias: Batch's end (held) or the attempt's end for capacity
    assert job_events.RUNTIME.lambda_client.calls == [{"action": "advance", "job_name": name}]
    deliver(job_events, pair)  # EventBridge may deliver either again: nothing changes
    assert len(chained.batch_jobs()) == 2 and record(chained, name)["attempt"] == 2


@pytest.mark.parametrize("order", ORDERS)
def test_a_failure_for_another_reason_ends_the_job_whichever_event_comes_first(
    chained, clock, job_events, order
):
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    before, sagemaker_end, batch_end = attempt_ends(chained, clock, first, "Failed", NO_LUCK)
    deliver(job_events, before)
    pair = [batch_end, sagemaker_end] if order == "batch-first" else [sagemaker_end, batch_end]
    deliver(job_events, pair)
    job = record(chained, name)
    assert job["status"] == "Failed" and job["attempt"] == 1, job
    assert job["attempts"][0]["status"] == "Failed" and not job.get("chain_pending")
    assert chained.batch_jobs() == [first]  # no next attempt


class FailingOnce(Invoker):
    """The chain alias cannot be reached the first time (throttled, a network error)."""

    def invoke(self, **kw):  # noqa: ANN003
        if not self.calls:
            self.calls.append("failed")
            raise RuntimeError("Rate exceeded")
        return super().invoke(**kw)


@pytest.mark.parametrize(
    "status,how,moves", [("Stopped", NO_SPOT, True), ("Failed", NO_CAPACITY, True),
                         ("Failed", NO_LUCK, False)],
)  # fmt: skip
def test_a_held_end_is_decided_by_sagemakers_later_event_when_the_ask_failed(
    chained, clock, job_events, status, how, moves
):
    job_events.RUNTIME.lambda_client = FailingOnce(chained)
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    before, sagemaker_end, batch_end = attempt_ends(chained, clock, first, status, how)
    deliver(job_events, [*before, batch_end])
    held = record(chained, name)
    # Batch's end is recorded, the job's status is not decided on its word alone
    assert held["status"] == "InProgress" and held["batch_status"] == "FAILED", held
    assert held["batch_status_reason"] == GENERIC and chained.batch_jobs() == [first]
    result = job_events.handler(sagemaker_end, None)
    job = record(chained, name)
    if moves:
        assert job["attempt"] == 2 and job["status"] not in ("Failed", "Stopped"), job
        assert [j.request["jobName"] for j in chained.batch_jobs()] == [name, f"{name}-a2"]
    else:
        assert result["status"] == "Failed" and job["attempt"] == 1, job
        assert "AlgorithmError" in job["failure_reason"] and chained.batch_jobs() == [first]


def test_a_held_end_is_decided_by_a_later_describe_when_the_ask_failed(chained, clock, job_events):
    job_events.RUNTIME.lambda_client = FailingOnce(chained)
    name = submit(chained)["job_name"]
    (first,) = chained.batch_jobs()
    before, _, batch_end = attempt_ends(chained, clock, first, "Failed", NO_CAPACITY)
    deliver(job_events, [*before, batch_end])  # SageMaker's event is never delivered
    assert record(chained, name)["status"] == "InProgress"
    job = describe(chained, name)  # DescribeTrainingJob says it found no capacity
    assert job["attempt"] == 2 and job["status"] not in ("Failed", "Stopped"), job
    assert job["attempts"][0]["reason"].startswith("CapacityError")
    assert [j.request["jobName"] for j in chained.batch_jobs()] == [name, f"{name}-a2"]
