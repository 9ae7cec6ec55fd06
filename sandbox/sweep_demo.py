"""`make demo-sweep` (``python -m sandbox.demo --sweep``): a hyperparameter sweep (issue 37)
in the sandbox, from its dry run to its best trial's registered and evaluated model.

Deploys the platform with one team (``nlp``) and the sandbox's prices in context
(``ftl:prices``: a sweep's worst case needs its trials' price), then runs the ``ftl`` client
(``ftl_client.cli.main`` with a ``LauncherClient`` on the team's door, its alias of the
deployed trigger):

1. ``ftl sweep distilbert-spot ... --dry-run``: a log-scale learning-rate range and a
   categorical batch size, 6 trials, 2 at a time, a cap; the worst case against the cap, and
   nothing started;
2. ``ftl sweep`` without ``--dry-run``: one SageMaker tuning job, whose trials the sandbox's
   tuner stand-in (``sandbox/tuner.py``) runs, each trial's objective from a made-up response
   surface (:func:`accuracy`) and its run time from its batch size (:func:`train_seconds`);
3. ``ftl wait``: the client's own wait (``LauncherClient.wait``) and progress lines
   (``ftl_client.display.progress_line``, ``ftl_client/sweeps_view.py``), a line whenever a
   poll finds a trial ended, then how the sweep ended and every trial as the tuner ran it;
4. ``ftl status`` of the ended sweep, and the best trial's model version read back from the
   sandbox's model registry with the evaluation job the sweep's end started
   (``<sweep>-eval``), read back from SageMaker.

Time is one simulated clock (``sandbox/clock.py``): the tuner stand-in stamps trials' starts
and ends from it, the deployed trigger reads it as its own time (``functions_on_clock``), and
each of the wait's sleeps between two polls moves it on instead of waiting, ending the
trials whose run time ends meanwhile. The tuner sends no trial events: the client's describe
moves the sweep on, each ended trial charged to the team's month once.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import sys
import time
from datetime import UTC, datetime
from typing import Any

import boto3

from ftl_client import cli, display
from ftl_client.client import LauncherClient
from ftl_client.progress import Progress
from sandbox.batch_api import BatchSandbox
from sandbox.clock import SimClock, functions_on_clock
from sandbox.deploy import ACCOUNT, REGION, deploy, sandbox_env
from sandbox.evaluation_output import archive, output_location
from sandbox.metric_lines import MetricLines
from sandbox.moto_notices import summary, unsupported_notices

HOURLY = 1.5  # the sandbox's price of ml.g5.xlarge (USD per instance-hour), not AWS's
CONTEXT = {
    "ftl:teams": json.dumps(
        [
            {
                "name": "nlp",
                "principals": [f"arn:aws:iam::{ACCOUNT}:role/nlp-scientists"],
                "limits": {"max_instances": 4, "max_job_cost_usd": 40.0},
            }
        ]
    ),
    "ftl:prices": json.dumps({REGION: {"ml.g5.xlarge": HOURLY, "ml.g5.2xlarge": 2.0}}),
}
TEMPLATE = "distilbert-spot"
# ``ftl sweep TEMPLATE SWEEP``: the worst case is 6 trials x 1 hour x HOURLY = 9 USD.
SWEEP = (
    "--range learning_rate=1e-5:1e-3:log --range per_device_train_batch_size=8,16,32 "
    "--objective eval_accuracy --maximize --trials 6 --parallel 2 --max-runtime 1h --cap 12 "
    "--name lr-sweep --token demo-sweep-1"
)
POLL_SECONDS = 60  # ftl wait --poll: a describe a minute, on the simulated clock
WAIT_LIMIT_S = 300  # real seconds: a sweep that never ends is an error, not a hang


def accuracy(tuned: dict[str, str]) -> float:
    """The made-up response surface: best near learning rate 1e-4, a little better with
    smaller batches."""
    lr = float(tuned["learning_rate"])
    batch = int(tuned["per_device_train_batch_size"])
    return round(0.93 - 0.12 * (math.log10(lr) + 4) ** 2 - 0.004 * math.log2(batch / 8), 4)


def train_seconds(tuned: dict[str, str]) -> int:
    """A trial's run time: smaller batches take longer (20 minutes at 8, 10 at 32)."""
    return {8: 1200, 16: 900, 32: 600}.get(int(tuned["per_device_train_batch_size"]), 900)


def run(port: int | None = None) -> int:
    with contextlib.redirect_stdout(MetricLines(sys.stdout)), BatchSandbox(port=port) as sandbox:
        print(f"moto sandbox on {sandbox.endpoint}; deploying with team nlp and ftl:prices")
        os.environ.update(sandbox_env(sandbox.endpoint))
        with unsupported_notices() as skipped:
            outputs = deploy(sandbox.endpoint, context=CONTEXT)
        if skipped:
            print(summary(skipped))
        flat = {k: v for stack in outputs.values() for k, v in stack.items()}
        # From now (a whole second: the ledger keeps milliseconds), for the tuner stand-in
        # and the deployed trigger alike.
        clock = SimClock(start=float(int(time.time())))
        sandbox.tuner.use_clock(clock)
        with functions_on_clock(clock):
            client = _Client(function_name=flat["TeamNlpInvokeArn"])
            job = sweep(client, Trials(sandbox.tuner, clock))
    return 0 if job.get("status") == "Completed" and job.get("model_package_arn") else 1


def sweep(client: _Client, trials: Trials) -> dict[str, Any]:
    """Dry run, start, wait (trial by trial), status, then the best model and its evaluation;
    the sweep as the last describe answered."""
    for extra in (["--dry-run"], []):
        _ftl(client, ["sweep", TEMPLATE, *shlex.split(SWEEP), *extra])
    name = client.started["job_name"]

    def show(progress: Progress) -> None:
        if progress.changed:  # as ftl wait: a line when a poll found something new
            print(display.progress_line(progress, trials.now()))

    print(f"\n$ ftl wait {name} --poll {POLL_SECONDS}")
    progress = client.wait(
        name, POLL_SECONDS, show, timeout=WAIT_LIMIT_S, sleep=lambda s: trials.wait(name, s)
    )
    print(display.outcome(progress, progress.final_metrics))
    trials.show(name)
    # The evaluation job the sweep's end started: moto completes it at once without running
    # it, so its results are put where SageMaker would (its output archive); its describe
    # records its end, and its results reach the sweep (issue 36).
    evaluation = (progress.job.get("evaluation") or {}).get("job_name")
    evaluation_cost = 0.0
    if evaluation:
        best = progress.job["sweep"]["best"]
        _evaluated(evaluation, {"eval_accuracy": best["objective"]})
        evaluation_cost = client.describe(evaluation).get("cost_usd") or 0.0
    _ftl(client, ["status", name])
    job = client.describe(name)
    _show_best(job)
    usage = client.whoami()["usage"]
    print(
        f"\nteam nlp's month {usage['month']}: spend ${usage['month_spend_usd']} = the sweep's "
        f"trials ${job['sweep']['spend_usd']} (each charged as it ended) + its evaluation job "
        f"${evaluation_cost}; instances in use {usage['instances']}"
    )
    return job


class _Client(LauncherClient):
    """The ``ftl`` client on the team's door, keeping the sweep it started."""

    started: dict[str, Any]

    def sweep(self, template: str, **fields: Any) -> dict[str, Any]:
        answer = super().sweep(template, **fields)
        if not fields.get("dry_run"):
            self.started = answer
        return answer


def _ftl(client: LauncherClient, argv: list[str]) -> None:
    """Run one ``ftl`` command with ``client``, printing it as a shell would."""
    print(f"\n$ ftl {shlex.join(argv)}")
    code = cli.main(argv, client=client)
    if code != cli.EXIT_OK:
        raise SystemExit(f"ftl {argv[0]} exited {code}")


class Trials:
    """The tuner stand-in's trials, run on the demo's clock."""

    def __init__(self, tuner: Any, clock: SimClock) -> None:
        self.tuner, self.clock = tuner, clock

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def wait(self, name: str, seconds: float) -> None:
        """The client's sleep between two polls: ``seconds`` pass on the clock, and every
        trial whose run time ends meanwhile finishes then, with the response surface's
        objective (a trial waiting for instances starts as soon as there is a slot)."""
        until = self.clock() + seconds
        while True:
            running = self._running(name)
            if not running or running[0][0] > until:
                break
            ends, trial, tuned = running[0]
            self.clock.advance_to(ends)
            self.tuner.finish_trial(trial, accuracy(tuned))
        self.clock.advance_to(until)

    def _running(self, name: str) -> list[tuple[float, str, dict[str, str]]]:
        """The running trials (those starting put to training now), by when each ends."""
        tuning = self.tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
        if tuning["HyperParameterTuningJobStatus"] != "InProgress":
            return []
        running = []
        for trial in self.tuner.trials(name):
            detail = self.tuner.describe_training_job(TrainingJobName=trial)
            if detail["TrainingJobStatus"] != "InProgress":
                continue
            if detail["SecondaryStatus"] == "Starting":
                detail = self.tuner.run_trial(trial)
            tuned = detail["HyperParameters"]
            ends = _seconds(detail["TrainingStartTime"]) + train_seconds(tuned)
            running.append((ends, trial, tuned))
        return sorted(running)

    def show(self, name: str) -> None:
        """Every trial as the tuner ran it: hyperparameters, status, objective, billed time."""
        print("\nthe trials as the tuner ran them (ListTrainingJobsForHyperParameterTuningJob):")
        listed = self.tuner.list_training_jobs_for_hyper_parameter_tuning_job(
            HyperParameterTuningJobName=name, SortBy="CreationTime", SortOrder="Ascending"
        )["TrainingJobSummaries"]
        for listing in listed:
            tuned = listing["TunedHyperParameters"]
            metric = listing.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
            trial = listing["TrainingJobName"]
            billable = self.tuner.describe_training_job(TrainingJobName=trial)
            print(
                f"  {trial}  learning_rate={tuned['learning_rate']:<12} "
                f"batch={tuned['per_device_train_batch_size']:>2}  "
                f"{listing['TrainingJobStatus']:<9}  eval_accuracy={metric.get('Value', '-')}  "
                f"billable {billable['BillableTimeInSeconds']}s"
            )


def _seconds(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


def _evaluated(name: str, metrics: dict[str, float]) -> None:
    """Put the evaluation job's ``evaluation.json`` where SageMaker puts its output:
    ``<S3OutputPath>/<job>/output/output.tar.gz``."""
    described = boto3.client("sagemaker").describe_training_job(TrainingJobName=name)
    bucket, key = output_location(described["OutputDataConfig"]["S3OutputPath"], name)
    report = archive({"status": "Completed", "metrics": metrics})
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=report)


def _show_best(job: dict[str, Any]) -> None:
    """The best trial's model version and the sweep's evaluation job, read back from the
    sandbox's SageMaker (moto's model registry and training jobs)."""
    sm = boto3.client("sagemaker")
    best = job["sweep"]["best"]["trial"]
    arn = job.get("model_package_arn")
    print("\nthe best trial's registered model version (SageMaker model registry, moto):")
    if not arn:
        print(f"  none registered (status {job.get('status')})")
        return
    version = sm.describe_model_package(ModelPackageName=arn)
    rows = [
        ("best trial", best),
        ("model package", arn),
        ("group / version", f"{job['model_package_group']} / {job['model_package_version']}"),
        ("approval", version["ModelApprovalStatus"]),
        ("artifact", version["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]),
    ]
    evaluation = job.get("evaluation") or {}
    if evaluation.get("job_name"):
        described = sm.describe_training_job(TrainingJobName=evaluation["job_name"])
        model = next(
            (
                c["DataSource"]["S3DataSource"]["S3Uri"]
                for c in described.get("InputDataConfig", [])
                if best in json.dumps(c)
            ),
            "-",
        )
        rows += [
            ("evaluation job", f"{evaluation['job_name']} ({described['TrainingJobStatus']})"),
            ("evaluates", model),
        ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
