"""Issue 10's scenario end to end: a fair-share queue of 4 instances shared by three teams.

One deploy of the platform with ``ftl:scheduler=queue`` and teams (``alpha``, ``beta``,
``gamma``, equal weights, and an admin) into the session's sandbox. Jobs go in through the
deployed trigger (each team's alias; the HTTP door and ``ftl`` for the views), the Batch
stand-in (``sandbox/batch.py``) schedules them, and the event pump delivers its Batch and
SageMaker events to the deployed job-events function, which writes the ledger.

The stand-in runs on a :class:`sandbox.clock.SimClock` that follows wall time, so the
head-of-queue time limit (10 minutes, the least the platform accepts) is reached by moving
the clock, not by waiting. Every job here is 2 instances of ``albert-mlm-pretrain`` unless it
says: a template without an evaluation policy, so no Completed job queues an evaluation job
(issue 36) between the teams' own (tests/unit/trigger/test_evaluation_start.py and the queue
authorization test cover that).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sandbox.clock import SimClock, use_clock
from sandbox.deploy import ACCOUNT, REGION
from sandbox.http_api import LocalHttpApi
from sandbox.queue_mode import deploy_queue
from tests.lambda_support import emf_records, emf_totals
from tests.sandbox.test_client_cli import FTL, ROOT

PLATFORM = "ftlqscen"
TEAM_NAMES = ("alpha", "beta", "gamma")
OPS_ROLE = f"arn:aws:iam::{ACCOUNT}:role/queue-ops"
TEAMS = [
    {"name": name, "principals": [f"arn:aws:iam::{ACCOUNT}:role/{name}-scientists"]}
    for name in TEAM_NAMES
]
HEAD_LIMIT_S = 600
CONTEXT = {
    "ftl:platformName": PLATFORM,
    "ftl:teams": json.dumps(TEAMS),
    "ftl:admins": json.dumps([OPS_ROLE]),
    "ftl:queueCapacityInstances": "4",
    "ftl:queueHeadTimeoutMinutes": str(HEAD_LIMIT_S // 60),
}
QUEUE_NAME = f"{PLATFORM}-training"
# HTTP callers: access key -> the IAM ARN API Gateway's authoriser reports.
CALLERS = {
    f"{name}key": f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}-scientists/someone"
    for name in TEAM_NAMES
} | {"opskey": f"arn:aws:sts::{ACCOUNT}:assumed-role/queue-ops/carol"}
STARTED = ("Scheduled", "InProgress")
pytestmark = pytest.mark.sandbox


class Scenario:
    """The deploy's doors, the stand-in and its clock, and read-backs from moto."""

    def __init__(self, deployed: Any, queue: Any, api: LocalHttpApi, clock: SimClock) -> None:
        self.deployed, self.queue, self.api, self.clock = deployed, queue, api, clock
        self.standin = deployed.sandbox.batch
        self.outputs = {k: v for o in queue.outputs.values() for k, v in o.items()}
        self.lam = deployed.client("lambda")
        self.sm = deployed.client("sagemaker")
        self.ddb = deployed.client("dynamodb")
        self.table = self.outputs["JobTableName"]
        topic = self.outputs["JobEventsTopicArn"]
        (self.events_function,) = [
            f["FunctionArn"]
            for page in self.lam.get_paginator("list_functions").paginate()
            for f in page["Functions"]
            if (f.get("Environment") or {}).get("Variables", {}).get("FTL_TOPIC_ARN") == topic
            and "FTL_SOURCE_S3_URI" not in f["Environment"]["Variables"]  # not the trigger
        ]

    # ------------------------------------------------------------ direct door
    def invoke(self, target: str, event: dict[str, Any]) -> dict[str, Any]:
        reply = self.lam.invoke(FunctionName=target, Payload=json.dumps(event).encode())
        body = json.loads(reply["Payload"].read())
        assert "FunctionError" not in reply, body
        return body

    def team(self, name: str, event: dict[str, Any]) -> dict[str, Any]:
        return self.invoke(self.outputs[f"Team{name.capitalize()}InvokeArn"], event)

    def admin(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.invoke(self.outputs["AdminInvokeArn"], event)

    def submit(self, team: str, prefix: str, **fields: Any) -> dict[str, Any]:
        request = {"template": "albert-mlm-pretrain", "job_name": prefix, "instance_count": 2}
        job = self.team(team, {**request, **fields})
        assert "error" not in job, job
        return job

    def describe(self, job: dict[str, Any]) -> dict[str, Any]:
        found = self.team(job["team"], {"action": "describe", "job_name": job["job_name"]})
        assert "error" not in found, found
        return found

    def usage(self, team: str) -> int:
        return self.team(team, {"action": "whoami"})["usage"]["instances"]

    # -------------------------------------------------------------- HTTP door
    def http(self, key: str, method: str, path: str) -> tuple[int, Any]:
        url = self.api.url.rstrip("/") + path
        request = AWSRequest(method=method, url=url)
        SigV4Auth(Credentials(key, key), "execute-api", REGION).add_auth(request)
        sent = urllib.request.Request(url, headers=dict(request.headers), method=method)
        try:
            with urllib.request.urlopen(sent, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    # --------------------------------------------------------------- Batch
    def pump(self) -> list[Any]:
        """Deliver what the stand-in recorded. Every event reaches this deploy's job-events
        function only, and every one is about a job its ledger holds (none dropped)."""
        delivered = self.queue.pump.drain()
        assert {d.target for d in delivered} <= {self.events_function}
        lost = [
            (d.event["detail-type"], d.response)
            for d in delivered
            if d.error or "status" not in d.response
        ]
        assert not lost, lost
        return delivered

    def batch_job(self, job: dict[str, Any]) -> Any:
        return self.standin.jobs[job["batch_job_id"]]

    def batch_job_named(self, name: str) -> Any:
        (job,) = [j for j in self.standin.jobs.values() if j.name == name]
        return job

    def finish(self, job: dict[str, Any], status: str = "Completed") -> None:
        """The job's training job ends as SageMaker would report it; events delivered."""
        arn = self.batch_job(job).training_arn
        assert arn, f"{job['job_name']} has no training job"
        self.standin.finish_training_job(arn.rsplit("/", 1)[1], status)
        self.pump()

    def scheduled_order(self, since: int = 0) -> list[str]:
        """Job names in the order the stand-in started them (its SCHEDULED events)."""
        return [
            e["detail"]["jobName"]
            for e in self.standin.events[since:]
            if e["detail"]["status"] == "SCHEDULED" and e["detail"]["jobQueue"].endswith(QUEUE_NAME)
        ]

    def ledger_jobs(self) -> list[dict[str, Any]]:
        items, start = [], {}
        while True:
            page = self.ddb.scan(TableName=self.table, ConsistentRead=True, **start)
            items += [i for i in page["Items"] if i["pk"]["S"].startswith("job#")]
            if "LastEvaluatedKey" not in page:
                return items
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}


@pytest.fixture(scope="module")
def scenario(deployed):
    saved = dict(os.environ)
    clock = SimClock(frozen=False)
    started = time.perf_counter()
    with use_clock(deployed.sandbox.batch, clock):
        queue = deploy_queue(deployed.sandbox, context=CONTEXT)
        print(f"\nqueue scenario deploy: {time.perf_counter() - started:.1f}s")
        api = LocalHttpApi(
            deployed.endpoint,
            queue.output("TriggerFunctionName"),
            credentials={key: key for key in CALLERS},
            identities=CALLERS,
        )
        with api:
            yield Scenario(deployed, queue, api, clock)
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def fair(scenario):
    """Each team submits two 2-instance jobs, team by team: alpha's two fill the capacity."""
    return {
        f"{team}-{i}": scenario.submit(team, f"fair{i}", client_token=f"fair-{team}-{i}")
        for team in TEAM_NAMES
        for i in (1, 2)
    }


# --------------------------------------------------------------------------------- tests
def test_the_queue_has_the_capacity_head_limit_and_equal_team_shares(scenario):
    q = scenario.standin.queues[QUEUE_NAME]
    assert scenario.outputs["JobQueueArn"] == q.arn
    assert (q.capacity, q.head_timeout_s, q.share_policy) == (4, HEAD_LIMIT_S, "fairshare")
    assert q.weight_factors == dict.fromkeys(TEAM_NAMES, 1.0)


def test_the_first_two_jobs_run_and_the_rest_wait_queued_in_fair_share_order(scenario, fair):
    for key, job in fair.items():
        # The submit's answer: queued, not yet a training job (docs/API.md, Queue mode).
        assert job["status"] == "Queued" and job["job_arn"] is None, job
        assert job["team"] == key.split("-")[0] and job["batch_job_id"] and job["queued_at"]
        assert scenario.batch_job(job).share == job["team"]
    scenario.pump()
    seen = {key: scenario.describe(job) for key, job in fair.items()}
    for key in ("alpha-1", "alpha-2"):
        assert seen[key]["status"] in STARTED, seen[key]
        assert seen[key]["training_job_name"].startswith("AWSBatchalpha-fair")
        assert "queue_reason" not in seen[key] and "queue_position" not in seen[key]
    # alpha holds all 4 instances: beta and gamma alternate (lowest share usage first; ties
    # go to the share whose next job is older), not first come first served.
    waiting = {key: seen[key] for key in ("beta-1", "gamma-1", "beta-2", "gamma-2")}
    assert {k: (v["status"], v["queue_position"]) for k, v in waiting.items()} == {
        "beta-1": ("Queued", 1),
        "gamma-1": ("Queued", 2),
        "beta-2": ("Queued", 3),
        "gamma-2": ("Queued", 4),
    }
    assert [v["queue_reason"] for v in waiting.values()] == [
        "waiting for capacity",
        "behind 1 job",
        "behind 2 jobs",
        "behind 3 jobs",
    ]
    assert all(v["queued_seconds"] >= 0 and "training_job_name" not in v for v in waiting.values())
    # Queued jobs count toward the team's use from submit on.
    assert {team: scenario.usage(team) for team in TEAM_NAMES} == dict.fromkeys(TEAM_NAMES, 4)


def test_ftl_queue_shows_position_team_share_instances_wait_and_reason(scenario, fair):
    env = {k: v for k, v in scenario.deployed.env.items() if not k.startswith("FTL_")}

    def ftl(*args: str, function: str) -> str:
        proc = subprocess.run(
            [*FTL, "--function", function, *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    table = ftl("queue", function=scenario.outputs["AdminInvokeArn"]).splitlines()
    headers = [
        "POS", "JOB", "TEAM", "SHARE", "INSTANCES", "WAITED", "REASON", "STARTS", "SOONER WITH"
    ]  # fmt: skip
    assert table[0].split("  ")[0] == "POS" and [h for h in headers if h in table[0]] == headers
    # Columns by the header's positions (REASON and STARTS hold spaces).
    starts = [table[0].index(h) for h in headers] + [None]
    rows = [
        [line[a:b].strip() for a, b in zip(starts, starts[1:], strict=False)] for line in table[1:]
    ]
    order = ("beta-1", "gamma-1", "beta-2", "gamma-2")
    assert [r[1] for r in rows] == [fair[k]["job_name"] for k in order]
    # SHARE: the team's fair-share identifier (jobmodel.capacity.scheduler.share_of; these
    # names hold no '-', so it is the team's name)
    assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
        (str(i), k.split("-")[0], k.split("-")[0], "2 x ml.p4d.24xlarge")
        for i, k in enumerate(order, 1)
    ]
    reasons = [r[6] for r in rows]
    assert reasons == ["waiting for capacity", "behind 1 job", "behind 2 jobs", "behind 3 jobs"]
    assert all(r[7].startswith(("starts by ~", "start unknown")) for r in rows), rows
    as_json = json.loads(ftl("--json", "queue", function=scenario.outputs["AdminInvokeArn"]))
    assert [j["queue_position"] for j in as_json["jobs"]] == [1, 2, 3, 4]
    assert all(j["queued_seconds"] >= 0 for j in as_json["jobs"])
    # A team sees only its own waiting jobs, with their place in the whole queue.
    mine = ftl("--json", "queue", function=scenario.outputs["TeamGammaInvokeArn"])
    assert [(j["job_name"], j["queue_position"]) for j in json.loads(mine)["jobs"]] == [
        (fair["gamma-1"]["job_name"], 2),
        (fair["gamma-2"]["job_name"], 4),
    ]


def test_the_http_door_describes_the_same_queue_fields(scenario, fair):
    fields = ("status", "queue_reason", "queue_position", "batch_job_id", "priority", "queued_at")
    for key in ("beta-1", "gamma-2", "alpha-1"):
        job = fair[key]
        direct = scenario.describe(job)
        status, body = scenario.http(f"{job['team']}key", "GET", f"/jobs/{job['job_name']}")
        assert status == 200, body
        assert {f: body.get(f) for f in fields} == {f: direct.get(f) for f in fields}
        assert body["requested_by"] == f"team-{job['team']} alias"  # submitted by the alias
    status, body = scenario.http("opskey", "GET", "/jobs?status=Queued&limit=100")
    assert status == 200
    listed = {j["job_name"]: j["queue_position"] for j in body["jobs"]}
    assert listed == {fair[k]["job_name"]: p for p, k in enumerate(("beta-1", "gamma-1"), 1)} | {
        fair["beta-2"]["job_name"]: 3,
        fair["gamma-2"]["job_name"]: 4,
    }


def test_queued_jobs_start_in_fair_share_order_and_each_completes_once(scenario, fair, capsys):
    capsys.readouterr()
    mark = len(scenario.standin.events)
    # Finish the running jobs oldest first; each end frees 2 instances for the next job.
    for running, starts in (
        ("alpha-1", "beta-1"),
        ("alpha-2", "gamma-1"),  # beta holds 2, gamma 0
        ("beta-1", "beta-2"),  # beta 0, gamma 2
        ("gamma-1", "gamma-2"),
        ("beta-2", None),
        ("gamma-2", None),
    ):
        scenario.finish(fair[running])
        assert scenario.describe(fair[running])["status"] == "Completed"
        if starts:
            started = scenario.describe(fair[starts])
            assert started["status"] in STARTED and started["training_job_name"], started
            assert started["queued_seconds"] >= 0 and "queue_reason" not in started
    order = [fair[k]["job_name"] for k in ("beta-1", "gamma-1", "beta-2", "gamma-2")]
    assert scenario.scheduled_order(mark) == order
    # First come first served would have run beta's two before gamma's.
    first_come = sorted(order, key=lambda name: scenario.batch_job_named(name).created)
    assert first_come == [fair[k]["job_name"] for k in ("beta-1", "beta-2", "gamma-1", "gamma-2")]

    names = {job["job_name"] for job in fair.values()}
    listed = scenario.admin({"action": "list", "limit": 100})["jobs"]
    assert sorted(j["job_name"] for j in listed if j["job_name"] in names) == sorted(names)
    assert {j["status"] for j in listed if j["job_name"] in names} == {"Completed"}
    # One ledger item, one Batch job, one training job and one SUCCEEDED per job.
    items = [i for i in scenario.ledger_jobs() if i["job_name"]["S"] in names]
    assert len(items) == 6 and {i["status"]["S"] for i in items} == {"Completed"}
    batch = [j for j in scenario.standin.jobs.values() if j.name in names]
    assert len(batch) == 6 and all(len(j.attempts) == 1 for j in batch)
    training = {i["training_job_name"]["S"] for i in items}
    assert training == {j.training_arn.rsplit("/", 1)[1] for j in batch}
    for name in training:
        described = scenario.sm.describe_training_job(TrainingJobName=name)
        assert described["TrainingJobStatus"] == "Completed"
    ended = [
        e["detail"]["jobName"]
        for e in scenario.standin.events
        if e["detail"]["status"] == "SUCCEEDED" and e["detail"]["jobName"] in names
    ]
    assert sorted(ended) == sorted(names)
    assert {team: scenario.usage(team) for team in TEAM_NAMES} == dict.fromkeys(TEAM_NAMES, 0)
    # The fleet metrics both functions printed (EMF; the sandbox runs them in this process):
    # each transition once, whichever wrote it, so the queued and running levels return to 0.
    records = emf_records(capsys.readouterr().out)
    spend = ("SpendUsd", "SpotSavingsUsd", "MonthSpendUsd")
    for key, job in fair.items():
        totals = {k: v for k, v in emf_totals(records, job["job_name"]).items() if k not in spend}
        if key.startswith("alpha"):  # started before this test
            assert totals == {"InstancesRunningChange": -2, "JobsCompleted": 1}, key
            continue
        assert totals.pop("QueueWaitSeconds", None) is not None, key
        assert totals == {
            "InstancesQueuedChange": -2,
            "JobsStarted": 1,
            "InstancesRunningChange": 0,
            "JobsCompleted": 1,
        }, key


def test_stopping_a_queued_job_starts_nothing_and_gives_the_team_usage_back(scenario):
    running = [scenario.submit("alpha", f"fill{i}") for i in (1, 2)]
    waiting = scenario.submit("gamma", "stopme", client_token="stop-me-1")
    scenario.pump()
    assert scenario.describe(waiting)["status"] == "Queued"
    assert scenario.usage("gamma") == 2
    mark = len(scenario.standin.events)

    stopped = scenario.team("gamma", {"action": "stop", "job_name": waiting["job_name"]})
    assert stopped["status"] == "Stopped" and "queue_reason" not in stopped, stopped
    assert scenario.usage("gamma") == 0  # given back at once, not when the event comes
    batch = scenario.batch_job(waiting)
    assert batch.status == "FAILED" and batch.reason == "ftl stop: requested by team-gamma alias"
    assert batch.training_arn is None and batch.attempts == []
    scenario.pump()  # Batch's FAILED event: still Stopped, usage not given back twice
    again = scenario.team("gamma", {"action": "stop", "job_name": waiting["job_name"]})
    assert again["status"] == "Stopped" and scenario.usage("gamma") == 0
    for job in running:
        scenario.finish(job)
    # Capacity freed twice and nothing started: the stopped job is gone from the queue.
    assert scenario.scheduled_order(mark) == []
    assert scenario.describe(waiting)["status"] == "Stopped"
    assert scenario.sm.list_training_jobs(NameContains="stopme")["TrainingJobSummaries"] == []


def test_twenty_concurrent_duplicate_submits_queue_one_job(scenario):
    request = {"template": "albert-mlm-pretrain", "job_name": "dup", "instance_count": 2}
    request["client_token"] = "dup-token-1"
    arn = scenario.outputs["TeamBetaInvokeArn"]

    def submit(_: int) -> dict[str, Any]:
        # One client per thread, as 20 separate callers would have.
        lam = scenario.deployed.client("lambda")
        reply = lam.invoke(FunctionName=arn, Payload=json.dumps(request).encode())
        return json.loads(reply["Payload"].read())

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(submit, range(20)))
    assert not [a for a in answers if "error" in a], answers
    (name,) = {a["job_name"] for a in answers}
    assert {a["batch_job_id"] for a in answers} == {answers[0]["batch_job_id"]}
    assert [j.job_id for j in scenario.standin.jobs.values() if j.name == name] == [
        answers[0]["batch_job_id"]
    ]
    assert [i["pk"]["S"] for i in scenario.ledger_jobs() if "-dup-" in i["pk"]["S"]] == [
        f"job#{name}"
    ]
    assert scenario.usage("beta") == 2  # claimed once
    scenario.pump()
    scenario.finish(answers[0])
    assert scenario.describe(answers[0])["status"] == "Completed"
    assert scenario.usage("beta") == 0


def test_a_job_bigger_than_the_queue_is_refused_at_submit_and_dry_run(scenario):
    """6 instances in a queue of 4 could never start: the deployed trigger refuses it."""
    for dry_run in (False, True):
        request = {"template": "bert-large-qa", "job_name": "huge", "instance_count": 6}
        answer = scenario.team("gamma", {**request, "dry_run": dry_run})
        assert answer["error"]["field"] == "instance_count", answer
        assert "the job queue's capacity of 4 instances" in answer["error"]["message"]
    assert not [j for j in scenario.standin.jobs.values() if j.name.startswith("gamma-huge")]


@pytest.fixture
def lowered_capacity(scenario):
    """The stand-in's queue holds 3 instances while the trigger still knows 4."""
    queue = scenario.standin.queues[QUEUE_NAME]
    queue.capacity = 3
    yield queue
    queue.capacity = 4


def test_a_job_stuck_at_the_head_past_the_time_limit_is_recorded_failed_to_start(
    scenario, lowered_capacity
):
    """The queue's capacity lowered under a job the trigger accepted (a redeploy; the trigger
    refuses a job bigger than the capacity it knows): Batch's MISCONFIGURATION reason, and
    after the queue's limit the job is terminated; the ledger hears it from Batch's event
    alone."""
    big = scenario.submit("gamma", "huge", instance_count=4, client_token="huge-1")
    behind = scenario.submit("alpha", "behind")
    scenario.pump()
    waiting = scenario.describe(big)
    assert waiting["status"] == "Queued" and waiting["queue_position"] == 1
    assert waiting["queue_reason"] == "larger than the queue's capacity"
    assert scenario.describe(behind)["queue_reason"] == "behind 1 job"  # no backfill
    assert scenario.usage("gamma") == 4

    scenario.clock.advance(HEAD_LIMIT_S - 60)
    scenario.standin.tick()
    assert scenario.batch_job(big).status == "RUNNABLE"  # not yet
    scenario.clock.advance(61)
    scenario.standin.tick()
    reason = (
        "Terminated by JobStateTimeLimit action due to reason: "
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
    )
    assert (scenario.batch_job(big).status, scenario.batch_job(big).reason) == ("FAILED", reason)
    delivered = scenario.pump()
    assert {(d.event["detail"].get("jobName"), d.response["status"]) for d in delivered} >= {
        (big["job_name"], "FailedToStart")
    }
    (item,) = [i for i in scenario.ledger_jobs() if i["job_name"]["S"] == big["job_name"]]
    assert item["status"]["S"] == "FailedToStart" and item["failure_reason"]["S"] == reason
    assert item["status_source"]["S"] == "batch"  # the event wrote it, not a describe
    ended = scenario.describe(big)
    assert (ended["status"], ended["failure_reason"]) == ("FailedToStart", reason)
    assert "queue_reason" not in ended and ended["queued_seconds"] >= HEAD_LIMIT_S
    assert scenario.usage("gamma") == 0
    # The job behind it moves up and starts.
    assert scenario.describe(behind)["status"] in STARTED
    scenario.finish(behind)


def test_the_books_balance_nothing_lost_or_doubled(scenario):
    """The sum of the module's tests (run after them): every ledger job of this deploy has
    ended and has one Batch job; a training job exists for each job that ran (Completed),
    none for a stopped or a terminated one."""
    items = {i["job_name"]["S"]: i for i in scenario.ledger_jobs()}
    listed = scenario.admin({"action": "list", "limit": 100})["jobs"]
    assert sorted(j["job_name"] for j in listed) == sorted(items)
    statuses = {name: i["status"]["S"] for name, i in items.items()}
    # After the whole module: the 6 fair-share jobs, 2 fillers, the duplicate and the one
    # behind the huge job ran; one job was stopped, one terminated at the head.
    assert Counter(statuses.values()) == {"Completed": 10, "Stopped": 1, "FailedToStart": 1}
    batch = {j.name: j for j in scenario.standin.jobs.values() if j.queue.name == QUEUE_NAME}
    assert sorted(batch) == sorted(items)
    started = {n for n, s in statuses.items() if s == "Completed"}
    assert {n for n, j in batch.items() if j.training_arn} == started
    sagemaker = [
        j["TrainingJobName"]
        for page in scenario.sm.get_paginator("list_training_jobs").paginate()
        for j in page["TrainingJobSummaries"]
        if j["TrainingJobName"].startswith(tuple(f"AWSBatch{t}-" for t in TEAM_NAMES))
    ]
    assert sorted(sagemaker) == sorted(batch[n].training_arn.rsplit("/", 1)[1] for n in started)
    assert {team: scenario.usage(team) for team in TEAM_NAMES} == dict.fromkeys(TEAM_NAMES, 0)
