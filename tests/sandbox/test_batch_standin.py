"""The Batch service-job stand-in, driven by boto3's real batch client on the sandbox endpoint.

These tests need no deployed platform (they do not use the session's ``deployed`` fixture):
one sandbox with the stand-in, a queue per test.
"""

from __future__ import annotations

import json
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from jobmodel.jobs.queue_state import from_service_job
from sandbox.batch import BatchStandIn
from sandbox.batch_api import BatchSandbox
from tests.lambda_support import ROOT

sys.path.insert(0, str(ROOT / "lambda" / "trigger"))
from ftl_trigger.backends.queue import service_jobs as trigger_batch  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def sandbox():
    clock = Clock()
    with BatchSandbox(standin=BatchStandIn(clock=clock)) as sb:
        sb.clock = clock
        yield sb


def _client(sandbox, service):
    return boto3.client(
        service,
        endpoint_url=sandbox.endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def payload(name: str, instances: int = 2) -> dict:
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::123456789012:role/ftl-train",
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1",
            "TrainingInputMode": "File",
        },
        "OutputDataConfig": {"S3OutputPath": "s3://out/"},
        "ResourceConfig": {
            "InstanceType": "ml.p4d.24xlarge",
            "InstanceCount": instances,
            "VolumeSizeInGB": 50,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }


def queue(sandbox, **kw) -> str:
    name = f"q-{uuid.uuid4().hex[:8]}"
    kw.setdefault("capacity", 4)
    sandbox.batch.create_queue(name, **kw)
    return name


def submit(client, q, team, name, *, token=None, instances=2, priority=0):
    req = trigger_batch.service_job_request(
        payload(name, instances),
        job_queue=q,
        job_name=name,
        client_token=token or name,
        team=team,
        priority=priority,
        tags={"ftl:team": team},
    )
    return trigger_batch.submit(client, req)["jobId"]


def test_capacity_then_fair_share_order(sandbox):
    batch, sm = _client(sandbox, "batch"), _client(sandbox, "sagemaker")
    q = queue(sandbox)
    ids = {}
    for team in ("team-a", "team-b", "team-c"):
        for i in (1, 2):
            ids[f"{team}-{i}"] = submit(batch, q, team, f"{team}-job{i}")
    state = {k: batch.describe_service_job(jobId=v) for k, v in ids.items()}
    assert [k for k, d in state.items() if d["status"] == "SCHEDULED"] == ["team-a-1", "team-a-2"]
    for k in ("team-b-1", "team-b-2", "team-c-1", "team-c-2"):
        assert state[k]["status"] == "RUNNABLE"
        assert from_service_job(state[k]).queue_reason == "waiting for capacity"
    running = batch.list_service_jobs(jobQueue=q, jobStatus="SCHEDULED")["jobSummaryList"]
    assert {j["jobId"] for j in running} == {ids["team-a-1"], ids["team-a-2"]}
    # The moto training job exists, created from the stored payload, as Batch names it.
    arn = state["team-a-1"]["latestAttempt"]["serviceResourceId"]["value"]
    tj = sm.describe_training_job(TrainingJobName=arn.rsplit("/", 1)[-1])
    assert tj["TrainingJobName"].startswith("AWSBatchteam-a-job1")
    assert tj["ResourceConfig"]["InstanceCount"] == 2 and tj["TrainingJobStatus"] == "InProgress"
    snapshot = batch.get_job_queue_snapshot(jobQueue=q)["frontOfQueue"]["jobs"]
    fair = ["team-b-1", "team-c-1", "team-b-2", "team-c-2"]  # FIFO would be b1, b2, c1, c2
    assert [j["jobArn"].rsplit("/", 1)[-1] for j in snapshot] == [ids[k] for k in fair]
    positions = trigger_batch.positions_of(trigger_batch.queue_order(batch, q) or [])
    assert positions[state["team-c-1"]["jobArn"]] == 2

    sandbox.batch.run_training_job(arn.rsplit("/", 1)[-1])
    assert batch.describe_service_job(jobId=ids["team-a-1"])["status"] == "RUNNING"
    started = []
    for done in ("team-a-1", "team-a-2", "team-b-1", "team-c-1"):
        name = batch.describe_service_job(jobId=ids[done])["latestAttempt"]["serviceResourceId"]
        sandbox.batch.finish_training_job(name["value"].rsplit("/", 1)[-1])
        assert batch.describe_service_job(jobId=ids[done])["status"] == "SUCCEEDED"
        now = {k: batch.describe_service_job(jobId=v)["status"] for k, v in ids.items()}
        started += [k for k in fair if now[k] == "SCHEDULED" and k not in started]
    assert started == fair
    events = [e for e in sandbox.batch.events if e["detail"]["jobId"] == ids["team-b-1"]]
    assert [e["detail"]["status"] for e in events] == ["RUNNABLE", "SCHEDULED", "SUCCEEDED"]
    first = [
        e["detail"]["status"]
        for e in sandbox.batch.events
        if e["detail"]["jobId"] == ids["team-a-1"]
    ]
    assert first == ["RUNNABLE", "SCHEDULED", "RUNNING", "SUCCEEDED"]
    assert all("serviceRequestPayload" not in e["detail"] for e in events)
    assert events[0]["detail-type"] == "Batch Service Job State Change"


def _finish(sandbox, batch, job_id):
    arn = batch.describe_service_job(jobId=job_id)["latestAttempt"]["serviceResourceId"]["value"]
    sandbox.batch.finish_training_job(arn.rsplit("/", 1)[-1])


@pytest.mark.parametrize(("decay_s", "next_up"), [(0.0, "a-3"), (3600.0, "b-2")])
def test_fair_share_counts_recent_use_over_the_decay_window(sandbox, decay_s, next_up):
    """Team a ran both slots for an hour; when they free, b (waiting since) holds 2 and a holds
    nothing. Counting only what is held now, a's older job goes next; with Batch's
    shareDecaySeconds a's last hour of use still counts (2 instances), so b's goes."""
    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=4, share_decay_s=decay_s)
    ids = {f"a-{i}": submit(batch, q, "a", f"a-d{i}-{uuid.uuid4().hex[:4]}") for i in (1, 2, 3)}
    sandbox.clock.now += 1
    ids |= {f"b-{i}": submit(batch, q, "b", f"b-d{i}-{uuid.uuid4().hex[:4]}") for i in (1, 2)}
    sandbox.clock.now += 3600
    _finish(sandbox, batch, ids["a-1"])  # b-1 starts: b holds 0, a holds 2 (a-2)
    assert batch.describe_service_job(jobId=ids["b-1"])["status"] == "SCHEDULED"
    _finish(sandbox, batch, ids["a-2"])  # a: 0 held; b: 2 held; a-3 is older than b-2
    status = {k: batch.describe_service_job(jobId=v)["status"] for k, v in ids.items()}
    assert [k for k in ("a-3", "b-2") if status[k] == "SCHEDULED"] == [next_up]


def test_terminating_a_queued_job_starts_nothing(sandbox):
    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=2)
    first = submit(batch, q, "team-a", "runner")
    waiting = submit(batch, q, "team-b", "waiter")
    trigger_batch.terminate(batch, waiting, requested_by="alice")
    out = batch.describe_service_job(jobId=waiting)
    assert out["status"] == "FAILED" and out["isTerminated"] and "latestAttempt" not in out
    assert from_service_job(out).status == "Stopped"
    name = batch.describe_service_job(jobId=first)["latestAttempt"]["serviceResourceId"]["value"]
    sandbox.batch.finish_training_job(name.rsplit("/", 1)[-1])
    assert batch.describe_service_job(jobId=waiting)["status"] == "FAILED"
    assert batch.list_service_jobs(jobQueue=q, jobStatus="SCHEDULED")["jobSummaryList"] == []


def test_twenty_concurrent_duplicates_queue_one_job(sandbox):
    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=2)
    submit(batch, q, "team-a", "blocker")
    with ThreadPoolExecutor(max_workers=20) as pool:
        ids = set(pool.map(lambda _: submit(batch, q, "team-b", "dup", token="same"), range(20)))
    assert len(ids) == 1
    jobs = batch.list_service_jobs(jobQueue=q, jobStatus="RUNNABLE")["jobSummaryList"]
    assert [j["jobName"] for j in jobs] == ["dup"]
    # same token, different parameters: Batch refuses (the trigger maps it to Conflict)
    with pytest.raises(trigger_batch.Conflict):
        submit(batch, q, "team-b", "other-name", token="same")


def test_head_of_queue_time_limit_terminates_a_job_too_big_for_the_capacity(sandbox):
    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=4, head_timeout_s=600)
    small = submit(batch, q, "team-a", "small", instances=2)
    big = submit(batch, q, "team-b", "too-big", instances=6)
    behind = submit(batch, q, "team-c", "behind", instances=2)
    waiting = batch.describe_service_job(jobId=big)
    assert waiting["status"] == "RUNNABLE"
    assert waiting["statusReason"].startswith("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE")
    assert batch.describe_service_job(jobId=behind)["status"] == "RUNNABLE"  # no backfill
    sandbox.clock.now += 601
    out = batch.describe_service_job(jobId=big)
    assert out["status"] == "FAILED" and out["isTerminated"]
    assert out["statusReason"] == (
        "Terminated by JobStateTimeLimit action due to reason: "
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
    )
    update = from_service_job(out)
    assert update.status == "FailedToStart" and update.failure_reason == out["statusReason"]
    assert batch.describe_service_job(jobId=behind)["status"] == "SCHEDULED"
    assert batch.describe_service_job(jobId=small)["status"] == "SCHEDULED"


def test_a_job_waiting_for_capacity_other_jobs_hold_is_never_terminated(sandbox):
    """Batch's time limit acts only on its listed reasons; waiting one's turn is none."""
    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=2, head_timeout_s=600)
    running = submit(batch, q, "team-a", "long-runner", instances=2)
    waiting = submit(batch, q, "team-b", "patient", instances=2)
    sandbox.clock.now += 3 * 3600
    assert batch.describe_service_job(jobId=waiting)["status"] == "RUNNABLE"
    arn = batch.describe_service_job(jobId=running)["latestAttempt"]["serviceResourceId"]["value"]
    sandbox.batch.finish_training_job(arn.rsplit("/", 1)[1])
    assert batch.describe_service_job(jobId=waiting)["status"] == "SCHEDULED"


def test_a_queue_without_the_reason_in_its_limit_never_terminates(sandbox):
    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=2, head_timeout_s=600, head_reasons=())
    big = submit(batch, q, "team-a", "never-fits", instances=3)
    sandbox.clock.now += 3600
    assert batch.describe_service_job(jobId=big)["status"] == "RUNNABLE"
    batch.terminate_service_job(jobId=big, reason="ftl stop: cleanup")  # free the queue


def test_batch_checks_the_request(sandbox):
    batch = _client(sandbox, "batch")
    q = queue(sandbox)
    base = {
        "jobName": "x",
        "jobQueue": q,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": json.dumps(payload("x")),
    }
    with pytest.raises(batch.exceptions.ClientException, match="shareIdentifier is required"):
        batch.submit_service_job(**base)
    with pytest.raises(batch.exceptions.ClientException, match="exceeds 10240"):
        batch.submit_service_job(
            **{
                **base,
                "shareIdentifier": "a",
                "serviceRequestPayload": json.dumps({"x": "y" * 10240}),
            }
        )
    with pytest.raises(batch.exceptions.ClientException, match="does not exist"):
        batch.submit_service_job(**{**base, "jobQueue": "nope", "shareIdentifier": "a"})
    with pytest.raises(trigger_batch.NotFound):
        trigger_batch.describe(batch, "no-such-job")


def test_stand_in_events_fold_into_the_ledger_in_any_order(sandbox):
    """The stand-in's events, mapped and merged as the job-events path will, in reverse
    order and twice over, leave the same ledger state as in order."""
    from jobmodel.jobs.queue_state import merge

    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=2)
    done = submit(batch, q, "team-a", "fold-done")
    stopped = submit(batch, q, "team-b", "fold-stopped")
    tj = batch.describe_service_job(jobId=done)["latestAttempt"]["serviceResourceId"]["value"]
    trigger_batch.terminate(batch, stopped, requested_by="bob")
    sandbox.batch.finish_training_job(tj.rsplit("/", 1)[-1])
    mine = [e for e in sandbox.batch.events if e["detail"]["jobId"] in (done, stopped)]

    def fold(events):
        ledger: dict[str, dict] = {}
        for event in events:
            update = from_service_job(event["detail"]).fields()
            record = ledger.setdefault(event["detail"]["jobName"], {"status": "Submitting"})
            for key, value in merge(record, update).items():
                if value is None:
                    record.pop(key, None)
                else:
                    record[key] = value
        return ledger

    forward = fold(mine)
    assert fold(list(reversed(mine)) * 2) == forward
    assert forward["fold-done"]["status"] == "Completed"
    assert forward["fold-done"]["training_job_arn"] == tj
    assert forward["fold-stopped"]["status"] == "Stopped"
    assert "training_job_arn" not in forward["fold-stopped"]


def test_outbox_holds_batch_and_sagemaker_state_changes_in_order(sandbox):
    """What the event pump delivers: the stand-in's Batch events and, interleaved as they
    happened, the SageMaker state changes of the training jobs it started."""
    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=2)
    start = len(sandbox.batch.outbox)
    job = submit(batch, q, "team-a", "outbox")
    arn = batch.describe_service_job(jobId=job)["latestAttempt"]["serviceResourceId"]["value"]
    name = arn.rsplit("/", 1)[-1]
    sandbox.batch.run_training_job(name)
    sandbox.clock.now += 120
    sandbox.batch.finish_training_job(name)
    mine = [
        e
        for e in sandbox.batch.outbox[start:]
        if e["detail"].get("jobId") == job or e["detail"].get("TrainingJobName") == name
    ]
    steps = [
        (e["source"], e["detail"].get("status") or e["detail"]["SecondaryStatus"]) for e in mine
    ]
    assert steps == [
        ("aws.batch", "RUNNABLE"),
        ("aws.sagemaker", "Starting"),
        ("aws.batch", "SCHEDULED"),
        ("aws.sagemaker", "Training"),
        ("aws.batch", "RUNNING"),
        ("aws.sagemaker", "Completed"),
        ("aws.batch", "SUCCEEDED"),
    ]
    done = mine[-2]
    assert done["detail-type"] == "SageMaker Training Job State Change"
    detail = done["detail"]
    assert detail["TrainingJobStatus"] == "Completed" and detail["TrainingJobArn"] == arn
    assert detail["TrainingTimeInSeconds"] == detail["BillableTimeInSeconds"] == 120
    assert detail["RoleArn"] == payload(name)["RoleArn"]
    assert detail["TrainingEndTime"] - detail["TrainingStartTime"] == 120_000
    assert all(e["detail"].get("TrainingJobName") != name for e in sandbox.batch.events)


def test_serving_queue_mode_lets_started_jobs_finish_so_the_queue_moves(sandbox):
    """Issue 18, point 5: with ``--queue --serve`` a queued job used to wait forever unless a
    test ended a training job; the sandbox's JobFinisher ends each after ``run_seconds``."""
    from sandbox.shell import JobFinisher

    batch = _client(sandbox, "batch")
    q = queue(sandbox, capacity=2)
    first = submit(batch, q, "team-a", "serve-first")
    second = submit(batch, q, "team-a", "serve-second")
    assert batch.describe_service_job(jobId=second)["status"] == "RUNNABLE"
    finisher = JobFinisher(sandbox.batch, pump=None, run_seconds=30)
    sandbox.clock.now += 29  # (jobs of the module's other tests may end too)
    assert not [n for n in finisher.finish_due() if n.startswith("AWSBatchserve-")]
    sandbox.clock.now += 1
    ended = [n for n in finisher.finish_due() if n.startswith("AWSBatchserve-")]
    assert len(ended) == 1 and ended[0].startswith("AWSBatchserve-first")
    assert batch.describe_service_job(jobId=first)["status"] == "SUCCEEDED"
    assert batch.describe_service_job(jobId=second)["status"] == "SCHEDULED"
