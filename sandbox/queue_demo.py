"""`python -m sandbox.demo --queue` (`make demo-queue`): jobs wait for GPUs instead of failing.

Deploys the platform with ``ftl:scheduler=queue`` and a capacity of 4 instances into the
sandbox (the AWS Batch stand-in configured from the synthesized template, its events pumped
to the deployed job-events function), then, through the deployed trigger (Lambda Invoke):

1. submits three 2-instance jobs: two start, the third is ``Queued`` with its reason and its
   position in the queue;
2. finishes the first job's training job (as SageMaker would);
3. shows the third job start.

The trigger's answers follow docs/API.md (Queue mode): submit ``status`` ``Queued``, ``job_arn``
null, ``batch_job_id``, ``priority``, ``queued_at``; describe ``queue_reason``,
``queue_position``, ``queued_seconds``, ``training_job_name``. The job-events function's
fleet metric lines (EMF) are shown one short line each, as it applies Batch's events.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

import boto3

from sandbox.batch_api import BatchSandbox
from sandbox.deploy import sandbox_env
from sandbox.metric_lines import MetricLines
from sandbox.moto_notices import summary, unsupported_notices
from sandbox.queue_mode import QueueDeployment, deploy_queue
from sandbox.shell import TEAM_INVOKE_OUTPUT, JobFinisher, serve_forever, teams_context

CAPACITY = 4
JOBS = [
    {
        "template": "bert-large-qa",
        "job_name": f"queue-demo-{i}",
        "instance_count": 2,
        "client_token": f"demo-queue-{i}",
    }
    for i in (1, 2, 3)
]
# The submit's answer in queue mode, then describe's queue fields (docs/API.md, Queue mode).
SUBMITTED = ("job_name", "status", "job_arn", "batch_job_id", "priority", "queued_at")
COLUMNS = (
    "job_name",
    "status",
    "queue_reason",
    "queue_position",
    "queued_seconds",
    "training_job_name",
)
STARTED = ("Scheduled", "InProgress")


def run(
    *, serve: bool = False, port: int | None = None, teams: bool = False, run_seconds: float = 30
) -> int:
    """The demo; with ``serve`` the sandbox then stays up with the Batch stand-in's rules and
    the event pump running, and each started training job completes ``run_seconds`` after it
    started (:class:`sandbox.shell.JobFinisher`), so queued jobs move on."""
    context = {"ftl:queueCapacityInstances": str(CAPACITY)}
    if teams:
        context.update(teams_context())
    with BatchSandbox(port=port) as sandbox:
        print(f"moto sandbox on {sandbox.endpoint}; deploying with ftl:scheduler=queue")
        os.environ.update(sandbox_env(sandbox.endpoint))  # every AWS call goes to the sandbox
        with unsupported_notices() as skipped:
            deployment = deploy_queue(sandbox, context=context)
        if skipped:
            print(summary(skipped))
        _show_queue(sandbox, deployment)
        sandbox.batch.start_ticker()
        deployment.pump.start()
        try:
            with contextlib.redirect_stdout(MetricLines(sys.stdout)):
                code = _scenario(sandbox, deployment)
        finally:
            deployment.pump.stop()
            sandbox.batch.stop_ticker()
        if serve and code == 0:
            print(f"started training jobs complete {run_seconds:g}s after they start")
            with JobFinisher(sandbox.batch, deployment.pump, run_seconds):
                serve_forever(sandbox.endpoint, deployment.outputs)
    return code


def _show_queue(sandbox: BatchSandbox, deployment: QueueDeployment) -> None:
    arn = deployment.output("JobQueueArn")
    queue = sandbox.batch.queues[arn.rsplit("/", 1)[1]]
    print(f"job queue {arn}")
    print(
        f"  capacity {queue.capacity} instances, head-of-queue limit "
        f"{queue.head_timeout_s:.0f}s, {queue.share_policy} {queue.weight_factors}"
    )
    print(f"fleet dashboard {deployment.output('FleetDashboardName')}")


def _scenario(sandbox: BatchSandbox, deployment: QueueDeployment) -> int:
    flat = {k: v for stack in deployment.outputs.values() for k, v in stack.items()}
    trigger = flat.get(TEAM_INVOKE_OUTPUT, flat["TriggerFunctionName"])
    print(f"\nthree 2-instance jobs into a queue of {CAPACITY} instances; the submit answers:")
    jobs = [_invoke(trigger, request) for request in JOBS]
    for job in jobs:
        if "error" in job:
            print(json.dumps(job, indent=2))
            return 1
    _table(jobs, SUBMITTED)
    deployment.pump.drain()
    print("\ndescribe (Batch started two; the third waits):")
    _table([_describe(trigger, job["job_name"]) for job in jobs])
    third = _describe(trigger, jobs[2]["job_name"])
    if jobs[2].get("status") != "Queued" or third.get("status") != "Queued":
        print(
            "\nthe third job was not queued: the deployed trigger does not follow the queue "
            "contract (docs/QUEUE.md); is its queue-mode code (FTL_SCHEDULER) deployed?"
        )
        return 1
    first = _describe(trigger, jobs[0]["job_name"])
    print(f"\n{first['job_name']} finishes (its training job {first['training_job_name']}):")
    sandbox.batch.finish_training_job(first["training_job_name"])
    deployment.pump.drain()
    deadline = time.monotonic() + 30
    while third.get("status") not in STARTED and time.monotonic() < deadline:
        time.sleep(0.5)
        third = _describe(trigger, jobs[2]["job_name"])
    _table([_describe(trigger, job["job_name"]) for job in jobs])
    if third.get("status") not in STARTED:
        print(f"\n{third['job_name']} did not start after the first job ended")
        return 1
    print(f"\n{third['job_name']} started once capacity was free")
    return 0


def _invoke(function: str, event: dict[str, Any]) -> dict[str, Any]:
    reply = boto3.client("lambda").invoke(FunctionName=function, Payload=json.dumps(event).encode())
    return json.loads(reply["Payload"].read())


def _describe(trigger: str, job_name: str) -> dict[str, Any]:
    return _invoke(trigger, {"action": "describe", "job_name": job_name})


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...] = COLUMNS) -> None:
    """Absent fields are blank; a field present as null is ``null``."""
    cells = [
        ["null" if c in row and row[c] is None else str(row.get(c, "")) for c in columns]
        for row in rows
    ]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
