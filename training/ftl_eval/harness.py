"""lm-evaluation-harness for causal LMs: the policy's tasks from local task files, and the
team's golden sets, never a hub download.

``requirements-eval.txt`` pins ``lm_eval``; :func:`ensure_harness` installs it when the image
lacks it (one process per node), so only evaluation jobs that run the harness need PyPI.
Task files are the YAML files in the task channel, with their data beside them (read through
``dataset_path: json`` and ``data_files`` paths relative to the channel's root). A golden
set is JSON Lines of ``{"prompt", "completion"}``; it becomes a ``generate_until`` task
scored by exact match (greedy decoding, surrounding whitespace ignored). Metric names:
``lmeval_<task>_<metric>`` and ``golden_<name>_<metric>``, the filter named only when it is
not the default.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ftl_train.callbacks import metric_name

from .artifact import ModelFiles

logger = logging.getLogger("ftl_eval")

REQUIREMENTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "requirements-eval.txt")
GOLDEN_PREFIX = "golden_"
MAX_NEW_TOKENS = 64
_DEFAULT_FILTERS = ("none", "strip")
_NOT_METRICS = ("alias", "sample_len", "samples")  # counts lm-eval reports beside metrics


class HarnessError(RuntimeError):
    """lm-evaluation-harness could not be installed or run the tasks."""


def ensure_harness(environ: Mapping[str, str]) -> None:
    """Install the pinned lm_eval when the image lacks it (or raise ``HarnessError``)."""
    if importlib.util.find_spec("lm_eval") is not None:
        return
    import fcntl
    import tempfile

    lock = os.path.join(tempfile.gettempdir(), "ftl_install_eval.lock")
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        importlib.invalidate_caches()
        if importlib.util.find_spec("lm_eval") is not None:
            return
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
        done = subprocess.run(
            [*cmd, "-r", REQUIREMENTS], capture_output=True, text=True, env=dict(environ)
        )
    if done.returncode != 0:
        raise HarnessError(
            "installing requirements-eval.txt failed (an evaluation without PyPI access needs "
            f"lm_eval in its image): {done.stderr.strip()[-300:]}"
        )
    importlib.invalidate_caches()
    logger.info("installed lm_eval in %.1f s", time.perf_counter() - start)


def golden_files(channel: str) -> list[str]:
    """The JSON Lines files of a golden set's channel."""
    found = sorted(
        p
        for pattern in ("*.jsonl", "*.json", "**/*.jsonl")
        for p in glob.glob(os.path.join(channel, pattern), recursive=True)
    )
    return list(dict.fromkeys(found))


def golden_task(name: str, files: Sequence[str]) -> dict[str, Any]:
    """The lm-eval task config that scores a golden set (a YAML file's content)."""
    return {
        "task": f"{GOLDEN_PREFIX}{name}",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": list(files)}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "{{prompt}}",
        "doc_to_target": "{{completion}}",
        "target_delimiter": "",
        "generation_kwargs": {
            "until": ["\n"],
            "do_sample": False,
            "max_gen_toks": MAX_NEW_TOKENS,
        },
        "metric_list": [
            {
                "metric": "exact_match",
                "aggregation": "mean",
                "higher_is_better": True,
                "regexes_to_ignore": ["^\\s+", "\\s+$"],
            }
        ],
    }


def write_golden_tasks(golden: Mapping[str, str], workdir: str) -> str:
    """One task file per golden set (name -> channel folder) in a new folder; its path."""
    folder = os.path.join(workdir, "golden_tasks")
    os.makedirs(folder, exist_ok=True)
    for name, channel in golden.items():
        files = golden_files(channel)
        if not files:
            raise HarnessError(f"the golden set {name} ({channel}) holds no JSON Lines file")
        with open(os.path.join(folder, f"{GOLDEN_PREFIX}{name}.yaml"), "w") as fh:
            json.dump(golden_task(name, files), fh, indent=1)  # JSON is YAML
    return folder


def flatten(results: Mapping[str, Any]) -> dict[str, float]:
    """lm-eval's ``results`` -> ``{metric name: value}`` (stderr entries left out)."""
    out: dict[str, float] = {}
    for task, values in results.items():
        prefix = task if task.startswith(GOLDEN_PREFIX) else f"lmeval_{task}"
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            metric, _, filt = str(key).partition(",")
            if metric.endswith("_stderr") or metric in _NOT_METRICS:
                continue
            suffix = metric if filt in _DEFAULT_FILTERS or not filt else f"{metric}_{filt}"
            out[metric_name(f"{prefix}_{suffix}")] = float(value)
    return out


def run_harness(
    files: ModelFiles,
    *,
    tasks: Sequence[str],
    include: Sequence[str],
    num_fewshot: int,
    limit: int | None,
    batch_size: int = 1,
    task_root: str | None = None,
) -> dict[str, float]:
    """Run ``tasks`` (defined in the ``include`` folders) on the model; flat metrics. A task
    file's relative ``data_files`` are read from ``task_root`` (the task channel)."""
    here = os.getcwd()
    if task_root:
        os.chdir(task_root)
    try:
        return _run(files, tasks, include, num_fewshot, limit, batch_size)
    finally:
        os.chdir(here)


def _run(
    files: ModelFiles,
    tasks: Sequence[str],
    include: Sequence[str],
    num_fewshot: int,
    limit: int | None,
    batch_size: int,
) -> dict[str, float]:
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model_args: dict[str, Any] = {"pretrained": files.model, "tokenizer": files.tokenizer}
    if files.kind == "lora-adapter":
        model_args["peft"] = files.adapter
    lm = HFLM(device=device, batch_size=batch_size, dtype="auto", **model_args)
    manager = TaskManager(include_path=list(include), include_defaults=False)
    known = set(manager.all_tasks)
    missing = [t for t in tasks if t not in known]
    if missing:
        raise HarnessError(
            f"no task file defines {', '.join(missing)} (tasks found: {sorted(known)[:20]})"
        )
    results = simple_evaluate(
        model=lm,
        tasks=list(tasks),
        num_fewshot=num_fewshot or None,
        limit=limit,
        task_manager=manager,
        log_samples=False,
        bootstrap_iters=0,
    )
    if not results or "results" not in results:
        raise HarnessError("lm-evaluation-harness returned no results")
    return flatten(results["results"])
