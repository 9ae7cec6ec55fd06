"""Queue mode deployed (``ftl:scheduler=queue``): a second deploy into the session's sandbox,
with the Batch stand-in configured from the synthesized template and its events pumped to the
deployed job-events function (``sandbox/queue_mode.py``, ``sandbox/event_pump.py``).

The deploy uses its own platform name (``ftlqueue``) and a capacity of 4 instances. The
trigger's own queue-mode flow (submit answering ``Queued``) is the last test; the full
scenario with teams is ``test_queue_scenario.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

import jobmodel.contract.errors
from jobmodel.capacity.queue_eta import HANDOVER_ALLOWANCE_S, StartBound, hold_limit
from sandbox.deploy import ACCOUNT, REGION
from sandbox.queue_mode import deploy_queue
from sandbox.runner import DeployedFunction

PLATFORM = "ftlqueue"
QUEUE_NAME = f"{PLATFORM}-training"
QUEUE_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{QUEUE_NAME}"
CONTEXT = {
    "ftl:platformName": PLATFORM,
    "ftl:queueCapacityInstances": "4",
    "ftl:queueHeadTimeoutMinutes": "30",
}
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def queue(deployed):
    # The sandbox loads functions with os.environ.update(their environment): put back what
    # was here afterwards, so no later module's function sees this deploy's settings.
    saved = dict(os.environ)
    started = time.perf_counter()
    deployment = deploy_queue(deployed.sandbox, context=CONTEXT)
    print(f"\nqueue deploy: {time.perf_counter() - started:.1f}s")
    yield deployment
    os.environ.clear()
    os.environ.update(saved)


def _batch(deployed):
    return deployed.client("batch")


def _events_function(deployed, queue) -> str:
    """The queue deploy's job-events function (the one publishing to its topic)."""
    topic = queue.output("JobEventsTopicArn")
    lam = deployed.client("lambda")
    names = [
        f["FunctionArn"]
        for page in lam.get_paginator("list_functions").paginate()
        for f in page["Functions"]
        if (f.get("Environment") or {}).get("Variables", {}).get("FTL_TOPIC_ARN") == topic
        and "FTL_SOURCE_S3_URI" not in f["Environment"]["Variables"]  # not the trigger
    ]
    (arn,) = names
    return arn


def _payload(deployed, queue, name: str, instances: int = 2) -> dict:
    """A CreateTrainingJob request as the deployed trigger renders it (a dry run)."""
    lam = deployed.client("lambda")
    reply = lam.invoke(
        FunctionName=queue.output("TriggerFunctionName"),
        Payload=json.dumps({"template": "distilbert-spot", "dry_run": True}).encode(),
    )
    rendered = json.loads(reply["Payload"].read())["create_training_job"]
    rendered["TrainingJobName"] = name
    rendered["ResourceConfig"]["InstanceCount"] = instances
    return rendered


def _submit(deployed, queue, name: str) -> str:
    out = _batch(deployed).submit_service_job(
        jobName=name,
        jobQueue=queue.output("JobQueueArn"),
        serviceJobType="SAGEMAKER_TRAINING",
        serviceRequestPayload=json.dumps(_payload(deployed, queue, name)),
        shareIdentifier="default",
    )
    return out["jobId"]


def _training_job(deployed, job_id: str) -> str:
    job = _batch(deployed).describe_service_job(jobId=job_id)
    return job["latestAttempt"]["serviceResourceId"]["value"].rsplit("/", 1)[1]


# --------------------------------------------------------------------------------- tests


def _invoked(lam, function: str, event: dict) -> dict:
    """The deployed function's answer to ``event``, which must be no error."""
    reply = lam.invoke(FunctionName=function, Payload=json.dumps(event).encode())
    body = json.loads(reply["Payload"].read())
    assert "FunctionError" not in reply and "error" not in body, body
    return body


def test_job_queue_output_is_the_stand_ins_queue(deployed, queue):
    assert queue.output("JobQueueArn") == QUEUE_ARN
    assert queue.queues == {QUEUE_NAME: QUEUE_ARN}
    q = deployed.sandbox.batch.queues[QUEUE_NAME]
    assert (q.capacity, q.head_timeout_s, q.share_policy) == (4, 1800.0, "fairshare")
    assert q.weight_factors == {"default": 1.0}
    dashboard = queue.output("FleetDashboardName")
    assert dashboard == f"{PLATFORM}-fleet"
    body = deployed.client("cloudwatch").get_dashboard(DashboardName=dashboard)["DashboardBody"]
    assert "FineTuningLauncher/Fleet" in body


def test_trigger_is_deployed_in_queue_mode(deployed, queue):
    config = deployed.client("lambda").get_function_configuration(
        FunctionName=queue.output("TriggerFunctionName")
    )
    env = config["Environment"]["Variables"]
    assert env["FTL_SCHEDULER"] == "queue" and env["FTL_JOB_QUEUE"] == QUEUE_ARN


def test_the_deployed_triggers_batch_client_reaches_the_stand_in(deployed, queue):
    """The trigger's own botocore session (the asset's trimmed models) and its Batch module,
    loaded from the deployed zip with the environment the sandbox runs it with."""
    fn = DeployedFunction(deployed.endpoint, queue.output("TriggerFunctionName"))
    # The handler imported the deployed ftl_trigger package; its Batch module comes from the
    # same folder of the deployed zip.
    names = ("aws", "backends.queue.service_jobs")
    aws, batch = (fn.module.asset_modules[f"ftl_trigger.{m}"] for m in names)
    # ... and only it: the repository's own modules are still the ones a later import gets.
    assert sys.modules["jobmodel.contract.errors"] is jobmodel.contract.errors
    assert (
        "ftl_trigger.backends.queue.service_jobs" not in sys.modules
        or sys.modules["ftl_trigger.backends.queue.service_jobs"] is not batch
    )
    assert Path(batch.__file__).is_relative_to(fn.code_dir)
    assert (fn.code_dir / "botocore_data" / "batch").is_dir()
    client = aws.session().create_client("batch", region_name=REGION)
    request = batch.service_job_request(
        _payload(deployed, queue, "via-trigger-client", instances=1),
        job_queue=fn.environment["FTL_JOB_QUEUE"],
        job_name="via-trigger-client",
        client_token="via-trigger-client-1",
        team=None,
        priority=5,
    )
    submitted = batch.submit(client, request)
    assert submitted["jobArn"].startswith(f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/")
    assert batch.describe(client, submitted["jobId"])["batch_job_id"] == submitted["jobId"]
    assert deployed.sandbox.batch.jobs[submitted["jobId"]].queue.name == QUEUE_NAME
    # Give the instance back, so the next test starts from an empty queue.
    deployed.sandbox.batch.finish_training_job(_training_job(deployed, submitted["jobId"]))
    queue.pump.drain()


def test_a_service_job_starts_a_moto_training_job_and_job_events_hear_of_it(deployed, queue):
    standin, pump, sm = deployed.sandbox.batch, queue.pump, deployed.client("sagemaker")
    events_fn = _events_function(deployed, queue)
    pump.drain()  # anything earlier tests left
    first, second, third = (_submit(deployed, queue, f"capacity-{i}") for i in (1, 2, 3))
    status = {
        j: _batch(deployed).describe_service_job(jobId=j)["status"] for j in (first, second, third)
    }
    assert status == {first: "SCHEDULED", second: "SCHEDULED", third: "RUNNABLE"}
    training = _training_job(deployed, first)
    described = sm.describe_training_job(TrainingJobName=training)
    assert described["TrainingJobStatus"] == "InProgress"
    assert described["ResourceConfig"]["InstanceCount"] == 2
    assert described["RoleArn"] == queue.output("TrainingRoleArn")

    delivered = pump.drain()
    assert delivered and all(d.target == events_fn and not d.error for d in delivered)
    batch_events = [d for d in delivered if d.event["source"] == "aws.batch"]
    assert sorted(
        (d.event["detail"]["jobId"], d.event["detail"]["status"]) for d in batch_events
    ) == sorted(
        [
            (first, "RUNNABLE"),
            (first, "SCHEDULED"),
            (second, "RUNNABLE"),
            (second, "SCHEDULED"),
            (third, "RUNNABLE"),
        ]
    )
    assert {d.event["detail"]["jobQueue"] for d in batch_events} == {QUEUE_ARN}
    started = [d for d in delivered if d.event["source"] == "aws.sagemaker"]
    assert {d.event["detail"]["TrainingJobName"] for d in started} == {
        training,
        _training_job(deployed, second),
    }
    # The deployed handler ran: it maps Batch's training job name (AWSBatch<name><hex>) back
    # to the job name; these jobs were submitted straight to Batch, not by the launcher, so
    # the ledger has no such job and nothing is recorded.
    assert {d.response["job_name"] for d in started} == {"capacity-1", "capacity-2"}
    assert {d.response["updated"] for d in delivered} == {False}

    standin.finish_training_job(training)
    assert _batch(deployed).describe_service_job(jobId=third)["status"] == "SCHEDULED"
    delivered = pump.drain()
    seen = {(d.event["source"], d.rule) for d in delivered}
    assert len({rule for _, rule in seen}) == 2  # the SageMaker rule and the Batch rule
    changes = [
        (d.event["detail"]["TrainingJobName"], d.event["detail"]["TrainingJobStatus"])
        for d in delivered
        if d.event["source"] == "aws.sagemaker"
    ]
    assert changes == [(training, "Completed"), (_training_job(deployed, third), "InProgress")]
    assert [
        (d.event["detail"]["jobId"], d.event["detail"]["status"])
        for d in delivered
        if d.event["source"] == "aws.batch"
    ] == [(first, "SUCCEEDED"), (third, "SCHEDULED")]
    for job in (second, third):
        standin.finish_training_job(_training_job(deployed, job))
    pump.drain()


def test_events_of_other_platforms_jobs_reach_only_their_own_rules(deployed, queue):
    """The session's direct-mode deploy has a SageMaker rule too: a queue-mode job's events
    match only the queue deploy's rules (its role, its queue)."""
    events_fn = _events_function(deployed, queue)
    job = _submit(deployed, queue, "only-mine")
    delivered = queue.pump.drain()
    assert delivered and {d.target for d in delivered} == {events_fn}
    deployed.sandbox.batch.finish_training_job(_training_job(deployed, job))
    assert {d.target for d in queue.pump.drain()} == {events_fn}


def test_a_chained_job_without_spot_capacity_moves_on_to_a_new_service_job(deployed, queue):
    """Issue 20 in queue mode, deployed: a capacity chain's spot attempt is a service job;
    when SageMaker ends its training job for want of spot capacity, the deployed job-events
    function hears it (Batch's FAILED), asks the trigger's chain alias, and the on-demand step
    is a new service job. The stand-in's training jobs are moto's (the SageMaker capacity
    stand-in is not on their path): SageMaker's own word on the spot wait that ran out
    (``Stopped``/``MaxWaitTimeExceeded``) is put on the training job, as SageMaker reports it."""
    lam, standin = deployed.client("lambda"), deployed.sandbox.batch
    trigger = queue.output("TriggerFunctionName")

    def call(event):
        return _invoked(lam, trigger, event)

    def service_jobs(name):
        return sorted(
            (j for j in standin.jobs.values() if j.name in (name, f"{name}-a2")),
            key=lambda j: j.created,
        )

    job = call(
        {
            "template": "distilbert-chain",
            "job_name": "qchain",
            "instance_type": "ml.g5.xlarge",
            "capacity": ["spot", "on-demand"],
        }
    )
    name = job["job_name"]
    assert job["status"] == "Queued" and job["attempt"] == 1, job
    (first,) = service_jobs(name)
    assert first.status == "SCHEDULED" and first.request["retryStrategy"]["attempts"] == 3
    spot = first.training_arn.rsplit("/", 1)[1]
    standin.run_training_job(spot)
    standin.finish_training_job(spot, "Stopped", secondary="MaxWaitTimeExceeded")
    queue.pump.drain()  # SageMaker's Stopped and Batch's FAILED reach the job-events function
    first_, second = service_jobs(name)
    assert first_ is first and first.status == "FAILED"
    assert second.request["jobName"] == f"{name}-a2" and second.job_id != first.job_id
    sent = json.loads(second.request["serviceRequestPayload"])
    assert "EnableManagedSpotTraining" not in sent  # exclusive with InstancePreferences
    assert sent["ResourceConfig"]["InstancePreferences"][0]["InstanceType"] == "ml.g5.xlarge"
    job = call({"action": "describe", "job_name": name})
    assert job["attempt"] == 2 and job["batch_job_id"] == second.job_id, job
    assert "MaxWaitTimeExceeded" in job["attempts"][0]["reason"]
    standin.run_training_job(second.training_arn.rsplit("/", 1)[1])
    standin.finish_training_job(second.training_arn.rsplit("/", 1)[1], "Completed")
    queue.pump.drain()
    job = call({"action": "describe", "job_name": name})
    assert job["status"] == "Completed", job
    # SageMaker's Stopped moved the chain on (Batch, which reports it FAILED, was late)
    assert [a["status"] for a in job["attempts"]] == ["Stopped", "Completed"]
    assert job["attempts"][0]["billable_seconds"] is not None
    assert len(service_jobs(name)) == 2


def test_the_trigger_queues_the_third_job_and_starts_it_when_one_ends(deployed, queue):
    """docs/QUEUE.md's contract through the deployed trigger: with capacity 4, three 2-instance
    jobs: the third is Queued with a reason and a position, and starts when one ends."""
    lam, standin = deployed.client("lambda"), deployed.sandbox.batch
    trigger = queue.output("TriggerFunctionName")

    def call(event):
        return _invoked(lam, trigger, event)

    # Evaluation jobs that earlier tests' Completed jobs queued (issue 36) are taken off the
    # queue first: this test is the queue's contract for the three jobs below.
    for job in list(standin.jobs.values()):
        if job.queue.name == QUEUE_NAME and job.name.endswith("-eval"):
            standin.terminate(job.job_id, "the test's own queue")
    queue.pump.drain()
    jobs = [
        call({"template": "albert-mlm-pretrain", "job_name": f"fair-{i}", "instance_count": 2})
        for i in (1, 2, 3)
    ]
    assert [j["status"] for j in jobs] == ["Queued"] * 3  # the submit's answer (docs/API.md)
    assert {j.name for j in standin.jobs.values()} >= {j["job_name"] for j in jobs}
    queue.pump.drain()
    waiting = call({"action": "describe", "job_name": jobs[2]["job_name"]})
    assert waiting["status"] == "Queued" and waiting["queue_reason"]
    assert waiting["queue_position"] == 1 and waiting["batch_job_id"]
    # The estimated start (docs/API.md, Queue mode): when the first of the two running jobs
    # frees its instances at the latest, Batch's scheduledAt + its limit (spot: the max wait)
    # + the allowance; read by the deployed trigger from Batch and the ledger.
    running = [
        j
        for j in standin.jobs.values()
        if j.queue.name == QUEUE_NAME and j.status in ("SCHEDULED", "RUNNING")
    ]
    assert sorted(j.name for j in running) == sorted(j["job_name"] for j in jobs[:2])
    ends = [
        int(j.scheduled * 1000) / 1000
        + (hold_limit(json.loads(j.request["serviceRequestPayload"])) or 0)
        + HANDOVER_ALLOWANCE_S
        for j in running
    ]
    assert waiting["estimated_start_by"] == StartBound(min(ends)).iso, waiting
    # one instance would wait for the same end: only on-demand is offered (a spot job)
    assert [o["option"] for o in waiting["sooner"]] == ["on_demand"]
    first = call({"action": "describe", "job_name": jobs[0]["job_name"]})
    standin.finish_training_job(first["training_job_name"])
    queue.pump.drain()
    started = call({"action": "describe", "job_name": jobs[2]["job_name"]})
    assert started["status"] in ("Scheduled", "InProgress") and started["training_job_name"]
