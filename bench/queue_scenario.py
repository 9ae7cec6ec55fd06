"""Issue 10's queue scenario, timed: three teams' waits under fair share against FIFO.

    python -m bench.queue_scenario [--json PATH]

Every wait here is in SIMULATED minutes, produced by the dispatch rules of the AWS Batch
stand-in (``sandbox/batch.py``) on a frozen ``sandbox.clock.SimClock``: it shows what the
launcher reports for the stand-in's schedule, and is not a measurement of AWS Batch. (The
stand-in's fair share counts the instances each share holds plus its use over the scheduling
policy's ``shareDecaySeconds``, 3600 on the platform's queue, decayed linearly:
``sandbox/batch_share.py``; Batch's own formula is not published.)

In one process: the moto sandbox with the stand-in on its endpoint (``BatchSandbox``), and the
trigger's real handler, imported from the deployed asset's files (``bench._common.
trigger_asset``) in queue mode with three teams, alpha, beta and gamma, of equal weight, each
calling through its own alias (``team-<name>``). The trigger's clock (``Runtime.now``) is the
same SimClock, so the wait it reports (from its own submit to Batch's ``scheduledAt``) lies on
one time line.

The scenario (:data:`ISSUE_10`): a queue of 4 instances; alpha submits four 2-instance jobs,
then beta four, then gamma four, one simulated second apart (alpha bursts first). A started
job runs 60 simulated minutes. The loop moves the clock to the next job's end, ends that
training job (``finish_training_job``, which applies the rules again) and describes the
waiting jobs, until all 12 have completed. A job's wait is the ``queued_seconds`` of the
trigger's own describe (docs/API.md, Queue mode), and so is its start (submit + wait). The
books are checked: 12 distinct jobs, Batch jobs and training jobs, each completed once.

Baseline, same run: the same 12 submissions into a second queue of the stand-in with share
policy ``fifo``. The trigger always sends ``shareIdentifier`` = team; that queue puts every
job in one share, so jobs start first come, first served. (Real Batch's FIFO queue, one
without a scheduling policy, takes no ``shareIdentifier``: the option exists only in the
stand-in, for this comparison.)

Reported: wait p50/p90/max overall and per team (p50 and p90 interpolate between ranks: with
four jobs a team, nearest-rank p90 would be the maximum), when each team's first job started,
per-team p90 fair share / FIFO, the spread (highest team p50 / lowest) under each, and as side
numbers the run's wall-clock time and the trigger's submit latency (moto in this process).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._common import (
    fmt_ms,
    handler_output_discarded,
    offline_env,
    percentile,
    tempdir,
    trigger_asset,
    write_json,
)
from jobmodel.capacity.scheduler import SHARE_DECAY_SECONDS, SchedulerConfig
from jobmodel.contract.names import ENV_JOB_TABLE, ENV_TEAM_ROLES
from jobmodel.teams import Team, TeamsConfig
from testsupport import ACCOUNT, TRIGGER_ENV, create_ledger_table

FUNCTION = "ftl-trigger"
TEMPLATE = "bert-large-qa"
POLICIES = ("fairshare", "fifo")  # the stand-in's share policy of each queue
TAGS = {"fairshare": "fair", "fifo": "fifo"}  # in the job names, one queue's from the other's


@dataclass(frozen=True)
class Plan:
    """A queue of ``capacity`` instances; ``bursts``: (team, number of jobs) in submission
    order; every job ``instances`` large, running ``run_minutes`` once started; submissions
    ``gap_s`` simulated seconds apart."""

    capacity: int
    bursts: tuple[tuple[str, int], ...]
    instances: int
    run_minutes: float
    gap_s: float = 1.0

    @property
    def teams(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(team for team, _ in self.bursts))


ISSUE_10 = Plan(
    capacity=4, bursts=(("alpha", 4), ("beta", 4), ("gamma", 4)), instances=2, run_minutes=60
)
# ``--smoke``: the smallest plan in which the two policies differ (tests/bench).
SMOKE = Plan(capacity=2, bursts=(("alpha", 3), ("beta", 2)), instances=1, run_minutes=60)


@dataclass
class Job:
    team: str
    name: str
    batch_job_id: str
    submitted: float  # simulated clock
    training: str | None = None
    started: float | None = None
    finished: bool = False
    status: str = "Queued"
    wait_s: float | None = None


@dataclass
class Run:
    """One queue's run: its jobs in submission order, their names in the order they started,
    the trigger's wall-clock latencies and what the books found wrong."""

    policy: str
    queue: str  # the stand-in's queue name
    jobs: list[Job] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    submit_s: list[float] = field(default_factory=list)
    describe_s: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def teams_env(teams: tuple[str, ...]) -> dict[str, str]:
    """Teams mode with ``teams`` (equal weights), each with its own training role."""
    config = TeamsConfig(
        teams=tuple(
            Team(name=t, principals=(f"arn:aws:iam::{ACCOUNT}:role/{t}-scientists",)) for t in teams
        )
    )
    roles = {t: f"arn:aws:iam::{ACCOUNT}:role/ftl-{t}-training" for t in teams}
    return config.to_env() | {ENV_TEAM_ROLES: json.dumps(roles)}


class Trigger:
    """The trigger's handler from the asset, on one queue and ledger table; its clock is the
    stand-in's. Calls go through a team's alias and must succeed."""

    def __init__(self, asset: Path, clock: Any) -> None:
        from sandbox.runner import import_asset_module

        self.module = import_asset_module(asset, "handler")
        self.module.RUNTIME.now = lambda: datetime.fromtimestamp(clock(), UTC)

    def __call__(self, team: str, event: dict[str, Any]) -> tuple[dict[str, Any], float]:
        from sandbox.runner import Context

        with handler_output_discarded():
            started = time.perf_counter()
            result = self.module.handler(event, Context(FUNCTION, f"team-{team}"))
            took = time.perf_counter() - started
        if "error" in result:
            raise RuntimeError(f"the trigger refused {event} for {team}: {result['error']}")
        return result, took


def run_queue(sandbox: Any, trigger: Trigger, clock: Any, plan: Plan, queue: str) -> Run:
    """Submit the plan's bursts to ``queue``, then run every job to its end; the waits are
    the trigger's."""
    policy = sandbox.batch.queues[queue].share_policy
    tag, run_s = TAGS[policy], plan.run_minutes * 60
    run = Run(policy, queue)
    for team, count in plan.bursts:
        for _ in range(count):
            if run.jobs:
                clock.advance(plan.gap_s)
            n = len(run.jobs) + 1
            request = {
                "template": TEMPLATE,
                "job_name": f"{tag}{n}",
                "instance_count": plan.instances,
                "client_token": f"{tag}-{n}-{uuid.uuid4().hex[:8]}",
            }
            answer, took = trigger(team, request)
            run.submit_s.append(took)
            if answer["status"] != "Queued":
                raise RuntimeError(f"a queue-mode submit answered {answer['status']}")
            run.jobs.append(Job(team, answer["job_name"], answer["batch_job_id"], clock()))
    while True:
        _observe(trigger, run, [j for j in run.jobs if j.started is None])
        running = [j for j in run.jobs if j.started is not None and not j.finished]
        if not running:
            break
        ending = min(running, key=lambda j: j.started)
        clock.advance_to(ending.started + run_s)
        sandbox.batch.finish_training_job(ending.training)
        ending.finished = True
    if stuck := [j.name for j in run.jobs if j.started is None]:
        raise RuntimeError(f"nothing runs and {len(stuck)} jobs never started: {stuck[:3]}")
    run.order = [j.name for j in sorted(run.jobs, key=lambda j: j.started)]
    _observe(trigger, run, run.jobs, final=True)
    run.problems = books(sandbox, run, plan)
    return run


def _observe(trigger: Trigger, run: Run, jobs: list[Job], *, final: bool = False) -> None:
    """Describe ``jobs`` through their teams' aliases; a job Batch has started gets its start
    (submit + the trigger's ``queued_seconds``)."""
    for job in jobs:
        seen, took = trigger(job.team, {"action": "describe", "job_name": job.name})
        run.describe_s.append(took)
        job.status = seen["status"]
        if final:
            job.wait_s = seen.get("queued_seconds")
        elif job.started is None and seen.get("training_job_name"):
            job.training = seen["training_job_name"]
            job.started = job.submitted + float(seen["queued_seconds"])


def books(sandbox: Any, run: Run, plan: Plan) -> list[str]:
    """Nothing lost or doubled: one job, Batch job and training job per submission, each
    completed once (the trigger's describe, the stand-in's events and moto agree)."""
    from bench.load import training_job_names

    expected = sum(count for _, count in plan.bursts)
    names = {j.name for j in run.jobs}
    problems = []
    if len(names) != expected or len({j.batch_job_id for j in run.jobs}) != expected:
        problems.append(f"{len(names)} job names for {expected} submissions")
    trainings = {j.training for j in run.jobs if j.training}
    if len(trainings) != expected:
        problems.append(f"{len(trainings)} training jobs for {expected} jobs")
    if missing := trainings - training_job_names():
        problems.append(f"training jobs missing from SageMaker: {sorted(missing)[:3]}")
    if unfinished := [(j.name, j.status) for j in run.jobs if j.status != "Completed"]:
        problems.append(f"not completed: {unfinished[:3]}")
    if [j.name for j in run.jobs if j.wait_s is None]:
        problems.append("a describe gave no queued_seconds")
    ids = {j.batch_job_id for j in run.jobs}
    on_queue = [j for j in sandbox.batch.jobs.values() if j.queue.name == run.queue]
    succeeded = [
        e["detail"]["jobId"]
        for e in sandbox.batch.events
        if e["detail"]["status"] == "SUCCEEDED" and e["detail"]["jobId"] in ids
    ]
    if len(on_queue) != expected or sorted(succeeded) != sorted(ids):
        problems.append(f"Batch: {len(on_queue)} jobs, {len(succeeded)} SUCCEEDED events")
    if any(len(j.attempts) != 1 for j in on_queue):
        problems.append("a Batch job started more than once")
    return problems


def scenario(plan: Plan = ISSUE_10, asset: Path | None = None) -> dict[str, Run]:
    """The plan on a fair-share queue, then on a FIFO queue, in one sandbox: policy -> run."""
    import boto3

    from sandbox.batch import BatchStandIn
    from sandbox.batch_api import BatchSandbox
    from sandbox.clock import SimClock
    from sandbox.deploy import REGION

    work = None
    if asset is None:
        work = tempdir("queue-scenario")
        asset = trigger_asset(work / "asset")
    saved = dict(os.environ)
    clock = SimClock()
    runs: dict[str, Run] = {}
    try:
        with BatchSandbox(standin=BatchStandIn(clock=clock)) as sandbox:
            dynamodb = boto3.client(
                "dynamodb",
                endpoint_url=sandbox.endpoint,
                region_name=REGION,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            for policy in POLICIES:
                name = f"bench-{TAGS[policy]}-{uuid.uuid4().hex[:8]}"
                arn = sandbox.batch.create_queue(
                    name,
                    capacity=plan.capacity,
                    weight_factors=dict.fromkeys(plan.teams, 1.0),
                    share_policy=policy,
                    share_decay_s=SHARE_DECAY_SECONDS,  # the platform's policy (fifo ignores it)
                )
                table = f"ftl-jobs-{name}"
                create_ledger_table(dynamodb, table)
                env = offline_env(TRIGGER_ENV) | teams_env(plan.teams)
                env |= SchedulerConfig(scheduler="queue", job_queue_arn=arn).to_env()
                env |= {"AWS_ENDPOINT_URL": sandbox.endpoint, ENV_JOB_TABLE: table}
                os.environ.clear()
                os.environ.update(env)
                trigger = Trigger(asset, clock)
                runs[policy] = run_queue(sandbox, trigger, clock, plan, name)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return runs


# ----------------------------------------------------------------------------- numbers
def quantile(values: list[float], q: float) -> float:
    """The ``q`` percentile (0..100), interpolating linearly between ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def wait_stats(minutes: list[float]) -> dict[str, float]:
    return {
        "n": len(minutes),
        "p50_min": quantile(minutes, 50),
        "p90_min": quantile(minutes, 90),
        "max_min": max(minutes),
        "mean_min": sum(minutes) / len(minutes),
    }


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def summarize(run: Run, plan: Plan) -> dict[str, Any]:
    """A run's waits (simulated minutes) overall and per team, its start order and books."""
    waits = {j.name: (j.wait_s or 0.0) / 60 for j in run.jobs}
    first = min(j.submitted for j in run.jobs)
    teams: dict[str, Any] = {}
    for team in plan.teams:
        mine = [j for j in run.jobs if j.team == team]
        teams[team] = wait_stats([waits[j.name] for j in mine]) | {
            "first_start_min": min((j.started or 0.0) - first for j in mine) / 60
        }
    p50s = [t["p50_min"] for t in teams.values()]
    team_of = {j.name: j.team for j in run.jobs}
    return {
        "overall": wait_stats(list(waits.values())),
        "teams": teams,
        "spread_p50": _ratio(max(p50s), min(p50s)),
        "start_order": [team_of[name] for name in run.order],
        "jobs": [{"team": j.team, "job_name": j.name, "wait_min": waits[j.name]} for j in run.jobs],
        "problems": run.problems,
    }


def run(plan: Plan = ISSUE_10) -> dict[str, Any]:
    started = time.perf_counter()
    runs = scenario(plan)
    wall = time.perf_counter() - started
    fair, fifo = (summarize(runs[p], plan) for p in POLICIES)
    submits = [s for r in runs.values() for s in r.submit_s]
    describes = [s for r in runs.values() for s in r.describe_s]
    return {
        "simulated": "minutes of the stand-in's dispatch rules (sandbox/batch.py), not AWS Batch",
        "plan": {
            "capacity": plan.capacity,
            "bursts": [list(b) for b in plan.bursts],
            "instances": plan.instances,
            "run_minutes": plan.run_minutes,
        },
        "fairshare": fair,
        "fifo": fifo,
        "p90_ratio": {
            t: _ratio(fair["teams"][t]["p90_min"], fifo["teams"][t]["p90_min"]) for t in plan.teams
        },
        "first_start_ratio": {
            t: _ratio(fair["teams"][t]["first_start_min"], fifo["teams"][t]["first_start_min"])
            for t in plan.teams
        },
        "wall_s": wall,
        "submit_p50_s": percentile(submits, 50),
        "describe_p50_s": percentile(describes, 50),
        "calls": {"submit": len(submits), "describe": len(describes)},
        "problems": fair["problems"] + fifo["problems"],
    }


# ----------------------------------------------------------------------------- report
def _x(value: float | None) -> str:
    return "n/a (FIFO's is 0)" if value is None else f"{value:.2f}x"


def report(r: dict[str, Any]) -> str:
    plan = r["plan"]
    bursts = ", then ".join(f"{t} {n}" for t, n in plan["bursts"])
    lines = [
        "SIMULATED minutes from the Batch stand-in's dispatch rules (sandbox/batch.py), not a "
        "measurement of AWS Batch;",
        f"queue of {plan['capacity']} instances, jobs of {plan['instances']} instances running "
        f"{plan['run_minutes']:g} min; submitted {bursts} (1 s apart).",
        "wait = the trigger's describe queued_seconds; p50/p90 interpolated between ranks.",
        "The stand-in's fair share counts the instances a share holds plus its use over the "
        "last shareDecaySeconds",
        "(3600 on the platform's queue, sandbox/batch_share.py); ties go to the older job.",
    ]
    for policy, title in (("fairshare", "fair share (equal weights)"), ("fifo", "FIFO baseline")):
        s = r[policy]
        lines.append(f"{title}: start order {' '.join(t[0] for t in s['start_order'])}")
        lines.append("  " + _wait_row("all", s["overall"]))
        for team, stats in s["teams"].items():
            lines.append(
                "  " + _wait_row(team, stats) + f"  first start {stats['first_start_min']:6.1f}"
            )
        lines.append(f"  spread (highest team p50 / lowest): {_x(s['spread_p50'])}")
    lines.append("fair share / FIFO, per team (above 1: waits longer under fair share):")
    for team, ratio in r["p90_ratio"].items():
        first = r["first_start_ratio"][team]
        lines.append(f"  {team:<6} p90 {_x(ratio):>8}   first start {_x(first)}")
    jobs = sum(n for _, n in plan["bursts"])
    lines.append(f"books: {r['problems'] or f'{jobs} jobs a queue, each completed once'}")
    lines.append(
        f"side numbers (wall clock): whole run {r['wall_s']:.1f} s; trigger submit p50 "
        f"{fmt_ms(r['submit_p50_s'])}, describe p50 {fmt_ms(r['describe_p50_s'])} "
        f"(moto in this process, n={r['calls']['submit']}/{r['calls']['describe']})"
    )
    return "\n".join(lines)


def _wait_row(label: str, s: dict[str, float]) -> str:
    return (
        f"{label:<6} wait min p50 {s['p50_min']:6.1f}  p90 {s['p90_min']:6.1f}"
        f"  max {s['max_min']:6.1f}  mean {s['mean_min']:6.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny counts: does it run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = run(SMOKE) if args.smoke else run()
    print(report(result))
    write_json(args.json, result)
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
