"""Submit latency in queue mode against direct mode, AWS stubbed (issue 10).

    python -m bench.queue_submit [--iterations N] [--json PATH]

The trigger's real handler, loaded twice from the deployed asset's files: once in direct mode
(``FTL_SCHEDULER`` unset) and once in queue mode (``FTL_SCHEDULER=queue``), each with botocore's
Stubber answering every AWS call (requests are still validated and serialized by botocore
against the trimmed models; nothing is sent). Each submit is the same request
(``bench._common.REQUEST``) with a fresh ``client_token``:

* direct: token look-up, ledger claim, ``CreateTrainingJob``, ledger update;
* queue: token look-up, the 10 KiB payload check, ledger claim, ``SubmitServiceJob``, the
  merged and conditional ledger update.

The two modes run interleaved in rounds, so a busy moment on a shared machine hits both. The
baseline is direct mode from the same run; the ratio is queue / direct (above 1: slower).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import shutil
import sys
import time
import uuid
from typing import Any

from bench._common import (
    REQUEST,
    fmt_ms,
    handler_output_discarded,
    offline_env,
    percentile,
    tempdir,
    trigger_asset,
    write_json,
)
from jobmodel.capacity.scheduler import SchedulerConfig
from testsupport import ACCOUNT, REGION, TRIGGER_ENV

QUEUE_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/ftl-training"
SAGEMAKER_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bench"
BATCH_JOB_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/"


class _Context:
    aws_request_id = "bench"
    invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ftl-trigger"


def _load(asset: Any, name: str, env: dict[str, str]) -> Any:
    """Import the asset's ``handler.py`` as module ``name`` with ``env`` (its cold start)."""
    os.environ.clear()
    os.environ.update(env)
    spec = importlib.util.spec_from_file_location(name, asset / "handler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Mode:
    """One handler with Stubbers on its clients; ``queue`` answers its calls for one submit."""

    def __init__(self, module: Any, queued: bool) -> None:
        from botocore.stub import Stubber

        self.module, self.queued = module, queued
        runtime = module.RUNTIME
        self.dynamodb = Stubber(runtime.dynamodb)
        self.backend = Stubber(runtime.batch if queued else runtime.sagemaker)
        self.dynamodb.activate()
        self.backend.activate()
        self.status = "Queued" if queued else "InProgress"

    def answers(self) -> None:
        self.dynamodb.add_response("get_item", {})
        self.dynamodb.add_response("transact_write_items", {})
        if self.queued:
            job_id = uuid.uuid4().hex
            self.backend.add_response(
                "submit_service_job",
                {"jobId": job_id, "jobName": "bench", "jobArn": BATCH_JOB_ARN + job_id},
            )
        else:
            self.backend.add_response("create_training_job", {"TrainingJobArn": SAGEMAKER_ARN})
        self.dynamodb.add_response("update_item", {})

    def submit(self) -> float:
        self.answers()
        event = {**REQUEST, "client_token": uuid.uuid4().hex}
        started = time.perf_counter()
        result = self.module.handler(event, _Context())
        elapsed = time.perf_counter() - started
        if result.get("status") != self.status:
            raise RuntimeError(f"unexpected handler result: {result}")
        return elapsed

    def check(self) -> None:
        self.dynamodb.assert_no_pending_responses()
        self.backend.assert_no_pending_responses()


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_s": percentile(values, 50),
        "p90_s": percentile(values, 90),
        "p99_s": percentile(values, 99),
        "mean_s": sum(values) / len(values),
    }


def run(iterations: int = 2000) -> dict[str, Any]:
    work = tempdir("queue")
    asset = trigger_asset(work / "asset")
    saved = dict(os.environ)
    sys.path.insert(0, str(asset))
    try:
        base = offline_env(TRIGGER_ENV)
        queue_env = SchedulerConfig(scheduler="queue", job_queue_arn=QUEUE_ARN).to_env()
        direct = Mode(_load(asset, "handler_direct", base), queued=False)
        queued = Mode(_load(asset, "handler_queue", base | queue_env), queued=True)
        times: dict[str, list[float]] = {"direct": [], "queue": []}
        with handler_output_discarded():
            for _ in range(50):  # warm-up
                direct.submit()
                queued.submit()
            gc.collect()
            for _ in range(iterations):
                times["direct"].append(direct.submit())
                times["queue"].append(queued.submit())
        direct.check()
        queued.check()
    finally:
        sys.path.remove(str(asset))
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(work, ignore_errors=True)
    d, q = _stats(times["direct"]), _stats(times["queue"])
    return {
        "direct": d,
        "queue": q,
        "ratio_p50": q["p50_s"] / d["p50_s"],
        "ratio_p99": q["p99_s"] / d["p99_s"],
    }


def report(r: dict[str, Any]) -> str:
    def row(label: str, s: dict[str, float]) -> str:
        return (
            f"  {label:<36} p50 {fmt_ms(s['p50_s']):>9}  p90 {fmt_ms(s['p90_s']):>9}"
            f"  p99 {fmt_ms(s['p99_s']):>9}  n={s['n']}"
        )

    return "\n".join(
        [
            "submit latency, AWS stubbed (the trigger's handler from its asset):",
            row("direct mode (CreateTrainingJob)", r["direct"]),
            row("queue mode (SubmitServiceJob)", r["queue"]),
            f"  ratio queue/direct: p50 {r['ratio_p50']:.2f}x, p99 {r['ratio_p99']:.2f}x",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = run(args.iterations)
    print(report(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
