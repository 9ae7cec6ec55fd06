"""Run every benchmark and write a short table to ``bench/RESULTS.md`` (and stdout).

    python -m bench.run_all [--skip NAME ...] [--only NAME ...] [--out PATH]

Each benchmark runs in its own process (``python -m bench.<name> --json ...``) so one cannot
skew or break another; its full report is printed as it finishes, and a failed benchmark is a
row saying so rather than the end of the run. Names: cold_start, request_overhead,
queue_submit, synth, asset_size, load, train_throughput. About 4-5 minutes on two shared cores.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._common import PYTHON, ROOT, fmt_bytes, fmt_ms, tempdir

BENCHES: dict[str, list[str]] = {
    "cold_start": ["--reps", "7", "--explain"],
    "request_overhead": [],
    "queue_submit": [],
    "synth": ["--reps", "3", "--explain"],
    "asset_size": [],  # reads the assembly synth kept (or synthesizes its own)
    "load": [],
    "train_throughput": [],
}
TIMEOUT_S = {"train_throughput": 300, "load": 400, "synth": 300}


def run_one(name: str, args: list[str], json_path: Path) -> tuple[dict[str, Any] | None, str]:
    module = f"bench.{name}"
    if not (ROOT / "bench" / f"{name}.py").exists():
        return None, "not present"
    cmd = [PYTHON, "-m", module, *args, "--json", str(json_path)]
    print(f"\n$ python -m {module} {' '.join(args)}", flush=True)
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S.get(name, 240)
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {TIMEOUT_S.get(name, 240)} s"
    report = "\n".join(
        line
        for line in proc.stdout.splitlines()
        if not line.startswith(("No Moto CloudFormation", "b'"))
    )
    print(report, flush=True)
    print(f"  ({time.perf_counter() - started:.0f} s)", flush=True)
    if proc.returncode != 0 or not json_path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return None, f"failed (exit {proc.returncode}): {' | '.join(tail)[:300]}"
    return json.loads(json_path.read_text()), report


def _synth_spread(r: dict[str, Any]) -> str:
    """Lowest and highest ratio of the paired (app, empty) runs."""
    pairs = [a / e for a, e in zip(r["app_all_s"], r["empty_all_s"], strict=True)]
    return f"{min(pairs):.2f}-{max(pairs):.2f}x"


def _queue_submit_row(r: dict[str, Any]) -> list[str]:
    queue, direct = r["queue"], r["direct"]
    return [
        "submit in queue mode, AWS stubbed (p50 / p99)",
        f"{fmt_ms(queue['p50_s'])} / {fmt_ms(queue['p99_s'])}",
        f"direct mode {fmt_ms(direct['p50_s'])} / {fmt_ms(direct['p99_s'])}",
        f"{r['ratio_p50']:.2f}x / {r['ratio_p99']:.2f}x direct's time",
        "-",
        "-",
    ]


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def rows(results: dict[str, tuple[dict[str, Any] | None, str]]) -> list[list[str]]:
    table: list[list[str]] = []

    def missing(name: str, label: str) -> None:
        table.append([label, "-", "-", "-", "-", results[name][1]])

    r, _ = results.get("cold_start", (None, ""))
    if r:
        table.append(
            [
                "trigger cold start (fresh process to ready)",
                fmt_ms(r["A_wall_s"]),
                f"SDK {fmt_ms(r['B_wall_s'])}",
                f"{r['ratio']:.1f}x faster ({r['cpu_ratio']:.1f}x CPU); "
                f"extremes {min(r['B_all_s']) / max(r['A_all_s']):.1f}-"
                f"{max(r['B_all_s']) / min(r['A_all_s']):.1f}x",
                f">= {r['target']:g}x",
                _met(r["ratio"] >= r["target"]),
            ]
        )
    elif "cold_start" in results:
        missing("cold_start", "trigger cold start")
    r, _ = results.get("request_overhead", (None, ""))
    if r:
        ours, sdk = r["launcher_validate_render"], r["sdk_validate_build"]
        table.append(
            [
                "validate+render per request (p50 / p99)",
                f"{fmt_ms(ours['p50_s'])} / {fmt_ms(ours['p99_s'])}",
                f"SDK {fmt_ms(sdk['p50_s'])} / {fmt_ms(sdk['p99_s'])}",
                f"{r['ratio_p50']:.0f}x / {r['ratio_p99']:.0f}x faster",
                "p99 < 2 ms",
                _met(r["meets_target"]),
            ]
        )
        ours, sdk = r["launcher_full"], r["sdk_full"]
        table.append(
            [
                "full submit, AWS stubbed (p50 / p99)",
                f"{fmt_ms(ours['p50_s'])} / {fmt_ms(ours['p99_s'])}",
                f"SDK train() {fmt_ms(sdk['p50_s'])} / {fmt_ms(sdk['p99_s'])}",
                f"{r['ratio_full_p50']:.1f}x / {r['ratio_full_p99']:.1f}x faster",
                "-",
                "-",
            ]
        )
    elif "request_overhead" in results:
        missing("request_overhead", "per-request overhead")
    r, _ = results.get("queue_submit", (None, ""))
    if r:
        table.append(_queue_submit_row(r))
    elif "queue_submit" in results:
        missing("queue_submit", "submit in queue mode")
    r, _ = results.get("synth", (None, ""))
    if r:
        table.append(
            [
                "cdk synth, whole app",
                f"{r['app_s']:.1f} s",
                f"empty app {r['empty_s']:.1f} s",
                f"{r['ratio']:.2f}x the empty app; paired runs {_synth_spread(r)}",
                f"<= {r['target']:g}x",
                _met(r["ratio"] <= r["target"]),
            ]
        )
    elif "synth" in results:
        missing("synth", "cdk synth")
    r, _ = results.get("asset_size", (None, ""))
    if r:
        assets = r["assets"]
        events = next((v for k, v in assets.items() if "JobEvents" in k), None)
        source = next((v for k, v in assets.items() if "TrainingSource" in k), None)
        table.append(
            [
                "trigger asset (zipped)",
                fmt_bytes(r["trigger_zipped"]),
                f"SDK package {fmt_bytes(r['sdk_zipped'])}",
                f"{r['ratio']:.0f}x smaller",
                "-",
                "-",
            ]
        )
        if events and source:
            table.append(
                [
                    "job-events asset / training source",
                    f"{fmt_bytes(events['zipped'])} / {fmt_bytes(source['zipped'])}",
                    "-",
                    "-",
                    "-",
                    "-",
                ]
            )
    elif "asset_size" in results:
        missing("asset_size", "asset sizes")
    r, _ = results.get("load", (None, ""))
    if r:
        lat, over = r["latency"], r["overhead"]
        table.append(
            [
                f"load: {r['submissions']} distinct submits, moto sandbox",
                f"{r['throughput_per_s']:.0f}/s; overhead p50/p95/p99 {fmt_ms(over['p50_s'])}"
                f" / {fmt_ms(over['p95_s'])} / {fmt_ms(over['p99_s'])}",
                f"latency p50/p99 {fmt_ms(lat['p50_s'])} / {fmt_ms(lat['p99_s'])}",
                "-",
                "none lost or doubled",
                _met(not r["problems"]),
            ]
        )
    elif "load" in results:
        missing("load", "load")
    r, _ = results.get("train_throughput", (None, ""))
    if r:
        table.append(
            [
                f"training throughput ({r.get('config')}, {r.get('device')})",
                "tuned defaults",
                "seed settings",
                f"{r['ratio']:.2f}x samples/s",
                "-",
                "-",
            ]
        )
    elif "train_throughput" in results:
        missing("train_throughput", "training throughput")
    return table


def markdown(table: list[list[str]], reports: dict[str, str], seconds: float) -> str:
    head = ["benchmark", "platform", "baseline (same run)", "ratio", "target", "met"]
    lines = [
        "# Benchmark results",
        "",
        f"`make bench` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python "
        f"{platform.python_version()}, {platform.machine()}, {_cpus()} CPU(s); "
        f"{seconds:.0f} s in all. Every ratio compares two measurements from this same run.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(row) + " |" for row in table),
        "",
        "## Reports",
        "",
    ]
    for name, text in reports.items():
        lines += [f"### {name}", "", "```", text.strip(), "```", ""]
    return "\n".join(lines)


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip", nargs="*", default=[], choices=list(BENCHES))
    parser.add_argument("--only", nargs="*", default=None, choices=list(BENCHES))
    parser.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    args = parser.parse_args(argv)
    names = [n for n in (args.only or BENCHES) if n not in args.skip]
    work = tempdir("all")
    assembly = work / "assembly"
    started = time.perf_counter()
    results: dict[str, tuple[dict[str, Any] | None, str]] = {}
    for name in names:
        extra = list(BENCHES[name])
        if name == "synth":
            extra += ["--keep", str(assembly)]
        if name == "asset_size" and assembly.exists():
            extra += ["--assembly", str(assembly)]
        results[name] = run_one(name, extra, work / f"{name}.json")
    seconds = time.perf_counter() - started
    table = rows(results)
    reports = {n: text for n, (data, text) in results.items() if data is not None}
    text = markdown(table, reports, seconds)
    Path(args.out).write_text(text)
    print("\n" + "\n".join(text.split("\n## Reports")[0].splitlines()[4:]))
    print(f"\nwrote {args.out}")
    return 0 if all(data is not None for data, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
