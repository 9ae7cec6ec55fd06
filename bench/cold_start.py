"""Trigger cold start against the SageMaker Python SDK, in fresh processes.

    python -m bench.cold_start [--reps N] [--explain] [--json PATH]

* **A, the launcher**: a fresh interpreter in a copy of the deployed trigger asset (built by the
  launcher stack's own bundling code: trimmed botocore models in ``botocore_data/`` and
  precompiled bytecode included; ``PYTHONDONTWRITEBYTECODE=1`` because Lambda's ``/var/task``
  is read-only), with the stack's environment, runs ``import handler``: the catalog is loaded,
  the platform configuration read and the SageMaker and DynamoDB clients built (module-level
  ``RUNTIME``).
* **B, the SDK**: a fresh interpreter imports ``sagemaker.train.ModelTrainer``, builds a
  ``Session`` (whose SageMaker client is built) and a ``ModelTrainer`` configured for the same
  job, ready to ``train()``. Offline: see ``bench/sdk_side.py``.

Both are timed from just before the spawn to the moment the process says it is ready; the
interleaved runs' medians are compared. ``--explain`` measures where A's time goes
(``-X importtime``, cProfile of the module body) and what each of the asset's optimisations
saves (the asset without its bytecode, without its trimmed models, without both).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import (
    PYTHON,
    ROOT,
    Timed,
    fmt_ms,
    median,
    offline_env,
    tempdir,
    time_process,
    trigger_asset,
    write_json,
)
from ftl_constructs.bundling import BOTOCORE_DATA
from testsupport import REGION, TRIGGER_ENV

TARGET = 8.0

# Every script ends by printing READY with its in-process time and its CPU time so far.
READY = """
import json as _json
_ready = {"inner_s": time.perf_counter() - t0, "cpu_s": time.process_time()}
print("READY " + _json.dumps(_ready), flush=True)
"""

A_SCRIPT = (
    """
import time
t0 = time.perf_counter()
import handler
assert handler.RUNTIME.sagemaker.meta.service_model.service_name == "sagemaker"
assert handler.RUNTIME.catalog
"""
    + READY
)

B_SCRIPT = (
    """
import time
t0 = time.perf_counter()
import json, sys
sys.path.insert(0, ROOT)
from bench import sdk_side
with open(RENDERED) as fh:
    rendered = json.load(fh)
session = sdk_side.sdk_session()
trainer = sdk_side.model_trainer(rendered, session)
assert session.sagemaker_client.meta.service_model.service_name == "sagemaker"
"""
    + READY
)

EMPTY_SCRIPT = "import time\nt0 = time.perf_counter()\n" + READY


def a_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return offline_env({**TRIGGER_ENV, "PYTHONDONTWRITEBYTECODE": "1", **(extra or {})})


def measure(reps: int, asset: Path, rendered_path: Path) -> dict[str, list[Timed]]:
    """Interleaved A/B runs (a shared, noisy CPU then hits both alike)."""
    from bench.sdk_side import prepare_environment

    b_env = offline_env(prepare_environment())
    b_script = B_SCRIPT.replace("ROOT", repr(str(ROOT))).replace(
        "RENDERED", repr(str(rendered_path))
    )
    runs: dict[str, list[Timed]] = {"A": [], "B": []}
    # One untimed run of each warms the OS file cache.
    time_process(A_SCRIPT, env=a_env(), cwd=asset)
    time_process(b_script, env=b_env, cwd=ROOT)
    for _ in range(reps):
        runs["A"].append(time_process(A_SCRIPT, env=a_env(), cwd=asset))
        runs["B"].append(time_process(b_script, env=b_env, cwd=ROOT))
    return runs


# ---------------------------------------------------------------------------------- explain
def _import_breakdown(asset: Path) -> dict[str, float]:
    """``python -X importtime -c 'import handler'``: cumulative ms of the notable imports."""
    proc = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", "import handler"],
        env=a_env(),
        cwd=asset,
        capture_output=True,
        text=True,
        check=True,
    )
    cumulative: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _self_us, cum_us, name = (p.strip() for p in line.split(":", 1)[1].split("|"))
        if not cum_us.isdigit():
            continue
        cumulative[name] = int(cum_us) / 1000
    picks = {
        "botocore.session (incl. urllib3, http.client, ssl)": "botocore.session",
        "jobmodel (from bytecode)": "jobmodel",
        "ftl_trigger.adapters/errors/ledger/service (from bytecode)": None,
        "handler module total": "handler",
    }
    result: dict[str, float] = {}
    for label, module in picks.items():
        if module is not None:
            result[label] = cumulative.get(module, 0.0)
    result["ftl_trigger.adapters/errors/ledger/service (from bytecode)"] = sum(
        cumulative.get(m, 0.0)
        for m in ("ftl_trigger.adapters", "ftl_ledger.ledger", "ftl_trigger.actions")
    ) - cumulative.get("jobmodel", 0.0)
    return result


PROFILE_SCRIPT = """
import cProfile, sys
import botocore.session, botocore.config, jobmodel  # imports: see -X importtime
profile = cProfile.Profile()
profile.enable()
import handler
profile.disable()
profile.dump_stats(sys.argv[1])
"""


def _profile_breakdown(asset: Path, out: Path) -> dict[str, float]:
    """cProfile of the module body (imports done first): where client creation spends time."""
    stats_path = out / "handler.prof"
    subprocess.run(
        [PYTHON, "-c", PROFILE_SCRIPT, str(stats_path)],
        env=a_env(),
        cwd=asset,
        check=True,
        capture_output=True,
    )
    stats = pstats.Stats(str(stats_path), stream=io.StringIO())
    wanted = {
        "import handler once boto3 is in (ftl_trigger + RUNTIME)": ("handler.py", "<module>"),
        "create_client x2 (SageMaker, DynamoDB)": ("botocore/session.py", "create_client"),
        "json decode (service models, endpoints, rules)": ("json/decoder.py", "raw_decode"),
        "gzip (full service-2.json.gz; none with trimmed models)": ("gzip.py", "read"),
        "list_available_services (only botocore_data/ is listed)": (
            "botocore/loaders.py",
            "list_available_services",
        ),
        "endpoint resolver (endpoints.json)": ("botocore/session.py", "create_default_resolver"),
        "event handler registration": ("botocore/hooks.py", "register"),
        "load_catalog": ("jobmodel/templates/catalog.py", "load_catalog"),
    }
    result: dict[str, float] = {}
    for label, (path, func) in wanted.items():
        total = 0.0
        for (filename, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
            if filename.endswith(path) and name == func:
                total = max(total, row[3])  # cumulative time
        result[label] = total * 1000
    return result


def _json_costs() -> dict[str, float]:
    import botocore

    data = Path(botocore.__file__).parent / "data"
    costs: dict[str, float] = {}
    for label, rel in (
        ("sagemaker service-2.json.gz", "sagemaker/2017-07-24/service-2.json.gz"),
        ("dynamodb service-2.json.gz", "dynamodb/2012-08-10/service-2.json.gz"),
        ("endpoints.json", "endpoints.json"),
    ):
        raw = (data / rel).read_bytes()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            json.loads(gzip.decompress(raw) if rel.endswith(".gz") else raw)
            samples.append(time.perf_counter() - t0)
        costs[f"{label} ({len(raw) // 1024} KiB): gunzip + json.loads"] = median(samples) * 1000
    return costs


def _without(asset: Path, dest: Path, *parts: str) -> Path:
    shutil.copytree(asset, dest, ignore=shutil.ignore_patterns(*parts))
    return dest


def explain(reps: int, asset: Path, work: Path) -> dict[str, Any]:
    """Where A's time goes, and what each of the asset's optimisations saves (median of
    ``reps``; every variant is the deployed asset with parts taken away)."""
    no_pyc = _without(asset, work / "asset-no-pyc", "__pycache__")
    no_models = _without(asset, work / "asset-no-models", BOTOCORE_DATA)
    neither = _without(asset, work / "asset-neither", "__pycache__", BOTOCORE_DATA)
    variants = {
        "interpreter start-up only": (EMPTY_SCRIPT, asset),
        "A as deployed": (A_SCRIPT, asset),
        "A without its bytecode (compiled at every cold start)": (A_SCRIPT, no_pyc),
        "A without trimmed models (botocore's full data)": (A_SCRIPT, no_models),
        "A without either": (A_SCRIPT, neither),
    }
    samples: dict[str, list[Timed]] = {name: [] for name in variants}
    for _ in range(reps):
        for name, (script, cwd) in variants.items():
            samples[name].append(time_process(script, env=a_env(), cwd=cwd))
    data = asset / BOTOCORE_DATA
    return {
        "variants_ms": {
            name: (median(t.wall_s for t in runs) * 1000, median(t.cpu_s for t in runs) * 1000)
            for name, runs in samples.items()
        },
        "imports_ms": _import_breakdown(asset),
        "profile_ms": _profile_breakdown(asset, work),
        "json_ms": _json_costs(),
        "trimmed_model_kib": {
            p.parent.parent.name: p.stat().st_size // 1024
            for p in sorted(data.glob("*/*/service-2.json"))
        },
    }


# --------------------------------------------------------------------------------------- main
def run(reps: int = 7, *, do_explain: bool = False) -> dict[str, Any]:
    from bench.sdk_side import rendered_example

    work = tempdir("cold")
    try:
        asset = trigger_asset(work / "asset")
        rendered_path = work / "rendered.json"
        rendered_path.write_text(json.dumps(rendered_example()))
        runs = measure(reps, asset, rendered_path)
        a_wall = median(t.wall_s for t in runs["A"])
        b_wall = median(t.wall_s for t in runs["B"])
        result: dict[str, Any] = {
            "reps": reps,
            "python": sys.version.split()[0],
            "A_wall_s": a_wall,
            "B_wall_s": b_wall,
            "A_inner_s": median(t.inner_s for t in runs["A"]),
            "B_inner_s": median(t.inner_s for t in runs["B"]),
            "A_cpu_s": median(t.cpu_s for t in runs["A"]),
            "B_cpu_s": median(t.cpu_s for t in runs["B"]),
            "A_all_s": [t.wall_s for t in runs["A"]],
            "B_all_s": [t.wall_s for t in runs["B"]],
            "ratio": b_wall / a_wall,
            "cpu_ratio": median(t.cpu_s for t in runs["B"]) / median(t.cpu_s for t in runs["A"]),
            "target": TARGET,
        }
        if do_explain:
            result["explain"] = explain(max(5, reps // 2), asset, work)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(result: dict[str, Any]) -> str:
    lines = [
        f"cold start (fresh processes, median of {result['reps']}, Python {result['python']}):",
        f"  A launcher  import handler -> RUNTIME ready: {fmt_ms(result['A_wall_s'])} "
        f"(in-process {fmt_ms(result['A_inner_s'])}, CPU {fmt_ms(result['A_cpu_s'])})",
        f"  B SDK       import + Session + ModelTrainer: {fmt_ms(result['B_wall_s'])} "
        f"(in-process {fmt_ms(result['B_inner_s'])}, CPU {fmt_ms(result['B_cpu_s'])})",
        f"  ratio B/A: {result['ratio']:.1f}x wall, {result['cpu_ratio']:.1f}x CPU "
        f"(target >= {TARGET:.0f}x)",
    ]
    ex = result.get("explain")
    if ex:
        lines.append("  where A's time goes (-X importtime, cumulative):")
        lines += [f"    {k}: {v:.0f} ms" for k, v in ex["imports_ms"].items()]
        lines.append("  module body (cProfile, cumulative; overlaps):")
        lines += [f"    {k}: {v:.0f} ms" for k, v in ex["profile_ms"].items()]
        lines += [f"    {k}: {v:.0f} ms" for k, v in ex["json_ms"].items()]
        lines.append("  the asset's optimisations (fresh process to ready, median wall / CPU):")
        lines += [
            f"    {k}: {wall:.0f} ms / {cpu:.0f} ms" for k, (wall, cpu) in ex["variants_ms"].items()
        ]
        lines.append(
            "    trimmed service models shipped: "
            + ", ".join(f"{k} {v} KiB" for k, v in ex["trimmed_model_kib"].items())
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--explain", action="store_true", help="break A's time down")
    parser.add_argument("--smoke", action="store_true", help="tiny counts: does it run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    result = run(1) if args.smoke else run(args.reps, do_explain=args.explain)
    print(report(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
