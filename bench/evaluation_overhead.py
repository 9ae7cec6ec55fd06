"""What evaluating every Completed job adds (issue 36): the evaluation job's time and cost as a
ratio of the training job's, for each shipped template's default evaluation policy.

    python -m bench.evaluation_overhead [--n N] [--only TEMPLATE ...] [--json PATH] [--smoke]

Two figures per template, each a ratio evaluation / training:

* **cost, worst case** (no run): what the platform reserves against the team's month for
  each job: the training job at the template's defaults (instance type, count,
  ``max_runtime_seconds``) and the evaluation job as its policy renders it (one instance of
  the policy's type, or the template's, for the policy's ``max_runtime_seconds``), in
  instance-hours, and in USD where the platform's price table (``jobmodel.money.pricing``:
  the shipped file with ``FTL_PRICES`` over it, as the trigger reads it) knows both
  on-demand prices. The shipped file knows none (its note says why), so without
  ``FTL_PRICES`` the USD ratio is the instance-hour ratio times price(evaluation type) /
  price(training type), exact where the two types are the same.
* **time, measured here** (same run, same machine): the template's training entrypoint on
  N generated examples for one epoch, then its evaluation entrypoint on N held-out
  examples, each a fresh process of this Python as a container starts it, with the image
  matrix's tiny model of the template's family (``bench/_eval_overhead_run.py``). With tiny
  models both are dominated by what every job pays once (interpreter and library imports,
  tokenization, model load); a real job's ratio also scales with the held-out split's size
  against the training set's times the epochs, which this machine cannot run.

Templates whose default policy runs nothing (``llm-lora``, ``llm-sft``: their teams add
golden sets) and templates without a policy are listed as such.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench._common import PYTHON, ROOT, tempdir

DRIVER = ROOT / "bench" / "_eval_overhead_run.py"
REGION = "us-east-1"


def _prices() -> Any:
    from jobmodel.money.pricing import PriceTable

    return PriceTable.from_env(os.environ)


def priced(name: str) -> dict[str, Any]:
    """The worst-case costs of the template's default job and of its evaluation job."""
    from jobmodel import shipped_catalog
    from jobmodel.money.pricing import estimate_max_cost_usd

    spec = shipped_catalog()[name]
    policy = spec.evaluation
    table = _prices()
    train_price, _ = table.hourly(REGION, spec.default_instance_type)
    train = estimate_max_cost_usd(
        train_price, spec.default_instance_count, spec.default_runtime_seconds
    )
    train_hours = spec.default_instance_count * spec.default_runtime_seconds / 3600
    row: dict[str, Any] = {
        "template": name,
        "training": f"{spec.default_instance_count} x {spec.default_instance_type}, "
        f"{spec.default_runtime_seconds // 3600} h",
        "train_instance_hours": train_hours,
        "train_max_usd": train,
    }
    if policy is None or not policy.runs_something:
        row["policy"] = "none" if policy is None else "runs nothing by default"
        return row
    eval_type = policy.instance_type or spec.default_instance_type
    eval_price, _ = table.hourly(REGION, eval_type)
    evaluation = estimate_max_cost_usd(eval_price, 1, policy.max_runtime_seconds)
    eval_hours = policy.max_runtime_seconds / 3600
    row.update(
        policy="default",
        same_type=eval_type == spec.default_instance_type,
        eval_instance_hours=eval_hours,
        hours_ratio=round(eval_hours / train_hours, 4),
        evaluation=f"1 x {eval_type}, {policy.max_runtime_seconds // 3600} h"
        + (", spot" if policy.spot else ""),
        eval_max_usd=evaluation,
        cost_ratio=round(evaluation / train, 4) if evaluation and train else None,
    )
    return row


def _cost_text(row: dict[str, Any]) -> str:
    """The worst case as instance-hours, and in USD where both prices are known."""
    text = (
        f"worst case {row['eval_instance_hours']:g} / {row['train_instance_hours']:g} "
        f"instance-hours = {row['hours_ratio']:.4f}x ({row['evaluation']} vs {row['training']})"
    )
    if row.get("cost_ratio") is not None:
        return (
            text
            + f", {row['eval_max_usd']:.2f} / {row['train_max_usd']:.2f} USD = "
            + (f"{row['cost_ratio']:.4f}x")
        )
    if row["same_type"]:
        return text + ", the same instance type: the USD ratio is the same"
    return text + ", USD: prices unknown (set FTL_PRICES)"


def spec_for(name: str, n: int, work: Path) -> dict[str, Any]:
    """The driver's SPEC: the rendered training hyperparameters and the evaluation's."""
    sys.path.insert(0, str(ROOT))
    from jobmodel.after_training.archive import archive_kind
    from jobmodel.evaluation import arguments
    from tests.images.matrix import ROWS
    from tests.images.test_image_matrix import rendered

    spec, request = rendered(name)
    policy = spec.evaluation
    assert policy is not None and policy.task_metrics_channel is not None
    training = {k: json.loads(v) for k, v in request["HyperParameters"].items()}
    return {
        "work": str(work),
        "family": ROWS[name].family,
        "n": n,
        "training": training,
        "evaluation": arguments.hyperparameters(policy, archive_kind(training), training),
        "channel": policy.task_metrics_channel,
    }


def measured(name: str, n: int, reps: int) -> dict[str, Any]:
    """Median train and evaluation seconds over ``reps`` pairs (each pair in fresh folders)."""
    trains, evals = [], []
    for rep in range(reps):
        tmp = tempdir("eval-overhead")
        try:
            work = tmp / f"{name}-{rep}"
            spec_path = tmp / "spec.json"
            spec_path.write_text(json.dumps(spec_for(name, n, work)))
            done = subprocess.run(
                [PYTHON, str(DRIVER), str(spec_path)],
                capture_output=True,
                text=True,
                timeout=1800,
                cwd=str(ROOT),
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        lines = [x for x in done.stdout.splitlines() if x.startswith("FTL_EVAL_OVERHEAD ")]
        if done.returncode != 0 or not lines:
            raise SystemExit(
                f"{name}: the timed pair failed:\n{(done.stdout + done.stderr)[-3000:]}"
            )
        report = json.loads(lines[-1].split(" ", 1)[1])
        trains.append(report["train_s"])
        evals.append(report["eval_s"])
    train_s, eval_s = statistics.median(trains), statistics.median(evals)
    return {"train_s": train_s, "eval_s": eval_s, "time_ratio": round(eval_s / train_s, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=256, help="examples in each split")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="one template, 16 examples")
    args = ap.parse_args(argv)
    from jobmodel import shipped_catalog

    names = sorted(shipped_catalog())
    if args.smoke:
        args.only, args.n, args.reps = ["distilbert-spot"], 16, 1
    rows = [priced(name) for name in names if not args.only or name in args.only]
    print(f"evaluation / training, per shipped template (prices: {REGION}, on-demand worst case)")
    for row in rows:
        if row["policy"] != "default":
            print(f"  {row['template']:<34} no evaluation job: {row['policy']}")
            continue
        timing = measured(row["template"], args.n, args.reps)
        row.update(timing)
        print(
            f"  {row['template']:<34} {_cost_text(row)}; time here "
            f"{timing['eval_s']:.1f} / {timing['train_s']:.1f} s = "
            f"{timing['time_ratio']:.2f}x (n={args.n})",
            flush=True,
        )
    done = [r for r in rows if "time_ratio" in r]
    if done:
        hours = statistics.median(r["hours_ratio"] for r in done)
        time_ratio = statistics.median(r["time_ratio"] for r in done)
        print(
            f"ratio evaluation/training (median of {len(done)} templates): "
            f"instance-hours worst case {hours:.4f}x, time here {time_ratio:.2f}x"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
