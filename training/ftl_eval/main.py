"""The evaluation run: read what to run, open the archive, measure, report.

Every metric is printed as an ``ftl_metric name=<name> value=<float> step=0`` line (the
platform's metric definitions read them) and written with the run's facts to
``<SM_OUTPUT_DATA_DIR>/evaluation.json`` (``output.tar.gz`` in S3); an evaluation of a tracked
job also logs them on that job's MLflow run as ``eval/<name>`` (``tracking``). A run that cannot
measure writes the file with ``"status": "Failed"`` and the reason, prints
``ftl_eval: error: <reason>`` and exits 2, so the platform leaves the version for review.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ftl_train import hparams
from ftl_train.callbacks import format_metric
from ftl_train.data import DataError
from ftl_train.env import read_env
from ftl_train.hparams import HyperparameterError
from ftl_train.preprocess import configure_cache
from ftl_train.run import setup_logging

from . import arguments, artifact, harness, tracking
from .artifact import ArtifactError
from .harness import HarnessError

logger = logging.getLogger("ftl_eval")

RESULT_FILE = "evaluation.json"
_ERRORS = (ArtifactError, HarnessError, HyperparameterError, DataError)


def _channel(channels: Mapping[str, str], name: str, what: str) -> str:
    path = channels.get(name.lower())
    if not path or not os.path.isdir(path):
        raise DataError(f"{what}: no {name} channel (channels: {', '.join(sorted(channels))})")
    return path


def measure(
    args: arguments.EvalArgs,
    training: Mapping[str, Any],
    channels: Mapping[str, str],
    environ: Mapping[str, str],
    workdir: str,
) -> dict[str, float]:
    """Every metric the policy asks for."""
    hp = hparams.parse(None, None, dict(training))
    files = artifact.open_model(
        args.archive_kind,
        channels.get(artifact.ARCHIVE_CHANNEL),
        channels.get(artifact.BASE_CHANNEL),
        workdir,
    )
    metrics: dict[str, float] = {}
    if args.task_metrics_channel:
        from .task_metrics import task_metrics

        path = _channel(channels, args.task_metrics_channel, "task metrics")
        metrics.update(task_metrics(hp, files, path))
    if args.uses_harness:
        harness.ensure_harness(environ)
        include, task_root = [], None
        if args.lm_eval_task_channel:
            task_root = _channel(channels, args.lm_eval_task_channel, "lm-eval tasks")
            include.append(task_root)
        golden = {
            name: _channel(channels, f"{harness.GOLDEN_PREFIX}{name}", f"golden set {name}")
            for name in args.golden_sets
        }
        if golden:
            include.append(harness.write_golden_tasks(golden, workdir))
        tasks = [*args.lm_eval_tasks, *(f"{harness.GOLDEN_PREFIX}{n}" for n in golden)]
        metrics.update(
            harness.run_harness(
                files,
                tasks=tasks,
                include=include,
                num_fewshot=args.num_fewshot,
                limit=args.limit,
                batch_size=hp.per_device_eval_batch_size,
                task_root=task_root,
            )
        )
    return metrics


def _write(path: str, body: Mapping[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(body, fh, indent=2, sort_keys=True, default=str)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    setup_logging(True)
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    sm = read_env(environ)
    configure_cache(environ.get("FTL_CACHE_DIR"))
    out_file = os.path.join(sm.output_data_dir, RESULT_FILE)
    start = time.time()
    body: dict[str, Any] = {"training_job": environ.get("TRAINING_JOB_NAME", "")}
    try:
        args, training = arguments.read(argv, environ)
        body.update(archive_kind=args.archive_kind, policy=args.as_dict())
        with tempfile.TemporaryDirectory(prefix="ftl-eval-", dir=_workdir(environ)) as work:
            metrics = measure(args, training, sm.channels, environ, work)
    except _ERRORS as exc:
        body.update(status="Failed", reason=str(exc), seconds=round(time.time() - start, 3))
        _write(out_file, body)
        print(f"ftl_eval: error: {exc}", file=sys.stderr, flush=True)
        tracking.log_results({}, "Failed", environ, reason=str(exc))
        return 2
    finite = {k: v for k, v in sorted(metrics.items()) if math.isfinite(v)}
    for name, value in finite.items():
        print(format_metric(name, value, 0), flush=True)
    body.update(
        status="Completed",
        metrics=finite,
        not_finite=sorted(set(metrics) - set(finite)),
        seconds=round(time.time() - start, 3),
    )
    _write(out_file, body)
    logger.info("evaluation done: %d metrics in %.1f s", len(finite), body["seconds"])
    tracking.log_results(finite, "Completed", environ)
    return 0


def _workdir(environ: Mapping[str, str]) -> str:
    path = environ.get("FTL_CACHE_DIR") or tempfile.gettempdir()
    os.makedirs(path, exist_ok=True)
    return path
