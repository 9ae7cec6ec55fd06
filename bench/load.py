"""Load on the deployed launcher in the moto sandbox: many distinct submissions at once.

    python -m bench.load [--submissions N] [--workers N] [--json PATH]

Starts a sandbox, deploys the whole app into it with the pinned CLI, loads the *deployed*
trigger code with its deployed settings (``sandbox.runner.DeployedFunction``) and submits N
distinct jobs (each its own ``client_token``) from a thread pool. Then it checks that every
submission is in the ledger (job and token items) and in SageMaker, none lost and none created
twice, and prints throughput and percentiles of:

* handler latency: the handler call, end to end;
* handler overhead: that latency minus the time spent inside botocore calls to the sandbox
  (from ``provide-client-params`` to ``after-call``: serialisation, signing, the HTTP round
  trip to moto and parsing), i.e. the launcher's own work: door, validation, rendering,
  ledger logic, responses.

moto runs in this same process and shares its two CPUs with the submitting threads, so the
throughput is the sandbox's, far below what Lambda and DynamoDB would sustain; the overhead
figures are what matters. The same functions back ``tests/sandbox/test_load.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from bench._common import fmt_ms, handler_output_discarded, percentile, write_json

SUBMISSIONS = 1000
WORKERS = 8
TEMPLATE = "distilbert-spot"
OUTPUT = "TriggerFunctionName"


def training_job_names() -> set[str]:
    """Every training job in the in-process moto backend (all accounts and regions)."""
    from moto.sagemaker.models import sagemaker_backends

    return {
        name
        for regions in sagemaker_backends.values()
        for backend in regions.values()
        for name in backend.training_jobs
    }


def forget_training_jobs(*, prefix: str | None = None, keep: set[str] | None = None) -> int:
    """Drop training jobs from the in-process moto backend: those starting with ``prefix``, or
    all but ``keep``. moto pages ListTrainingJobs over the whole account *before* filtering by
    ``NameContains``, so hundreds of jobs left behind hide new ones from any lookup that reads
    one page (``MaxResults=100``), for every later test in the same process."""
    from moto.sagemaker.models import sagemaker_backends

    dropped = 0
    for regions in sagemaker_backends.values():
        for backend in regions.values():
            for name in list(backend.training_jobs):
                if (prefix is not None and name.startswith(prefix)) or (
                    keep is not None and name not in keep
                ):
                    del backend.training_jobs[name]
                    dropped += 1
    return dropped


class CallClock:
    """Per-thread time spent inside botocore calls of the given clients, and call counts."""

    def __init__(self, *clients: Any) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        for client in clients:
            events = client.meta.events
            events.register("provide-client-params", self._start)
            events.register("after-call", self._stop)
            events.register("after-call-error", self._stop)

    def _start(self, model: Any = None, **_: Any) -> None:
        self._local.started = time.perf_counter()
        self._local.operation = getattr(model, "name", "?")

    def _stop(self, **_: Any) -> None:
        started = getattr(self._local, "started", None)
        if started is not None:
            took = time.perf_counter() - started
            self._local.spent = self.spent() + took
            self._local.started = None
            name = self._local.operation
            with self._lock:
                self.calls[name] = self.calls.get(name, 0) + 1
                self.seconds[name] = self.seconds.get(name, 0.0) + took

    def reset(self) -> None:
        self._local.spent = 0.0

    def spent(self) -> float:
        return getattr(self._local, "spent", 0.0)


@dataclass
class LoadResult:
    submissions: int
    workers: int
    prefix: str
    elapsed_s: float
    latency_s: list[float] = field(default_factory=list)
    overhead_s: list[float] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    call_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        return self.submissions / self.elapsed_s

    def summary(self) -> dict[str, Any]:
        def pct(values: list[float]) -> dict[str, float]:
            return {f"p{q}_s": percentile(values, q) for q in (50, 95, 99)}

        return {
            "submissions": self.submissions,
            "workers": self.workers,
            "elapsed_s": self.elapsed_s,
            "throughput_per_s": self.throughput,
            "latency": pct(self.latency_s),
            "overhead": pct(self.overhead_s),
            "calls": self.calls,
            "mean_call_s": {k: self.call_seconds[k] / n for k, n in self.calls.items()},
        }


def submit_many(
    handler: Callable[[dict[str, Any]], Any],
    runtime: Any,
    *,
    submissions: int = SUBMISSIONS,
    workers: int = WORKERS,
    prefix: str | None = None,
) -> LoadResult:
    """``submissions`` distinct submits (own job name prefix and token each) from ``workers``."""
    prefix = prefix or f"ld{uuid.uuid4().hex[:8]}"
    clock = CallClock(runtime.sagemaker, runtime.dynamodb)

    def one(i: int) -> tuple[dict[str, Any], float, float]:
        event = {
            "template": TEMPLATE,
            "job_name": f"{prefix}-{i:05d}",
            "client_token": f"{prefix}-token-{i:05d}",
            "hyperparameters": {"learning_rate": 1e-5 * (1 + i % 50)},
            "tags": {"load": prefix},
        }
        clock.reset()
        t0 = time.perf_counter()
        response = handler(event)
        latency = time.perf_counter() - t0
        return response, latency, latency - clock.spent()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = list(pool.map(one, range(submissions)))
    elapsed = time.perf_counter() - started
    return LoadResult(
        submissions=submissions,
        workers=workers,
        prefix=prefix,
        elapsed_s=elapsed,
        latency_s=[r[1] for r in rows],
        overhead_s=[r[2] for r in rows],
        responses=[r[0] for r in rows],
        calls=dict(clock.calls),
        call_seconds=dict(clock.seconds),
    )


def sagemaker_jobs(sagemaker: Any, prefix: str) -> list[str]:
    """Every training job whose name starts with ``prefix`` (all pages)."""
    names: list[str] = []
    kwargs: dict[str, Any] = {"MaxResults": 100, "NameContains": prefix}
    while True:
        page = sagemaker.list_training_jobs(**kwargs)
        names += [j["TrainingJobName"] for j in page["TrainingJobSummaries"]]
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    return [n for n in names if n.startswith(prefix)]


def ledger_items(dynamodb: Any, table: str, prefix: str) -> dict[str, dict[str, Any]]:
    """Ledger items (job and token) of this run, by key."""
    items: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        for item in page["Items"]:
            key = item["pk"]["S"]
            if key.startswith((f"job#{prefix}", f"token#{prefix}")):
                items[key] = item
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return items


def _full_client(client: Any) -> Any:
    import boto3

    return boto3.client(
        client.meta.service_model.service_name,
        endpoint_url=client.meta.endpoint_url,
        region_name=client.meta.region_name,
    )


def check(result: LoadResult, sagemaker: Any, dynamodb: Any, table: str) -> list[str]:
    """Problems found (empty when every submission was recorded and created exactly once)."""
    # The trigger's clients know only the operations it calls (trimmed models); listing and
    # scanning need full clients for the same endpoint.
    sagemaker, dynamodb = _full_client(sagemaker), _full_client(dynamodb)
    problems: list[str] = []
    errors = [r for r in result.responses if "error" in r]
    if errors:
        problems.append(f"{len(errors)} submissions failed, e.g. {errors[:3]}")
    names = [r["job_name"] for r in result.responses if "job_name" in r]
    if len(set(names)) != len(names):
        problems.append(f"{len(names) - len(set(names))} responses share a job name")
    created = set(sagemaker_jobs(sagemaker, result.prefix))
    if created != set(names):
        problems.append(
            f"SageMaker has {len(created)} jobs for {len(set(names))} answers: "
            f"missing {sorted(set(names) - created)[:5]}, extra {sorted(created - set(names))[:5]}"
        )
    creates = result.calls.get("CreateTrainingJob", 0)
    if creates != result.submissions:
        problems.append(f"{creates} CreateTrainingJob calls for {result.submissions} submissions")
    items = ledger_items(dynamodb, table, result.prefix)
    jobs = {k[4:]: v for k, v in items.items() if k.startswith("job#")}
    tokens = {k for k in items if k.startswith("token#")}
    if set(jobs) != set(names):
        problems.append(f"ledger has {len(jobs)} jobs for {len(names)} answers")
    if len(tokens) != result.submissions:
        problems.append(f"ledger has {len(tokens)} tokens for {result.submissions} submissions")
    not_started = [k for k, v in jobs.items() if v["status"]["S"] != "InProgress"]
    if not_started:
        problems.append(f"{len(not_started)} ledger jobs not InProgress, e.g. {not_started[:3]}")
    return problems


def report(summary: dict[str, Any]) -> str:
    lat, over = summary["latency"], summary["overhead"]
    return "\n".join(
        [
            f"load: {summary['submissions']} distinct submissions, {summary['workers']} threads, "
            "deployed trigger code against the moto sandbox",
            f"  throughput: {summary['throughput_per_s']:.0f} submissions/s "
            f"({summary['elapsed_s']:.1f} s)",
            f"  handler latency   p50 {fmt_ms(lat['p50_s'])}, p95 {fmt_ms(lat['p95_s'])}, "
            f"p99 {fmt_ms(lat['p99_s'])}",
            f"  handler overhead  p50 {fmt_ms(over['p50_s'])}, p95 {fmt_ms(over['p95_s'])}, "
            f"p99 {fmt_ms(over['p99_s'])} (latency minus time inside AWS calls)",
            "  AWS calls (count, mean time in the sandbox): "
            + ", ".join(
                f"{k} {n} x {fmt_ms(summary['mean_call_s'][k])}"
                for k, n in summary["calls"].items()
            ),
        ]
    )


def run(submissions: int = SUBMISSIONS, workers: int = WORKERS) -> dict[str, Any]:
    """Sandbox, deploy, load, check."""
    from sandbox.deploy import deploy, sandbox_env
    from sandbox.runner import DeployedFunction
    from sandbox.server import Sandbox

    saved = dict(os.environ)
    try:
        with Sandbox() as box:
            os.environ.update(sandbox_env(box.endpoint))
            started = time.perf_counter()
            outputs = deploy(box.endpoint)
            deploy_s = time.perf_counter() - started
            (name,) = [
                o["TriggerFunctionName"] for o in outputs.values() if "TriggerFunctionName" in o
            ]
            trigger = DeployedFunction(box.endpoint, name)
            runtime = trigger.module.RUNTIME
            with handler_output_discarded():
                result = submit_many(trigger, runtime, submissions=submissions, workers=workers)
            problems = check(result, runtime.sagemaker, runtime.dynamodb, runtime.table_name)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {**result.summary(), "deploy_s": deploy_s, "problems": problems}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=SUBMISSIONS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: does it run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    summary = run(20, 2) if args.smoke else run(args.submissions, args.workers)
    print(report(summary))
    print(f"  (deploy into the sandbox took {summary['deploy_s']:.0f} s, not counted)")
    for problem in summary["problems"]:
        print(f"  PROBLEM: {problem}")
    write_json(args.json, summary)
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
