"""``cdk synth`` of the whole app against an empty CDK app of one bucket, in the same run.

    python -m bench.synth [--reps N] [--explain] [--json PATH] [--keep DIR]

Both go through the pinned CLI (``node_modules/.bin/cdk``, what ``npx --no-install cdk`` runs)
as ``cdk synth --all -q -o <tmp>``, with the same Python. The empty app lives in a temporary
folder: ``App`` -> ``Stack`` -> ``s3.Bucket``. Runs alternate (app, empty, app, empty, ...) and
the medians are compared. Target: at most 1.3 times the empty app.

``--explain`` times the phases of both apps inside one Python process each (the CLI adds its
own start-up on top): importing the CDK (which starts the jsii node kernel), cdk-nag and the
stacks, building the constructs (templates, asset bundling), and ``app.synth()`` (all node
side: cdk-nag's rules, templates, the assembly).

app.py turns CDK's built-in CloudFormation rules engine off (it only warns, costs about 3 s,
and the suite's cfn-lint is the gate); the baseline is CDK's default empty app. The report
also gives the ratio against an empty app with the engine off, so neither number hides.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import PYTHON, ROOT, fmt_ms, median, tempdir, write_json
from testsupport import REGION

TARGET = 1.3
CDK = ROOT / "node_modules" / ".bin" / "cdk"

EMPTY_APP = """
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

app = cdk.App(builtin_cloud_formation_validation=BUILTIN)
stack = cdk.Stack(app, "Empty")
s3.Bucket(stack, "Bucket")
app.synth()
"""

# Phases inside one Python process (the CLI's own start-up comes on top). The app is built as
# app.py builds it (CDK's built-in rules engine off, cdk-nag on); the empty app is CDK's default.
PHASES_SCRIPT = """
import json, sys, time
t = [time.perf_counter()]
import aws_cdk as cdk
t.append(time.perf_counter())
if sys.argv[2] == "app":
    from cdk_nag import AwsSolutionsChecks
    from stacks.assembly import build_platform
t.append(time.perf_counter())
if sys.argv[2] == "app":
    context = json.load(open("cdk.json"))["context"]
    app = cdk.App(outdir=sys.argv[1], context=context, builtin_cloud_formation_validation=False)
    build_platform(app, default_account="123456789012", default_region="us-east-1")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
else:
    from aws_cdk import aws_s3 as s3
    app = cdk.App(outdir=sys.argv[1])
    s3.Bucket(cdk.Stack(app, "Empty"), "Bucket")
t.append(time.perf_counter())
app.synth()
t.append(time.perf_counter())
names = ["import aws_cdk (starts the jsii kernel)", "import cdk_nag + stacks",
         "build the constructs", "app.synth() (node side: cdk-nag, templates, assets)"]
print("PHASES " + json.dumps(dict(zip(names, [b - a for a, b in zip(t, t[1:])]))))
"""


def synth_env() -> dict[str, str]:
    """No credentials and no metadata service: the CLI must not wait on the network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        AWS_EC2_METADATA_DISABLED="true",
        CDK_DISABLE_VERSION_CHECK="1",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        AWS_REGION=REGION,
        AWS_DEFAULT_REGION=REGION,
    )
    return env


def _synth(cwd: Path, out: Path) -> float:
    if out.exists():
        shutil.rmtree(out)
    cmd = [str(CDK), "synth", "--all", "-q", "-o", str(out), "--no-notices", "--ci"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=synth_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        raise RuntimeError(f"cdk synth in {cwd} failed:\n{tail}")
    return elapsed


def empty_app(folder: Path, *, builtin_validation: bool = True) -> Path:
    """The baseline: CDK's defaults (``builtin_validation``), or with the rules engine off."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "app.py").write_text(EMPTY_APP.replace("BUILTIN", str(builtin_validation)))
    (folder / "cdk.json").write_text(json.dumps({"app": f"{PYTHON} app.py"}))
    return folder


def phases(work: Path, which: str) -> dict[str, float]:
    """Seconds per phase of the app (``which="app"``) or the empty app, in one process."""
    proc = subprocess.run(
        [PYTHON, "-c", PHASES_SCRIPT, str(work / f"phases-{which}.out"), which],
        cwd=ROOT,
        env={**synth_env(), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"synth phases failed:\n{proc.stderr[-5000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PHASES "))
    return json.loads(line[len("PHASES ") :])


def run(reps: int = 3, *, do_explain: bool = False, keep: Path | None = None) -> dict[str, Any]:
    work = tempdir("synth")
    try:
        empty = empty_app(work / "empty")
        bare = empty_app(work / "bare", builtin_validation=False)
        app_out = keep or work / "app.out"
        app_s, empty_s, bare_s = [], [], []
        _synth(empty, work / "warm.out")  # warm the OS file cache and node's compile cache
        for _ in range(reps):
            app_s.append(_synth(ROOT, app_out))
            empty_s.append(_synth(empty, work / "empty.out"))
            bare_s.append(_synth(bare, work / "bare.out"))
        result: dict[str, Any] = {
            "reps": reps,
            "app_s": median(app_s),
            "empty_s": median(empty_s),
            "app_all_s": app_s,
            "empty_all_s": empty_s,
            "ratio": median(app_s) / median(empty_s),
            # The same empty app with CDK's built-in rules engine off, as app.py has it.
            "bare_s": median(bare_s),
            "bare_ratio": median(app_s) / median(bare_s),
            "target": TARGET,
            "assembly": str(app_out) if keep else None,
        }
        if do_explain:
            result["phases_s"] = {"app": phases(work, "app"), "empty": phases(work, "empty")}
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(r: dict[str, Any]) -> str:
    lines = [
        f"synth (cdk synth --all -q, median of {r['reps']}):",
        f"  whole app:            {fmt_ms(r['app_s'])}",
        f"  empty app, 1 bucket:  {fmt_ms(r['empty_s'])}",
        f"  ratio app/empty: {r['ratio']:.2f}x (target <= {TARGET}x)",
    ]
    if "bare_s" in r:
        lines += [
            f"  empty app with CDK's built-in rules engine off (as app.py): {fmt_ms(r['bare_s'])}",
            f"  ratio app/that empty app: {r['bare_ratio']:.2f}x",
        ]
    if "phases_s" in r:
        app, empty = r["phases_s"]["app"], r["phases_s"]["empty"]
        lines.append("  phases in one Python process (app / empty / difference):")
        lines += [
            f"    {k:<40} {fmt_ms(v):>8} / {fmt_ms(empty[k]):>8} / {fmt_ms(v - empty[k]):>8}"
            for k, v in app.items()
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--keep", default=None, help="write the app's assembly here and keep it")
    parser.add_argument("--smoke", action="store_true", help="tiny counts: does it run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    keep = Path(args.keep) if args.keep else None
    if args.smoke:
        args.reps, args.explain = 1, False
    result = run(args.reps, do_explain=args.explain, keep=keep)
    print(report(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
