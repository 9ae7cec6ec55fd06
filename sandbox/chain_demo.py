"""`make demo-chain` (``python -m sandbox.demo --chain``): a job moves through its capacity
chain in the sandbox and finishes from its checkpoint.

Deploys the platform with one team (``nlp``) and a training plan in context
(``ftl:trainingPlans``), switches on SageMaker's capacity stand-in (``sandbox/capacity.py``:
no spot and no on-demand capacity for ``ml.g5.xlarge``), then through the deployed trigger:
a ``distilbert-chain`` job's spot attempt waits until its wait runs out; the on-demand attempt
goes to the next preferred type SageMaker has (``SelectedInstanceType`` ``ml.g6.xlarge``),
trains 20 minutes and loses its capacity; the plan's attempt resumes from the same
checkpoint prefix and completes. Time is one simulated clock (``sandbox/clock.py``), moved
forward instead of waited for: the stand-in reports training jobs' starts and ends from it and
the deployed trigger reads it as its own time (``functions_on_clock``), so an attempt's start
(the trigger's claim, or SageMaker's first report of it running) and its end come from the
same clock. It prints every attempt as ``ftl status`` shows them and the team's month,
charged with every attempt's cost.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from typing import Any

import boto3

from ftl_client import display
from sandbox.batch_api import BatchSandbox
from sandbox.clock import SimClock, functions_on_clock
from sandbox.deploy import ACCOUNT, REGION, deploy, sandbox_env

PLAN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/nlp-g5"
CONTEXT = {
    "ftl:teams": json.dumps(
        [{"name": "nlp", "principals": [f"arn:aws:iam::{ACCOUNT}:role/nlp-scientists"]}]
    ),
    "ftl:trainingPlans": json.dumps(
        [
            {
                "name": "nlp-g5",
                "arn": PLAN,
                "instanceType": "ml.g5.xlarge",
                "instanceCount": 1,
                "start": "2020-01-01T00:00Z",
                "end": "2099-01-01T00:00Z",
                "teams": ["nlp"],
                "templates": ["distilbert-chain"],
            }
        ]
    ),
    # The sandbox's prices (USD per instance-hour), not AWS's.
    "ftl:prices": json.dumps(
        {REGION: {"ml.g5.xlarge": 1.0, "ml.g5.2xlarge": 1.5, "ml.g6.xlarge": 2.0}}
    ),
}
REQUEST = {
    "template": "distilbert-chain",
    "job_name": "chain-demo",
    "instance_type": "ml.g5.xlarge",
    "client_token": "demo-chain-1",
}


def run(port: int | None = None) -> int:
    with BatchSandbox(port=port) as sandbox:
        print(f"moto sandbox on {sandbox.endpoint}; deploying with a training plan in context")
        os.environ.update(sandbox_env(sandbox.endpoint))
        outputs = deploy(sandbox.endpoint, context=CONTEXT)
        flat = {k: v for stack in outputs.values() for k, v in stack.items()}
        standin = sandbox.capacity.enable(
            no_spot={"ml.g5.xlarge"},
            no_on_demand={"ml.g5.xlarge"},
            plans={PLAN: ("ml.g5.xlarge", 1)},
        )
        # From now (a whole second: the ledger keeps milliseconds), for the stand-in and the
        # deployed trigger alike.
        clock = SimClock(start=float(int(time.time())))
        standin.use_clock(lambda: datetime.fromtimestamp(clock(), UTC))
        print("capacity stand-in: no spot and no on-demand ml.g5.xlarge; plan nlp-g5 (1 x g5)")
        with functions_on_clock(clock):
            job = _chain(_Door(flat["TeamNlpInvokeArn"]), standin, clock)
    return 0 if job.get("status") == "Completed" else 1


def _chain(door: _Door, standin: Any, clock: SimClock) -> dict[str, Any]:
    """Submit, move the job through its chain and print what ``ftl status`` shows."""
    job = door({**REQUEST})
    if "error" in job:
        print(json.dumps(job, indent=2))
        return job
    name = job["job_name"]
    print(
        f"\nsubmitted {name}: chain {' -> '.join(job['capacity_chain'])}, "
        f"worst-case estimate ${job['estimated_max_cost_usd']}"
    )

    clock.advance(1800)  # the spot wait (spot_wait_seconds) runs out
    standin.expire_waits()
    job = door.describe(name)
    second = standin.jobs[f"{name}-a2"]["ResourceConfig"]
    prefs = [p["InstanceType"] for p in second["InstancePreferences"]]
    print(
        f"spot found no capacity; attempt 2 on-demand, preferences {prefs}: "
        f"SageMaker selected {second['SelectedInstanceType']}"
    )
    standin.run(f"{name}-a2")
    door.describe(name)
    clock.advance(1200)
    standin.finish(f"{name}-a2", "Failed", reason="CapacityError: Insufficient capacity")
    job = door.describe(name)
    print(
        f"attempt 2 lost its capacity after 20 minutes; attempt {job['attempt']} on the "
        "training plan"
    )
    standin.run(f"{name}-a3")
    door.describe(name)
    clock.advance(2400)
    standin.finish(f"{name}-a3", "Completed")
    job = door.describe(name)

    print("\nevery attempt resumes from the job's one checkpoint prefix:")
    attempts = [r for r in standin.requests if r["TrainingJobName"].startswith(name)]
    for request in attempts:
        if "CheckpointConfig" in request:  # the attempts; the evaluation job has none
            print(f"  {request['TrainingJobName']:<40} {request['CheckpointConfig']['S3Uri']}")
    for request in attempts:
        if "CheckpointConfig" not in request:
            print(f"\nCompleted, so its evaluation job started: {request['TrainingJobName']}")
    print(f"\nftl status {name}:")
    print(display.job_detail(job))
    usage = door({"action": "whoami"})["usage"]
    total = sum(a["cost_usd"] or 0 for a in job["attempts"])
    print(
        f"\nteam nlp's month {usage['month']}: spend ${usage['month_spend_usd']} "
        f"(the attempts' costs add up to ${total:.4f})"
    )
    return job


class _Door:
    """The team's alias of the deployed trigger (direct invoke)."""

    def __init__(self, arn: str) -> None:
        self.arn = arn
        self.lam = boto3.client("lambda")

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        reply = self.lam.invoke(FunctionName=self.arn, Payload=json.dumps(event).encode())
        return dict(json.loads(reply["Payload"].read()))

    def describe(self, name: str) -> dict[str, Any]:
        return self({"action": "describe", "job_name": name})
