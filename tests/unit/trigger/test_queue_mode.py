"""Queue mode (FTL_SCHEDULER=queue) through the real handler: moto for DynamoDB and SageMaker,
the sandbox's AWS Batch stand-in for the service jobs (sandbox/batch.py), botocore's Stubber
or a patched client method for the failures Batch cannot be made to produce."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from ftl_trigger.backends.queue import service_jobs as batch
from jobmodel.jobs.queue_state import STOP_REASON
from tests.expected import JOB_FIELDS
from tests.lambda_support import emf_records, emf_totals, http_event
from tests.unit.trigger.conftest import queue_launcher
from tests.unit.trigger.test_teams import teams_env

QUEUE_FIELDS = {"batch_job_id", "priority", "share", "queued_at"}


@pytest.fixture
def queued(batch_sandbox, monkeypatch, tmp_path):
    """Queue mode on a queue with no capacity: every job waits."""
    return queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=0)


@pytest.fixture
def one_slot(batch_sandbox, monkeypatch, tmp_path):
    """Queue mode on a queue of one instance: one job runs, the next waits."""
    return queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=1)


def items(launcher, kind="job#"):
    return [i for i in launcher.ledger_items() if i["pk"]["S"].startswith(kind)]


def record(launcher, name):
    (item,) = [i for i in launcher.ledger_items() if i["pk"]["S"] == f"job#{name}"]
    return {k: next(iter(v.values())) for k, v in item.items()}


def job(prefix, **extra):
    return {"template": "distilbert-spot", "job_name": prefix, **extra}


# ------------------------------------------------------------------------------- submit
def test_a_callers_token_cannot_collide_with_the_launchers_own(queued, prefix):
    """A token-less job gets a Batch token derived from its name; a caller who sends the
    derivation's old form ("job:<name>") gets a job of its own, not a Conflict."""
    first = queued(job(f"{prefix}-a"))
    assert first["status"] == "Queued", first
    second = queued(job(f"{prefix}-b", client_token=f"job:{first['job_name']}"))
    assert second["status"] == "Queued", second
    sent = {j.request["jobName"]: j.request["clientToken"] for j in queued.batch_jobs()}
    assert len(set(sent.values())) == 2
    assert sent[first["job_name"]] != batch.batch_client_token(None, f"job:{first['job_name']}")


def test_submit_queues_a_service_job_instead_of_creating_a_training_job(queued, prefix):
    resp = queued(job(prefix, client_token=prefix))
    assert set(resp) == JOB_FIELDS | QUEUE_FIELDS, resp
    assert resp["status"] == "Queued" and resp["job_arn"] is None
    assert resp["priority"] == 50 and resp["queued_at"].endswith("Z")
    (sent,) = queued.batch_jobs()
    assert resp["batch_job_id"] == sent.job_id
    req = sent.request
    name = resp["job_name"]
    assert req["jobName"] == name and req["jobQueue"] == queued.queue_arn
    assert req["serviceJobType"] == "SAGEMAKER_TRAINING"
    assert req["shareIdentifier"] == "default" and req["schedulingPriority"] == 50
    assert req["clientToken"] == batch.batch_client_token(None, prefix)
    assert req["retryStrategy"] == batch.RETRY_STRATEGY
    assert req["tags"]["ftl:platform"] == "ftl" and req["tags"]["project"] == "fine-tuning-platform"
    item = record(queued, name)
    # Batch gets exactly the request the launcher validated and recorded, tagged with the
    # job's name (Batch renames the training job: the tag leads its events back here).
    rendered = json.loads(item["rendered"])
    tag = {"Key": "ftl:job-name", "Value": name}
    tagged = {**rendered, "Tags": [*rendered["Tags"], tag]}
    assert json.loads(req["serviceRequestPayload"]) == tagged
    assert item["status"] == "Queued" and item["batch_job_id"] == sent.job_id
    assert item["batch_job_arn"] == sent.arn and item["priority"] == "50"
    assert item["queued_at"] == resp["queued_at"]
    assert queued.jobs_named(prefix) == []  # no training job: Batch starts it, not the launcher


def test_templates_show_their_queue_priorities(queued):
    (spec,) = [t for t in queued({"action": "templates"})["templates"] if t["name"] == "llm-sft"]
    assert spec["queue_priority"] == 50 and spec["queue_priority_range"] == [0, 100]


def test_priority_from_the_request_and_from_the_template(queued, prefix):
    high = queued(job(prefix, priority=90))
    assert high["priority"] == 90
    assert queued.batch_jobs()[0].request["schedulingPriority"] == 90
    assert record(queued, high["job_name"])["priority"] == "90"
    replay = queued(job(prefix, priority=90, client_token=prefix))
    again = queued(job(prefix, priority=90, client_token=prefix))
    assert again["job_name"] == replay["job_name"]
    other = queued(job(prefix, priority=91, client_token=prefix))
    assert other["error"]["type"] == "Conflict"  # the priority is part of the request


@pytest.mark.parametrize("value", [101, -1, True, "90"])
def test_a_bad_priority_is_refused_before_anything_is_written(queued, prefix, value):
    resp = queued(http_event("POST", "/jobs", job(prefix, priority=value, client_token=prefix)))
    assert resp["statusCode"] == 400
    err = json.loads(resp["body"])["error"]
    assert err["field"] == "priority"
    if value == 101:
        assert (
            err["message"] == "priority must be from 0 to 100 for template distilbert-spot, got 101"
        )
    assert queued.ledger_items() == [] and queued.batch_jobs() == []


def test_direct_mode_refuses_a_priority(launcher, prefix):
    resp = launcher(job(prefix, priority=50))
    assert resp["error"]["type"] == "ValidationError" and resp["error"]["field"] == "priority"
    assert "ftl:scheduler = queue" in resp["error"]["message"]
    assert launcher.ledger_items() == []


def big_tags(n=30):
    return {f"k{i:02d}-" + "x" * 100: "v" * 250 for i in range(n)}


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_payload_over_10_kib_is_refused_with_no_record(queued, prefix, dry_run):
    resp = queued(job(prefix, tags=big_tags(), client_token=prefix, dry_run=dry_run))
    assert resp["error"]["type"] == "ValidationError" and resp["error"]["field"] == "request"
    assert "10240 bytes" in resp["error"]["message"]
    # Checked before the claim: no job, no token, no usage, nothing queued.
    assert queued.ledger_items() == [] and queued.batch_jobs() == []


def test_the_same_tags_fit_a_direct_submit(launcher, prefix):
    """The 10 KiB limit is Batch's: direct mode still accepts the request."""
    assert launcher(job(prefix, tags=big_tags()))["status"] == "InProgress"


def test_dry_run_in_queue_mode_shows_the_priority_and_writes_nothing(queued, prefix):
    resp = queued(job(prefix, dry_run=True, priority=7))
    assert resp["status"] == "DryRun" and resp["priority"] == 7
    assert not {"batch_job_id", "queued_at", "job_arn"} & set(resp)
    assert queued.ledger_items() == [] and queued.batch_jobs() == []


def test_a_failed_submit_frees_the_token_like_a_failed_create(queued, prefix):
    request = job(prefix, client_token=prefix)
    with Stubber(queued.module.RUNTIME.batch) as stub:
        stub.add_client_error(
            "submit_service_job", "ClientException", "Job queue q-x does not exist", 400
        )
        resp = queued(dict(request))
    assert (
        resp["error"]["type"] == "UpstreamError" and "SubmitServiceJob" in resp["error"]["message"]
    )
    (item,) = items(queued)
    assert item["status"]["S"] == "FailedToStart"
    assert item["error_type"]["S"] == "UpstreamError"
    assert items(queued, "token#") == []
    retry = queued(dict(request))
    assert retry["status"] == "Queued" and len(queued.batch_jobs()) == 1


def test_throttled_submit_is_reported_and_frees_the_token(queued, prefix):
    with Stubber(queued.module.RUNTIME.batch) as stub:
        stub.add_client_error("submit_service_job", "TooManyRequestsException", "slow", 429)
        resp = queued(job(prefix, client_token=prefix))
    assert resp["error"]["type"] == "Throttled"
    assert items(queued, "token#") == [] and queued.batch_jobs() == []


def _server_error(operation):
    return ClientError(
        {
            "Error": {"Code": "ServerException", "Message": "internal"},
            "ResponseMetadata": {"HTTPStatusCode": 500},
        },
        operation,
    )


@pytest.mark.parametrize("reached_batch", [True, False])
def test_a_5xx_submit_looks_for_the_job_before_failing(queued, prefix, monkeypatch, reached_batch):
    client = queued.module.RUNTIME.batch
    real = client.submit_service_job

    def answer_500(**kwargs):
        if reached_batch:
            real(**kwargs)  # Batch queued it; the answer was lost
        raise _server_error("SubmitServiceJob")

    monkeypatch.setattr(client, "submit_service_job", answer_500)
    resp = queued(job(prefix, client_token=prefix))
    if reached_batch:
        (sent,) = queued.batch_jobs()
        assert resp["status"] == "Queued" and resp["batch_job_id"] == sent.job_id
        assert record(queued, resp["job_name"])["batch_job_id"] == sent.job_id
    else:
        assert resp["error"]["type"] == "UpstreamError" and queued.batch_jobs() == []
        assert items(queued)[0]["status"]["S"] == "FailedToStart"
        assert items(queued, "token#") == []


def test_a_5xx_submit_that_cannot_be_checked_keeps_the_claim(queued, prefix, monkeypatch):
    from ftl_trigger import submit_flow as submit

    monkeypatch.setattr(submit, "WAIT_FOR_PEER_S", 0.05)
    client = queued.module.RUNTIME.batch
    real_submit, real_list = client.submit_service_job, client.list_service_jobs

    def fail(**kwargs):
        raise _server_error("ListServiceJobs")

    def submitted_then_500(**kwargs):
        real_submit(**kwargs)
        raise _server_error("SubmitServiceJob")

    monkeypatch.setattr(client, "submit_service_job", submitted_then_500)
    monkeypatch.setattr(client, "list_service_jobs", fail)
    request = job(prefix, client_token=prefix)
    assert queued(dict(request))["error"]["type"] == "UpstreamError"
    assert items(queued)[0]["status"]["S"] == "Submitting" and len(items(queued, "token#")) == 1
    monkeypatch.setattr(client, "submit_service_job", real_submit)
    monkeypatch.setattr(client, "list_service_jobs", real_list)
    resp = queued(dict(request))  # the replay resubmits with the same clientToken
    (sent,) = queued.batch_jobs()
    assert resp["status"] == "Queued" and resp["batch_job_id"] == sent.job_id


@pytest.mark.parametrize("reached_batch", [True, False])
def test_a_crash_before_the_ledger_knew_the_batch_job_is_finished_by_the_retry(
    queued, prefix, monkeypatch, reached_batch
):
    from ftl_trigger import submit_flow as submit

    monkeypatch.setattr(submit, "WAIT_FOR_PEER_S", 0.05)
    client = queued.module.RUNTIME.batch
    real = client.submit_service_job

    def crash(**kwargs):
        if reached_batch:
            real(**kwargs)
        raise SystemExit("container killed")

    monkeypatch.setattr(client, "submit_service_job", crash)
    request = job(prefix, client_token=prefix)
    with pytest.raises(SystemExit):
        queued(dict(request))
    (claimed,) = items(queued)
    assert claimed["status"]["S"] == "Submitting" and "batch_job_id" not in claimed
    assert len(queued.batch_jobs()) == (1 if reached_batch else 0)
    monkeypatch.setattr(client, "submit_service_job", real)
    resp = queued(dict(request))
    (sent,) = queued.batch_jobs()
    assert resp["job_name"] == claimed["job_name"]["S"] and resp["batch_job_id"] == sent.job_id
    assert record(queued, resp["job_name"])["status"] == "Queued"
    assert queued(dict(request))["batch_job_id"] == sent.job_id


def test_a_job_batch_queued_but_the_ledger_never_learned_is_repaired_by_describe(
    queued, prefix, monkeypatch
):
    """SubmitServiceJob queued the job, then the container died before the ledger write, and
    the request had no client_token to replay: after the grace, describe finds the job on
    the queue by its name and records it Queued (stop then terminates it)."""
    from datetime import timedelta

    from ftl_trigger import actions

    client = queued.module.RUNTIME.batch
    real = client.submit_service_job

    def crash(**kwargs):
        real(**kwargs)
        raise SystemExit("container killed")

    monkeypatch.setattr(client, "submit_service_job", crash)
    with pytest.raises(SystemExit):
        queued(job(prefix))
    monkeypatch.setattr(client, "submit_service_job", real)
    (claimed,) = items(queued)
    name = claimed["job_name"]["S"]
    assert queued({"action": "describe", "job_name": name})["status"] == "Submitting"
    runtime = queued.module.RUNTIME
    later = runtime.now() + timedelta(seconds=actions.SUBMIT_GRACE_S + 1)
    monkeypatch.setattr(runtime, "now", lambda: later)
    (sent,) = queued.batch_jobs()
    described = queued({"action": "describe", "job_name": name})
    assert described["status"] == "Queued" and described["batch_job_id"] == sent.job_id
    assert record(queued, name)["status"] == "Queued"
    assert queued({"action": "stop", "job_name": name})["status"] == "Stopped"


def test_twenty_concurrent_duplicates_queue_one_job(queued, prefix):
    request = job(prefix, client_token=prefix)
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(lambda _: queued(dict(request)), range(20)))
    assert {r.get("job_name") for r in results} != {None}, results
    assert len({r["job_name"] for r in results}) == 1, results
    (sent,) = queued.batch_jobs()
    assert {r["batch_job_id"] for r in results if r["status"] != "Submitting"} == {sent.job_id}
    assert len(items(queued)) == 1 and len(items(queued, "token#")) == 1


def test_teams_share_by_team_with_team_scoped_tokens_and_limits(
    batch_sandbox, monkeypatch, tmp_path, prefix
):
    launcher = queue_launcher(
        batch_sandbox, monkeypatch, tmp_path, capacity=0, env=teams_env({"max_instances": 1})
    )
    alpha = launcher(job(prefix, client_token=prefix), alias="team-alpha")
    beta = launcher(job(prefix, client_token=prefix), alias="team-beta")
    assert alpha["status"] == beta["status"] == "Queued" and alpha["team"] == "alpha"
    sent = {j.request["shareIdentifier"]: j.request for j in launcher.batch_jobs()}
    assert set(sent) == {"alpha", "beta"}
    assert sent["alpha"]["clientToken"] == batch.batch_client_token("alpha", prefix)
    assert sent["alpha"]["clientToken"] != sent["beta"]["clientToken"]
    # A queued job holds its team's instances: beta's limit of 1 is used.
    over = launcher(job(f"{prefix}-2"), alias="team-beta")
    assert over["error"]["type"] == "QuotaExceeded" and len(launcher.batch_jobs()) == 2


# ----------------------------------------------------------------------------- describe
def test_describe_a_waiting_job_shows_reason_position_and_wait(queued, prefix):
    first = queued(job(prefix))
    second = queued(job(f"{prefix}-b"))
    one = queued({"action": "describe", "job_name": first["job_name"]})
    two = queued({"action": "describe", "job_name": second["job_name"]})
    assert one["status"] == two["status"] == "Queued"
    assert (one["queue_position"], two["queue_position"]) == (1, 2)
    # No capacity at all: the head job can never fit, and Batch says so (the stand-in's
    # queue has no time limit, so it waits).
    assert one["queue_reason"] == "larger than the queue's capacity"
    assert two["queue_reason"] == "behind 1 job"
    assert one["queued_seconds"] >= 0 and one["queued_at"] == first["queued_at"]
    assert one["batch_job_id"] == first["batch_job_id"] and one["job_arn"] is None
    assert "training_job_name" not in one
    item = record(queued, first["job_name"])
    assert item["batch_status"] == "RUNNABLE" and item["status_source"] == "batch"
    assert item["queue_reason"] == "larger than the queue's capacity"


def test_describe_picks_up_a_reason_batch_changed_without_an_event(one_slot, prefix):
    """Batch rewrites a waiting job's statusReason (e.g. once it reaches the head) with no
    new timestamp and no event: the describe stamped with its own time must still win."""
    one_slot(job(prefix))
    waiting = one_slot(job(f"{prefix}-b"))
    first = one_slot({"action": "describe", "job_name": waiting["job_name"]})
    assert first["queue_reason"] == "waiting for capacity"
    (_, batch_job) = one_slot.batch_jobs()
    batch_job.reason = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - over its share"
    time.sleep(0.002)  # a later observation
    again = one_slot({"action": "describe", "job_name": waiting["job_name"]})
    assert again["queue_reason"] == "over quota"
    item = record(one_slot, waiting["job_name"])
    assert item["batch_status_reason"] == batch_job.reason
    assert item["queue_reason"] == "over quota"


def test_queue_mode_transitions_the_trigger_writes_publish_fleet_metrics(one_slot, prefix, capsys):
    """Submit writes Queued, describe the start, stop a queued job's end: each prints its EMF
    line once, so the queued and running levels add up (none goes below 0)."""
    running = one_slot(job(prefix))["job_name"]
    waiting = one_slot(job(f"{prefix}-b"))["job_name"]
    queued = emf_records(capsys.readouterr().out)
    for name in (running, waiting):
        assert emf_totals(queued, name) == {"JobsQueued": 1, "InstancesQueuedChange": 1}
    one_slot({"action": "describe", "job_name": running})
    one_slot({"action": "describe", "job_name": running})
    started = emf_totals(emf_records(capsys.readouterr().out), running)
    assert started.pop("QueueWaitSeconds") >= 0
    assert started == {"InstancesQueuedChange": -1, "JobsStarted": 1, "InstancesRunningChange": 1}
    one_slot({"action": "stop", "job_name": waiting})
    stopped = emf_totals(emf_records(capsys.readouterr().out), waiting)
    assert stopped.pop("QueueWaitSeconds") >= 0
    assert stopped == {"InstancesQueuedChange": -1, "JobsStopped": 1}


def test_describe_follows_the_job_from_the_queue_to_sagemaker(one_slot, prefix):
    running = one_slot(job(prefix))
    waiting = one_slot(job(f"{prefix}-b"))
    assert running["status"] == waiting["status"] == "Queued"  # the launcher's own answer
    seen = one_slot({"action": "describe", "job_name": running["job_name"]})
    name = seen["training_job_name"]
    assert name.startswith("AWSBatch" + running["job_name"][:23])
    assert seen["status"] == "InProgress"  # SageMaker's status, once it has the job
    assert seen["job_arn"].endswith(f":training-job/{name}")
    assert seen["console_url"].endswith(name)
    assert seen["queued_seconds"] >= 0 and "queue_reason" not in seen
    assert "queue_position" not in seen
    item = record(one_slot, running["job_name"])
    assert item["status"] == "InProgress" and item["training_job_name"] == name
    assert item["status_source"] == "sagemaker"

    one_slot.standin.finish_training_job(name, "Completed")
    done = one_slot({"action": "describe", "job_name": running["job_name"]})
    assert done["status"] == "Completed"
    started = one_slot({"action": "describe", "job_name": waiting["job_name"]})
    assert started["status"] == "InProgress" and started["training_job_name"] != name


# --------------------------------------------------------------------------------- stop
def test_stop_a_queued_job_terminates_it_and_starts_nothing(
    batch_sandbox, monkeypatch, tmp_path, prefix
):
    launcher = queue_launcher(
        batch_sandbox, monkeypatch, tmp_path, capacity=1, env=teams_env({"max_instances": 4})
    )
    running = launcher(job(prefix), alias="team-alpha")
    waiting = launcher(job(f"{prefix}-b"), alias="team-alpha")
    usage = launcher({"action": "whoami"}, alias="team-alpha")["usage"]
    assert usage["instances"] == 2
    calls = []
    launcher.module.RUNTIME.batch.meta.events.register(
        "provide-client-params.batch.TerminateServiceJob", lambda **kw: calls.append(kw["params"])
    )
    stopped = launcher({"action": "stop", "job_name": waiting["job_name"]}, alias="team-alpha")
    assert stopped["status"] == "Stopped" and stopped["queued_seconds"] >= 0
    assert "queue_reason" not in stopped
    assert calls[0]["jobId"] == waiting["batch_job_id"]
    assert calls[0]["reason"].startswith(STOP_REASON)
    again = launcher({"action": "stop", "job_name": waiting["job_name"]}, alias="team-alpha")
    assert again["status"] == "Stopped" and len(calls) == 1  # idempotent: nothing sent
    assert launcher({"action": "whoami"}, alias="team-alpha")["usage"]["instances"] == 1
    item = record(launcher, waiting["job_name"])
    assert item["status"] == "Stopped" and item["usage_released"] is True
    # Capacity frees: the stopped job never starts.
    name = launcher({"action": "describe", "job_name": running["job_name"]}, alias="team-alpha")[
        "training_job_name"
    ]
    launcher.standin.finish_training_job(name, "Completed")
    gone = [j for j in launcher.batch_jobs() if j.job_id == waiting["batch_job_id"]]
    assert gone[0].status == "FAILED" and gone[0].training_arn is None
    assert (
        launcher({"action": "describe", "job_name": waiting["job_name"]}, alias="team-alpha")[
            "status"
        ]
        == "Stopped"
    )


def test_stop_a_started_job_terminates_it_and_reports_stopping(one_slot, prefix):
    running = one_slot(job(prefix))
    calls = []
    one_slot.module.RUNTIME.batch.meta.events.register(
        "provide-client-params.batch.TerminateServiceJob", lambda **kw: calls.append(kw["params"])
    )
    stopping = one_slot({"action": "stop", "job_name": running["job_name"]})
    assert stopping["status"] == "Stopping" and len(calls) == 1
    assert one_slot({"action": "stop", "job_name": running["job_name"]})["status"] in (
        "Stopping",
        "Stopped",
    )
    # Batch stopped the training job; SageMaker's word ends it.
    final = one_slot({"action": "describe", "job_name": running["job_name"]})
    assert final["status"] == "Stopped" and len(calls) == 1


# --------------------------------------------------------------------------------- list
def test_list_queued_jobs_with_positions_from_one_snapshot(one_slot, prefix):
    running = one_slot(job(prefix))
    names = [one_slot(job(f"{prefix}-{i}"))["job_name"] for i in range(3)]
    snapshots = []
    one_slot.module.RUNTIME.batch.meta.events.register(
        "before-call.batch.GetJobQueueSnapshot", lambda **kw: snapshots.append(1)
    )
    one_slot({"action": "describe", "job_name": running["job_name"]})  # now InProgress
    snapshots.clear()
    listed = one_slot({"action": "list", "status": "Queued"})["jobs"]
    assert [j["job_name"] for j in listed] == names[::-1]  # newest first
    assert len(snapshots) == 1
    by_position = sorted(listed, key=lambda j: j["queue_position"])
    assert [j["job_name"] for j in by_position] == names
    for entry in listed:
        assert {"queue_reason", "queued_at", "queued_seconds", "queue_position"} <= set(entry)
        assert entry["status"] == "Queued" and entry["priority"] == 50
    assert by_position[2]["queue_reason"] == "behind 2 jobs"
    snapshots.clear()
    others = one_slot({"action": "list", "status": "InProgress"})["jobs"]
    assert [j["job_name"] for j in others] == [running["job_name"]] and snapshots == []
    assert one_slot({"action": "list", "status": "Scheduled"})["jobs"] == []


# ------------------------------------------------------------------ direct mode, set-up
def test_direct_capacity_error_says_how_to_queue(launcher, prefix):
    with Stubber(launcher.module.RUNTIME.sagemaker) as stub:
        stub.add_client_error("create_training_job", "ResourceLimitExceeded", "no p4d", 400)
        resp = launcher(http_event("POST", "/jobs", job(prefix)))
    assert resp["statusCode"] == 503
    err = json.loads(resp["body"])["error"]
    assert err["type"] == "CapacityError" and "no p4d" in err["message"]
    assert "deploy with ftl:scheduler=queue to queue jobs until capacity frees" in err["message"]


def test_runtime_reads_the_scheduler(tmp_path):
    from ftl_trigger.trigger_runtime import BATCH_CONFIG, Runtime
    from jobmodel.capacity.scheduler import SchedulerConfig
    from tests.lambda_support import trigger_env

    base = trigger_env("http://localhost:9", tmp_path)
    direct = Runtime.from_environment(base)
    assert direct.scheduler == SchedulerConfig() and direct.batch is None
    arn = "arn:aws:batch:us-east-1:123456789012:job-queue/ftl-training"
    env = base | SchedulerConfig(scheduler="queue", job_queue_arn=arn).to_env()
    queue = Runtime.from_environment(env)
    assert queue.scheduler.job_queue_arn == arn
    assert queue.batch.meta.service_model.service_name == "batch"
    assert queue.batch.meta.config.retries == BATCH_CONFIG.retries
    with pytest.raises(ValueError, match="FTL_JOB_QUEUE"):
        Runtime.from_environment(base | {"FTL_SCHEDULER": "queue"})
    with pytest.raises(ValueError, match="FTL_SCHEDULER"):
        Runtime.from_environment(base | {"FTL_SCHEDULER": "fifo"})


# ------------------------------------------------------------------------ ledger writes
def test_describe_writes_back_only_over_the_state_it_read(queued, prefix, monkeypatch):
    """Another writer (the job-events function) moves the job on between describe's read and
    its write: the conditional write fails, describe reads again and merges again, and the
    newer state stays."""
    name = queued(job(prefix))["job_name"]
    stale = queued.module.LAUNCHER.ledger.get_job(name)
    queued.dynamodb.update_item(
        TableName=queued.table,
        Key={"pk": {"S": f"job#{name}"}},
        UpdateExpression="SET #s = :s, status_source = :b, status_observed_ms = :t",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={
            ":s": {"S": "Scheduled"},
            ":b": {"S": "batch"},
            ":t": {"N": "99999999999999"},
        },
    )
    ledger = queued.module.LAUNCHER.ledger
    reads = []
    real_get = ledger.get_job

    def first_read_is_stale(job_name):
        reads.append(job_name)
        return dict(stale) if len(reads) == 1 else real_get(job_name)

    monkeypatch.setattr(ledger, "get_job", first_read_is_stale)
    seen = queued({"action": "describe", "job_name": name})
    assert len(reads) == 2  # read, write refused, read again
    assert seen["status"] == "Scheduled" and "queue_reason" not in seen
    item = record(queued, name)
    assert item["status"] == "Scheduled" and item["batch_status"] == "RUNNABLE"


def test_ledger_write_job_conditions_removals_and_one_release(queued, prefix):
    from ftl_ledger.ledger import Ledger
    from jobmodel.money import limits as quotas

    resp = queued(job(prefix))
    ledger = Ledger(queued.dynamodb, queued.table)
    name = resp["job_name"]
    assert not ledger.write_job(name, {"updated_at": "x"}, expect={"status": "Scheduled"})
    assert not ledger.write_job(name, {"updated_at": "x"}, expect={"status": None})
    assert ledger.write_job(
        name, {"queue_reason": None, "updated_at": "y"}, expect={"status": "Queued", "nope": None}
    )
    item = ledger.get_job(name)
    assert "queue_reason" not in item and item["updated_at"] == "y"
    month = quotas.month_of(queued.module.RUNTIME.now())
    assert ledger.put_if_absent(quotas.usage_item(queued.table, "alpha", month))
    release = quotas.release_update(queued.table, "alpha", month, count=1, estimate=1.0, cost=None)
    read = {"revision": ledger.get_job(name)["revision"]}
    stopped = {"status": "Stopped", "usage_released": True}
    assert ledger.write_job(name, stopped, expect=read, usage=release)
    assert not ledger.write_job(name, stopped, expect=read, usage=release)  # stale read
    assert ledger.get_job(name)["usage_released"] is True
    assert ledger.get_usage("alpha")["instances"] == -1  # given back once


def test_the_backend_is_chosen_once_from_the_scheduler(launcher, queued):
    """Starting a claimed job is one interface (ftl_trigger.backends) with one module per
    way of getting capacity, picked from FTL_SCHEDULER when the container starts."""
    from ftl_trigger.backends import BACKENDS
    from jobmodel.capacity.scheduler import SCHEDULERS

    assert set(BACKENDS) == set(SCHEDULERS)
    assert launcher.module.LAUNCHER.backend.name == "direct"
    assert queued.module.LAUNCHER.backend.name == "queue"
