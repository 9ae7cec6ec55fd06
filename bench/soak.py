"""Soak under faults: the deployed platform in the moto sandbox, many callers, failing AWS calls,
duplicated and reordered events; then the invariants of issue 30.

    python -m bench.soak [--seconds S] [--faults 0.10] [--seed N] [--scheduler direct|queue|both]

Loopback only: the sandbox (moto and the stand-ins) runs in this process on 127.0.0.1, and
the deployed functions' code runs in-process too (``sandbox.runner.DeployedFunction``).

* **Callers**: ``CALLERS`` threads over three teams submit (each with a client token, retried
  with the same token after an error), describe, list and stop their team's jobs. Every
  answer must be a job, a list or a contract error (``jobmodel.contract.errors``); an internal error
  (a stack trace's stand-in) counts as a failure.
* **Faults**: botocore ``before-send`` hooks on the deployed functions' clients fail
  ``faults`` of their calls, drawn from a seeded generator: throttling (400), 5xx, a timeout
  before sending, and a lost answer (sent, taken effect, no answer).
* **Events**: the job-events function gets every state change (direct mode: made from
  SageMaker's description of each job the platform started; queue mode: the Batch stand-in's
  outbox), each delivered one to three times in shuffled order; a delivery that fails is
  delivered again later, up to EventBridge's 8 retries.
* **Sweeps** (issue 37, ``bench/soak_sweeps.py``): the first caller of each team starts
  hyperparameter sweeps (one tuning job each, through the same door and faults), while the
  run's ``sweeps`` last; the tuner stand-in runs their trials, some billed past their runtime
  so caps are reached; callers describe and stop them. A queue-mode deploy takes them too
  (the tuner runs a sweep's trials whatever the scheduler); a refusal would be counted as
  ``sweep_refusals``, not as a failure.
* **The end**: faults off, the events drained, the functions' clock moved past the claim bound
  (``jobmodel.jobs.claims``) and the recovery run, as the schedule would; every sweep driven to
  its end; the events drained again.

Invariants (``Result.problems``): no job lost (a token's answer names a ledger job), none
duplicated (one ledger job per token, one training job or service job per ledger job), none
orphaned (every training job the platform started is in the ledger), none stuck
(``Submitting``) and none owing end effects, usage exact (each team's instances and
reservations are those of its live jobs), every ended job announced (``dedup_id``
``<job>/announce``; repeats counted, receivers drop them by the id), every Completed job with
an evaluation policy evaluated by exactly one evaluation job whose ended results reached it
(issue 36; an evaluation job is not announced itself), every refusal a contract error; each
team's month spend equal to what its jobs and sweeps were charged; and for sweeps
(``soak_sweeps.Sweeps.check``): every trial the tuner ended charged once at its cost, no
sweep over its cap by more than the trials running when the cap was reached, exactly one
registered model version per Completed sweep, no tuning job outside the ledger.
``make soak`` runs both schedulers at 10% and 25% faults;
``tests/sandbox/test_soak.py`` runs a short seeded one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import urllib3
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from bench.soak_sweeps import Sweeps
from jobmodel.contract.errors import HTTP_STATUS
from jobmodel.contract.statuses import TERMINAL_STATUSES
from jobmodel.jobs import claims as CL
from jobmodel.jobs import effects as E
from sandbox.deploy import ACCOUNT, REGION
from sandbox.runner import DeployedFunction

CALLERS = 36
# Team names of their own: the sandbox's other deploys have nlp, vision, alpha..., and a job's
# name starts with its team's, which is how the checks find the soak's training jobs.
TEAMS = ("red", "green", "blue")
TEMPLATE = "distilbert-spot"
MAX_DELIVERIES = 9  # EventBridge: the first delivery and 8 retries (JobEvents' targets)
PRICES = {REGION: {"ml.g5.xlarge": 1.5, "ml.g5.2xlarge": 2.0}}
SWEEPS = 12  # sweeps per run by default (tests/sandbox/test_soak.py: 3)
FIRST_SWEEPS_S = 5.0  # the other callers start once each team's first sweep was answered


def context(platform: str, scheduler: str) -> dict[str, str]:
    """The soak's deploy: three teams of 4 instances each (queue mode: 6 in the queue, and
    sweeps beside it)."""
    teams = [
        {
            "name": t,
            "principals": [f"arn:aws:iam::{ACCOUNT}:role/{t}-scientists"],
            "limits": {"max_instances": 4},
        }
        for t in TEAMS
    ]
    ctx = {
        "ftl:platformName": platform,
        "ftl:teams": json.dumps(teams),
        "ftl:prices": json.dumps(PRICES),
    }
    if scheduler == "queue":
        # Sweeps run beside the queue only where the platform opts in (issue 37).
        ctx.update(
            {
                "ftl:queueCapacityInstances": "6",
                "ftl:queueHeadTimeoutMinutes": "30",
                "ftl:queueSweeps": "outside-queue",
            }
        )
    return ctx


# ----------------------------------------------------------------------------- faults
_HTTP = urllib3.PoolManager()


def _error(request: Any, status: int, code: str, service: str) -> AWSResponse:
    """An error answer in the service's protocol (SNS: query/XML; the others JSON)."""
    if service == "sns":
        body = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>"
            "<Message>injected by the soak</Message></Error><RequestId>soak</RequestId>"
            "</ErrorResponse>"
        ).encode()
    else:
        body = json.dumps({"__type": code, "message": "injected by the soak"}).encode()

    class Raw:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield body

    headers = {"x-amzn-query-error": f"{code};Sender", "content-type": "application/x-amz-json-1.0"}
    return AWSResponse(request.url, status, headers, Raw())


class Faults:
    """A seeded share of failures on every call of the clients it is installed on."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.on = True
        self.injected: Counter[str] = Counter()
        self.calls = 0
        self._installed: list[tuple[Any, Callable[..., Any]]] = []

    def install(self, client: Any) -> None:
        if client is None:
            return
        client.meta.events.register_first("before-send", self._hook)
        self._installed.append((client, self._hook))

    def uninstall(self) -> None:
        for client, hook in self._installed:
            client.meta.events.unregister("before-send", hook)
        self._installed.clear()

    def _hook(self, request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
        with self.lock:
            self.calls += 1
            if not self.on or self.rng.random() >= self.rate:
                return None
            kind = self.rng.choice(("throttle", "5xx", "timeout", "lost"))
            self.injected[kind] += 1
        service = event_name.split(".")[1] if event_name.count(".") >= 1 else ""
        if kind == "throttle":
            return _error(request, 400, "ThrottlingException", service)
        if kind == "5xx":
            return _error(request, 500, "InternalFailure", service)
        if kind == "lost":  # reaches the service and takes effect; the answer never comes
            _HTTP.request(
                request.method, request.url, body=request.body, headers=dict(request.headers)
            ).close()
        raise ReadTimeoutError(endpoint_url=request.url)


# ----------------------------------------------------------------------------- the run
@dataclass
class Result:
    scheduler: str
    fault_rate: float
    seconds: float
    calls: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    injected: Counter[str] = field(default_factory=Counter)
    jobs: int = 0
    ended: int = 0
    announcements: int = 0  # messages received, repeats included
    repeats: int = 0  # messages whose dedup_id was already received
    deliveries: int = 0
    failed_deliveries: int = 0
    swept: dict[str, int] = field(default_factory=dict)
    lost_announcements: int = 0
    stuck_claims: int = 0
    duplicates: int = 0
    lost_jobs: int = 0
    orphans: int = 0
    # Issue 36: Completed jobs of a template with an evaluation policy, their evaluation jobs,
    # and those missing, duplicated or whose results never reached the evaluated job.
    evaluated: int = 0
    evaluations: int = 0
    lost_evaluations: int = 0
    usage_mismatches: int = 0
    spend_mismatches: int = 0  # a team's month spend against its jobs' and sweeps' charges
    bad_answers: int = 0
    # Issue 37: the sweeps' counts (``soak_sweeps.Sweeps.check``) and refused sweep requests.
    sweeps: dict[str, Any] = field(default_factory=dict)
    sweep_refusals: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "problems"}
        out = {k: dict(v) if isinstance(v, Counter) else v for k, v in out.items()}
        out["problems"] = self.problems[:20]
        return out


class Soak:
    def __init__(
        self,
        endpoint: str,
        outputs: dict[str, str],
        *,
        scheduler: str,
        fault_rate: float,
        seed: int,
        standin: Any = None,
        tuner: Any = None,
        sweeps: int = 0,
    ) -> None:
        self.endpoint = endpoint
        self.outputs = outputs
        self.scheduler = scheduler
        self.standin = standin
        self.rng = random.Random(seed)
        self.faults = Faults(fault_rate, seed + 1)
        self.result = Result(scheduler, fault_rate, 0.0)
        self.trigger = DeployedFunction(endpoint, outputs["TriggerFunctionName"])
        self.events = DeployedFunction(endpoint, self._events_function())
        self.table = outputs["JobTableName"]
        self.tokens: dict[str, set[str]] = {}  # client token -> job names answered
        self.known: dict[str, set[str]] = {t: set() for t in TEAMS}
        self.lock = threading.Lock()
        self.pending: list[tuple[dict[str, Any], int]] = []  # (event, deliveries so far)
        self.seen_states: set[tuple[str, str]] = set()
        self.ended_jobs: set[str] = set()  # direct mode: training jobs whose end was sent
        self.queue_url = self._subscribe()
        self.sweeps = Sweeps(
            tuner,
            budget=sweeps if tuner is not None else 0,
            sweepers=len(TEAMS),
            seed=seed + 2,
            price=PRICES[REGION]["ml.g5.xlarge"],
            call=self._call,
            on_answer=self._answered,
        )

    # ------------------------------------------------------------------ set-up
    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def _events_function(self) -> str:
        topic = self.outputs["JobEventsTopicArn"]
        lam = self.client("lambda")
        (name,) = [
            f["FunctionName"]
            for page in lam.get_paginator("list_functions").paginate()
            for f in page["Functions"]
            if (f.get("Environment") or {}).get("Variables", {}).get("FTL_TOPIC_ARN") == topic
            and f["FunctionName"] != self.outputs["TriggerFunctionName"]
        ]
        return name

    def _subscribe(self) -> str:
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=f"soak-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
        self.client("sns").subscribe(
            TopicArn=self.outputs["JobEventsTopicArn"], Protocol="sqs", Endpoint=arn["QueueArn"]
        )
        return url

    def _install_faults(self) -> None:
        trig, ev = self.trigger.module.RUNTIME, self.events.module.RUNTIME
        for c in (trig.sagemaker, trig.dynamodb, trig.batch, trig.sns):
            self.faults.install(c)
        for c in (ev.recorder.ledger.client, ev.sns, ev.lambda_client):
            self.faults.install(c)

    # ------------------------------------------------------------------- callers
    def _call(self, team: str, event: dict[str, Any], alias: str | None = None) -> dict[str, Any]:
        answer = self.trigger(event, alias or f"team-{team}")
        with self.lock:
            action = "recover" if alias == "sweep" else event.get("action", "submit")
            self.result.calls[action] += 1
            if isinstance(answer, dict) and "error" in answer:
                kind = answer["error"].get("type")
                self.result.errors[str(kind)] += 1
                internal = "internal error" in str(answer["error"].get("message"))
                if kind not in HTTP_STATUS or internal:
                    self.result.bad_answers += 1
                    self.result.problems.append(f"not a contract error: {answer}")
        return answer  # type: ignore[no-any-return]

    def _caller(self, index: int, until: float) -> None:
        rng = random.Random(self.rng.random() + index)
        team = TEAMS[index % len(TEAMS)]
        sweeper = index < len(TEAMS) and self.sweeps.budget > 0  # a team's first caller
        while time.monotonic() < until:
            roll = rng.random()
            if sweeper and self.sweeps.wants_turn(team, rng):
                self.sweeps.turn(team, rng)
            elif roll < 0.35:
                self._submit(team, rng)
            elif roll < 0.4 and self.sweeps.names(team):
                self.sweeps.describe(team, rng.choice(self.sweeps.names(team)))
            elif roll < 0.65 and self.known[team]:
                name = rng.choice(sorted(self.known[team]))
                self._call(team, {"action": "describe", "job_name": name})
            elif roll < 0.8:
                self._call(team, {"action": "list", "limit": 20})
            elif self.known[team]:
                name = rng.choice(sorted(self.known[team]))
                self._call(team, {"action": "stop", "job_name": name})
            self._deliver_some(rng, 3)

    def _submit(self, team: str, rng: random.Random) -> None:
        token = uuid.UUID(int=rng.getrandbits(128)).hex[:16]
        request = {"template": TEMPLATE, "client_token": token, "instance_count": 1}
        for _ in range(3):  # the caller retries with the same token
            answer = self._call(team, dict(request))
            if "job_name" in answer:
                self._answered(team, token, answer["job_name"])
                with self.lock:
                    self.known[team].add(answer["job_name"])
                if answer.get("status") != "FailedToStart":
                    return
            elif answer.get("error", {}).get("type") in ("QuotaExceeded", "ValidationError"):
                return

    def _answered(self, team: str, token: str, name: str) -> None:
        """A submit's or sweep's answer named ``name`` for the team's ``token``."""
        with self.lock:
            self.tokens.setdefault(f"{team}#{token}", set()).add(name)

    # -------------------------------------------------------------------- events
    def _collect_events(self) -> None:
        """New state changes, each queued one to three times (duplicates)."""
        fresh: list[dict[str, Any]] = []
        if self.scheduler == "queue":
            self.standin.tick()
            for job in list(self.standin.jobs.values()):
                if job.training_arn and job.status in ("SCHEDULED", "RUNNING"):
                    if self.rng.random() < 0.3:
                        name = job.training_arn.rsplit("/", 1)[-1]
                        with contextlib.suppress(Exception):
                            self.standin.finish_training_job(name, "Completed")
            with self.lock:
                outbox, self.standin.outbox[:] = list(self.standin.outbox), []
            fresh = outbox
        else:
            fresh = self._sagemaker_events()
        with self.lock:
            for event in fresh:
                for _ in range(self.rng.randint(1, 3)):
                    self.pending.append((event, 0))
            self.rng.shuffle(self.pending)

    def _sagemaker_events(self) -> list[dict[str, Any]]:
        """Direct mode: moto sends no events; one per new (job, status) from its description."""
        sm = self.client("sagemaker")
        out = []
        names = [
            j["TrainingJobName"]
            for page in sm.get_paginator("list_training_jobs").paginate()
            for j in page["TrainingJobSummaries"]
            if j["TrainingJobName"].split("-")[0] in TEAMS
        ]
        for name in names:
            if name in self.ended_jobs:
                continue
            detail = sm.describe_training_job(TrainingJobName=name)
            if detail["TrainingJobStatus"] in TERMINAL_STATUSES:
                self.ended_jobs.add(name)
            status = detail["TrainingJobStatus"]
            tags = sm.list_tags(ResourceArn=detail["TrainingJobArn"])["Tags"]
            for state in ("InProgress", status):
                if (name, state) in self.seen_states:
                    continue
                self.seen_states.add((name, state))
                d = {**detail, "TrainingJobStatus": state}
                d = {k: v for k, v in d.items() if k != "ResponseMetadata"}
                d["Tags"] = {t["Key"]: t["Value"] for t in tags}
                out.append(
                    {
                        "version": "0",
                        "id": uuid.uuid4().hex,
                        "source": "aws.sagemaker",
                        "detail-type": "SageMaker Training Job State Change",
                        "account": ACCOUNT,
                        "region": REGION,
                        "detail": json.loads(json.dumps(d, default=_epoch_ms)),
                    }
                )
        return out

    def _deliver_some(self, rng: random.Random, count: int) -> None:
        for _ in range(count):
            with self.lock:
                if not self.pending:
                    return
                event, tries = self.pending.pop(rng.randrange(len(self.pending)))
            self._deliver(event, tries)

    def _deliver(self, event: dict[str, Any], tries: int) -> None:
        try:
            self.events(event)
            with self.lock:
                self.result.deliveries += 1
        except Exception:  # noqa: BLE001 - EventBridge retries a failed invocation
            with self.lock:
                self.result.failed_deliveries += 1
                if tries + 1 < MAX_DELIVERIES:
                    self.pending.append((event, tries + 1))

    def _pump(self, until: float) -> None:
        while time.monotonic() < until:
            self._collect_events()
            time.sleep(0.2)

    def _trials(self, until: float) -> None:
        """The tuner's side of the sweeps: a trial of each running sweep ends a round."""
        while time.monotonic() < until:
            self.sweeps.drive()
            time.sleep(0.1)

    # ----------------------------------------------------------------------- run
    def run(self, seconds: float) -> Result:
        """The soak; the functions' metric lines (standard output) are discarded meanwhile:
        ``contextlib.redirect_stdout`` swaps a process-wide stream and is no use per thread."""
        saved, sys.stdout = sys.stdout, open(os.devnull, "w")  # noqa: SIM115
        try:
            return self._run(seconds)
        finally:
            sys.stdout.close()
            sys.stdout = saved

    def _run(self, seconds: float) -> Result:
        started = time.monotonic()
        until = started + seconds
        self._install_faults()
        threads = [threading.Thread(target=self._pump, args=(until,), daemon=True)]
        threads += [threading.Thread(target=self._trials, args=(until,), daemon=True)]
        threads += [
            threading.Thread(target=self._caller, args=(i, until), daemon=True)
            for i in range(CALLERS)
        ]
        first = 2 + (len(TEAMS) if self.sweeps.budget > 0 else 0)
        for t in threads[:first]:
            t.start()
        # Each team's first sweep asks before the team's instances fill with jobs.
        self.sweeps.opened.wait(timeout=FIRST_SWEEPS_S)
        for t in threads[first:]:
            t.start()
        for t in threads:
            t.join()
        self.faults.on = False
        self.faults.uninstall()
        self.result.injected = self.faults.injected
        self._settle()
        self.result.seconds = round(time.monotonic() - started, 1)
        self._check()
        return self.result

    def _settle(self) -> None:
        """Faults off: the events drained, then the claim bound passes and the recovery runs;
        then every sweep is driven to its end (its evaluation job's events drained too)."""
        self._drain(4)
        runtime = self.trigger.module.RUNTIME
        real_now = runtime.now
        later = real_now() + timedelta(seconds=CL.CLAIM_BOUND_S + 60 * CL.SWEEP_MINUTES)
        runtime.now = lambda: later
        try:
            totals: Counter[str] = Counter()
            for _ in range(2):
                totals.update(self._call("", {"action": "sweep"}, alias="sweep"))
            self.result.swept = dict(totals)
        finally:
            runtime.now = real_now
        self._drain(1)
        sweeps = {n: j for n, j in self._jobs().items() if j.get("kind") == "sweep"}
        if sweeps:
            self.result.problems += self.sweeps.settle(sweeps)
            self._drain(4)

    def _drain(self, rounds: int) -> None:
        """New state changes collected and every pending delivery made, ``rounds`` times."""
        for _ in range(rounds):
            self._collect_events()
            while self.pending:
                self._deliver_some(self.rng, len(self.pending))

    # --------------------------------------------------------------------- check
    def _jobs(self) -> dict[str, dict[str, Any]]:
        return {i["job_name"]: i for i in self._items() if i["pk"].startswith("job#")}

    def _check(self) -> None:
        r = self.result
        jobs = self._jobs()
        r.jobs, r.ended = len(jobs), sum(j["status"] in TERMINAL_STATUSES for j in jobs.values())
        for key, names in self.tokens.items():
            live = [n for n in names if jobs.get(n, {}).get("status") != "FailedToStart"]
            if len(live) > 1:
                r.duplicates += 1
                r.problems.append(f"token {key} answered {sorted(names)}")
            for name in names:
                if name not in jobs:
                    r.lost_jobs += 1
                    r.problems.append(f"token {key} answered {name}, not in the ledger")
        for name, job in jobs.items():
            if job["status"] == "Submitting":
                r.stuck_claims += 1
                r.problems.append(f"{name} is still Submitting")
            owed = E.owed(_typed(job))
            if owed:
                r.problems.append(f"{name} still owes {sorted(owed)}")
        self._check_backend(jobs)
        self._check_usage(jobs)
        self._check_announcements(jobs)
        self._check_evaluations(jobs)
        self._check_sweeps(jobs)

    def _check_sweeps(self, jobs: dict[str, dict[str, Any]]) -> None:
        """Issue 37: each sweep against what the tuner ran (``soak_sweeps.Sweeps.check``)."""
        r = self.result
        r.sweep_refusals = dict(self.sweeps.refused)
        if self.sweeps.tuner is None:
            return
        counts, problems = self.sweeps.check(jobs, self._versions(), TEAMS)
        r.sweeps = counts
        r.problems += problems

    def _versions(self) -> Counter[str]:
        """Registered model versions, by the job each is of: a version's description starts
        with its job's name and a colon (``jobmodel.after_training.registry.is_version_of``)."""
        sm = self.client("sagemaker")
        out: Counter[str] = Counter()
        groups = [
            g["ModelPackageGroupName"]
            for page in sm.get_paginator("list_model_package_groups").paginate()
            for g in page["ModelPackageGroupSummaryList"]
        ]
        for group in groups:
            for page in sm.get_paginator("list_model_packages").paginate(
                ModelPackageGroupName=group
            ):
                for version in page["ModelPackageSummaryList"]:
                    text = str(version.get("ModelPackageDescription") or "")
                    if ":" in text:
                        out[text.split(":", 1)[0]] += 1
        return out

    def _check_evaluations(self, jobs: dict[str, dict[str, Any]]) -> None:
        """Issue 36: every Completed job that recorded an evaluation policy has exactly one
        evaluation job (``<job>-eval``, kind ``evaluation``), or a refusal by its team's
        limits recorded on it, and once that one ended, its results (a verdict) are on the
        evaluated job."""
        r = self.result
        evals = {n: j for n, j in jobs.items() if j.get("kind") == "evaluation"}
        r.evaluations = len(evals)
        for name, job in jobs.items():
            if job.get("kind") not in (None, "sweep"):  # a job or a sweep (issue 37)
                continue
            if job["status"] != "Completed" or not job.get("evaluation_policy"):
                continue
            r.evaluated += 1
            mine = [e for e in evals.values() if e.get("evaluation_of") == name]
            if not mine and (job.get("evaluation") or {}).get("status") == "Refused":
                continue  # a team limit refused it: recorded on the job, an answer (not lost)
            if len(mine) != 1:
                r.lost_evaluations += 1
                r.problems.append(f"{name} Completed with {len(mine)} evaluation jobs")
                continue
            if mine[0]["status"] in TERMINAL_STATUSES and not (job.get("evaluation") or {}).get(
                "verdict"
            ):
                r.lost_evaluations += 1
                r.problems.append(f"{name}'s evaluation {mine[0]['job_name']} ended, no verdict")

    def _check_backend(self, jobs: dict[str, dict[str, Any]]) -> None:
        r = self.result
        if self.scheduler == "queue":
            mine = [
                j for j in self.standin.jobs.values() if j.queue.arn == self.outputs["JobQueueArn"]
            ]
            started = Counter(j.name for j in mine)
            foreign = [j.name for j in mine]
        else:
            sm = self.client("sagemaker")
            names = [
                j["TrainingJobName"]
                for page in sm.get_paginator("list_training_jobs").paginate()
                for j in page["TrainingJobSummaries"]
            ]
            foreign = [n for n in names if n.split("-")[0] in TEAMS]
            started = Counter(n for n in names if n in jobs)
        for name in foreign:
            if name not in jobs:
                r.orphans += 1
                r.problems.append(f"{name} started but not in the ledger")
        for name, count in started.items():
            if count > 1:
                r.duplicates += 1
                r.problems.append(f"{name} started {count} times")
        for name, job in jobs.items():
            if job.get("kind") == "sweep":  # the tuner's, not SageMaker's or Batch's
                continue
            ran = job["status"] not in ("FailedToStart", "Submitting")
            if ran and started.get(name, 0) == 0:
                r.problems.append(f"{name} is {job['status']} but its backend never had it")

    def _check_usage(self, jobs: dict[str, dict[str, Any]]) -> None:
        r = self.result
        ddb = self.client("dynamodb")
        for team in TEAMS:
            live = [
                j for j in jobs.values() if j.get("team") == team and not j.get("usage_released")
            ]
            live_ended = [j for j in live if j["status"] in TERMINAL_STATUSES]
            item = ddb.get_item(
                TableName=self.table, Key={"pk": {"S": f"usage#{team}"}}, ConsistentRead=True
            ).get("Item")
            instances = int(item["instances"]["N"]) if item else 0
            # A sweep holds its parallel trials' instances (``instances_held``).
            want = sum(int(j.get("instances_held") or j["instance_count"]) for j in live)
            reserved = float(item["reserved"]["N"]) if item else 0.0
            want_reserved = sum(float(j.get("estimated_max_cost_usd") or 0) for j in live)
            if live_ended or instances != want or abs(reserved - want_reserved) > 0.01:
                r.usage_mismatches += 1
                r.problems.append(
                    f"team {team}: usage {instances} instances / {reserved} reserved, jobs "
                    f"{want} / {want_reserved}; ended but not released: {len(live_ended)}"
                )
            self._check_spend(team, item, [j for j in jobs.values() if j.get("team") == team])

    def _check_spend(
        self, team: str, item: dict[str, Any] | None, jobs: list[dict[str, Any]]
    ) -> None:
        """The team's month spend is what its jobs and sweeps were charged, each once: a job
        its cost when it ended (``usage_spend_usd``), a sweep each trial's as it ended
        (``prior_cost_usd``, their sum). Only within one month (a run that crossed into the
        next started the spend afresh)."""
        r = self.result
        months = {str(j.get("created_at", ""))[:7] for j in jobs}
        if item is None or len(months) > 1 or months != {item["month"]["S"]}:
            return
        spend = float(item["spend"]["N"])
        charged = 0.0
        for job in jobs:
            if job.get("kind") == "sweep":
                charged += float(job.get("prior_cost_usd") or 0)
            elif job.get("usage_released"):
                charged += float(job.get("usage_spend_usd") or 0)
        if abs(spend - charged) > 1e-3:
            r.spend_mismatches += 1
            r.problems.append(
                f"team {team}: month spend {spend}; its jobs and sweeps were charged {charged:.4f}"
            )

    def _check_announcements(self, jobs: dict[str, dict[str, Any]]) -> None:
        r = self.result
        sqs = self.client("sqs")
        ids: Counter[str] = Counter()
        while True:
            out = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            messages = out.get("Messages", [])
            if not messages:
                break
            for m in messages:
                body = json.loads(m["Body"])
                ids[json.loads(body["Message"])[E.DEDUP_ATTRIBUTE]] += 1
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
        r.announcements = sum(ids.values())
        r.repeats = sum(c - 1 for c in ids.values())
        for name, job in jobs.items():
            # An evaluation job is not announced: its verdict is its evaluated job's
            # ``evaluated`` notice, on the team's topic (``_check_evaluations``).
            if job.get("kind") == "evaluation":
                continue
            if job["status"] in TERMINAL_STATUSES and not ids.get(E.dedup_id(name, E.ANNOUNCE)):
                r.lost_announcements += 1
                r.problems.append(f"{name} ended {job['status']} and was never announced")
        for dedup in ids:
            if dedup.split("/")[0] not in jobs:
                r.problems.append(f"announcement {dedup} of no job")

    def _items(self) -> list[dict[str, Any]]:
        # boto3's deserializer, not ftl_ledger's codec: ftl_ledger is the Lambdas' package (on
        # the path under pytest only), and each deployed function loads its own copy.
        from boto3.dynamodb.types import TypeDeserializer

        plain = TypeDeserializer().deserialize
        ddb = self.client("dynamodb")
        return [
            {k: _plain(plain(v)) for k, v in i.items()}
            for page in ddb.get_paginator("scan").paginate(TableName=self.table)
            for i in page["Items"]
        ]


def _typed(record: dict[str, Any]) -> Any:
    """The typed record (``jobmodel.jobs.job.Job``) through the ledger's codec, loaded from its
    source folder as the functions' assets carry it (under pytest it is on the path already)."""
    ledger = str(Path(__file__).resolve().parents[1] / "lambda" / "ledger")
    if ledger not in sys.path:
        sys.path.append(ledger)
    from ftl_ledger.job_codec import from_record

    return from_record(record)


def _plain(value: Any) -> Any:
    """DynamoDB numbers (``Decimal``) as ``int`` or ``float``, in maps and lists too."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _epoch_ms(value: Any) -> Any:
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    raise TypeError(type(value).__name__)


# ----------------------------------------------------------------------------- entry points
def deploy_for(sandbox: Any, scheduler: str, platform: str) -> dict[str, str]:
    """Deploy the soak's platform into ``sandbox`` (a ``BatchSandbox``); the launcher stack's
    outputs."""
    saved = dict(os.environ)
    try:
        if scheduler == "queue":
            from sandbox.queue_mode import deploy_queue

            outputs = deploy_queue(sandbox, context=context(platform, scheduler)).outputs
        else:
            from sandbox.deploy import deploy

            outputs = deploy(sandbox.endpoint, context=context(platform, scheduler))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    (launcher,) = [o for o in outputs.values() if "TriggerFunctionName" in o]
    return launcher


def soak(
    sandbox: Any,
    outputs: dict[str, str],
    *,
    scheduler: str,
    seconds: float,
    faults: float,
    seed: int,
    sweeps: int = SWEEPS,
) -> Result:
    from bench.load import forget_training_jobs

    for team in TEAMS:  # an earlier run's jobs (same team names) are not this run's
        forget_training_jobs(prefix=f"{team}-")
    saved = dict(os.environ)
    try:
        run = Soak(
            sandbox.endpoint,
            outputs,
            scheduler=scheduler,
            fault_rate=faults,
            seed=seed,
            standin=sandbox.batch if scheduler == "queue" else None,
            tuner=sandbox.tuner,
            sweeps=sweeps,
        )
        return run.run(seconds)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def report(result: Result) -> str:
    s = result.summary()
    return (
        f"{s['scheduler']:6} faults {s['fault_rate']:.0%}: {s['jobs']} jobs ({s['ended']} ended) "
        f"in {s['seconds']} s; calls {sum(result.calls.values())}, injected "
        f"{sum(result.injected.values())}; events delivered {s['deliveries']} "
        f"(failed {s['failed_deliveries']}); announcements {s['announcements']} "
        f"(repeats {s['repeats']}); lost announcements {s['lost_announcements']}, stuck "
        f"claims {s['stuck_claims']}, duplicates {s['duplicates']}, lost jobs {s['lost_jobs']}, "
        f"orphans {s['orphans']}, evaluations {s['evaluations']} of {s['evaluated']} "
        f"(lost {s['lost_evaluations']}), usage mismatches {s['usage_mismatches']}, non-contract "
        f"answers {s['bad_answers']}, spend mismatches {s['spend_mismatches']}; swept "
        f"{s['swept']}{sweeps_report(result)}"
    )


def sweeps_report(result: Result) -> str:
    """The sweeps' part of :func:`report` (issue 37)."""
    c = result.sweeps
    text = ""
    if c and c["sweeps"]:
        text = (
            f"; sweeps {c['sweeps']} {c['statuses']} (plans {c['plans']}, capped "
            f"{c['capped']}): trials ended {c['trials_ended']}, charged {c['trials_charged']}, "
            f"lost {c['lost_trials']}, charge mismatches {c['charge_mismatches']}, cap overruns "
            f"{c['cap_overruns']} (largest over a cap ${c['largest_overrun_usd']}), versions "
            f"{c['versions']} (wrong {c['lost_versions']}); trials ended under faults "
            f"{c['trials_ended_under_faults']} in {c['driver_rounds']} rounds"
        )
    if result.sweep_refusals:
        text += f"; sweep requests refused {result.sweep_refusals}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--faults", type=float, nargs="+", default=[0.10, 0.25])
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--scheduler", choices=("direct", "queue", "both"), default="both")
    parser.add_argument(
        "--sweeps", type=int, default=SWEEPS, help=f"sweeps per run (default {SWEEPS})"
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--smoke", action="store_true", help="3 s, direct, 10%%: does it run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.seconds, args.faults, args.scheduler = 3.0, [0.10], "direct"
        args.sweeps = min(args.sweeps, len(TEAMS))
    from sandbox.batch_api import BatchSandbox
    from sandbox.deploy import sandbox_env

    schedulers = ["direct", "queue"] if args.scheduler == "both" else [args.scheduler]
    results = []
    with BatchSandbox() as sandbox:
        os.environ.update(sandbox_env(sandbox.endpoint))
        for scheduler in schedulers:
            for i, rate in enumerate(args.faults):
                platform = f"soak{scheduler[0]}{i}"
                outputs = deploy_for(sandbox, scheduler, platform)
                result = soak(
                    sandbox,
                    outputs,
                    scheduler=scheduler,
                    seconds=args.seconds,
                    faults=rate,
                    seed=args.seed + i,
                    sweeps=args.sweeps,
                )
                print(report(result), flush=True)
                for problem in result.problems[:10]:
                    print("  ", problem)
                results.append(result.summary())
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    failed = [r for r in results if r["problems"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
