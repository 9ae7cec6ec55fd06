"""Run every benchmark and write a short table to ``bench/RESULTS.md`` (and stdout).

    python -m bench.run_all [--skip NAME ...] [--only NAME ...] [--out PATH]

Each benchmark runs in its own process (``python -m bench.<name> --json ...``) so one cannot
skew or break another; its full report is printed as it finishes, and a failed benchmark is a
row saying so rather than the end of the run. Names: cold_start, request_overhead,
queue_submit, queue_scenario, synth, asset_size, load, train_throughput. About 4-5 minutes on
two shared cores.

The file's earlier rows and reports of benchmarks not run this time are kept, marked with
their run's date, and so are sections written by hand (such as the SFT throughput runs of
``bench/train_throughput.py --task sft``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._common import PYTHON, ROOT, fmt_bytes, fmt_ms, tempdir

BENCHES: dict[str, list[str]] = {
    "cold_start": ["--reps", "7", "--explain"],
    "request_overhead": [],
    "queue_submit": [],
    "queue_scenario": [],
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


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _cold_start_rows(r: dict[str, Any]) -> list[list[str]]:
    return [
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
    ]


def _request_overhead_rows(r: dict[str, Any]) -> list[list[str]]:
    ours, sdk = r["launcher_validate_render"], r["sdk_validate_build"]
    full, sdk_full = r["launcher_full"], r["sdk_full"]
    plain = r["launcher_full_no_notice"]

    def both(s: dict[str, Any]) -> str:
        """Wall p50 / p99, and CPU's (a shared machine's wall tail includes waiting for it)."""
        return (
            f"{fmt_ms(s['p50_s'])} / {fmt_ms(s['p99_s'])} "
            f"(CPU {fmt_ms(s['cpu_p50_s'])} / {fmt_ms(s['cpu_p99_s'])})"
        )

    def met(s: dict[str, Any]) -> str:
        target = r["target_p99_s"]
        return f"{_met(s['p99_s'] < target)} (CPU {_met(s['cpu_p99_s'] < target)})"

    return [
        [
            "validate+render per request (p50 / p99)",
            both(ours),
            f"SDK {both(sdk)}",
            f"{r['ratio_p50']:.0f}x / {r['ratio_p99']:.0f}x faster",
            "p99 < 2 ms",
            met(ours),
        ],
        [
            "full submit with its started notice, AWS stubbed (p50 / p99)",
            both(full),
            f"SDK train() {both(sdk_full)}",
            f"{r['ratio_full_p50']:.1f}x / {r['ratio_full_p99']:.1f}x faster",
            "p99 < 2 ms",
            met(full),
        ],
        [
            "full submit without a notice (no topic), AWS stubbed (p50 / p99)",
            both(plain),
            f"with the notice {fmt_ms(full['p50_s'])} / {fmt_ms(full['p99_s'])}",
            f"the notice adds {fmt_ms(r['notice_cost_p50_s'])} / {fmt_ms(r['notice_cost_p99_s'])}"
            f" (CPU {fmt_ms(full['cpu_p50_s'] - plain['cpu_p50_s'])} / "
            f"{fmt_ms(full['cpu_p99_s'] - plain['cpu_p99_s'])})",
            "p99 < 2 ms",
            met(plain),
        ],
    ]


def _queue_submit_rows(r: dict[str, Any]) -> list[list[str]]:
    queue, direct = r["queue"], r["direct"]
    return [
        [
            "submit in queue mode, AWS stubbed (p50 / p99)",
            f"{fmt_ms(queue['p50_s'])} / {fmt_ms(queue['p99_s'])}",
            f"direct mode {fmt_ms(direct['p50_s'])} / {fmt_ms(direct['p99_s'])}",
            f"{r['ratio_p50']:.2f}x / {r['ratio_p99']:.2f}x direct's time",
            "-",
            "-",
        ]
    ]


def _queue_scenario_rows(r: dict[str, Any]) -> list[list[str]]:
    fair, fifo = r["fairshare"], r["fifo"]

    def p90s(s: dict[str, Any]) -> str:
        return " / ".join(f"{t} {v['p90_min']:.0f}" for t, v in s["teams"].items())

    ratios = " / ".join(
        f"{t} {'n/a' if v is None else f'{v:.2f}x'}" for t, v in r["p90_ratio"].items()
    )
    spread = " vs ".join(
        "n/a" if s["spread_p50"] is None else f"{s['spread_p50']:.1f}x" for s in (fair, fifo)
    )
    return [
        [
            "queue scenario, simulated min (stand-in rules, not AWS Batch): team p90 wait",
            f"fair share {p90s(fair)}",
            f"FIFO {p90s(fifo)}",
            f"p90 fair/FIFO {ratios}; p50 spread {spread}",
            "none lost or doubled",
            _met(not r["problems"]),
        ]
    ]


def _synth_rows(r: dict[str, Any]) -> list[list[str]]:
    return [
        [
            "cdk synth, whole app",
            f"{r['app_s']:.1f} s",
            f"empty app {r['empty_s']:.1f} s",
            f"{r['ratio']:.2f}x the empty app; paired runs {_synth_spread(r)}",
            f"<= {r['target']:g}x",
            _met(r["ratio"] <= r["target"]),
        ]
    ] + (
        [
            [
                "cdk synth, like for like (both with CDK's rules engine off)",
                f"{r['app_s']:.1f} s",
                f"empty app, engine off {r['bare_s']:.1f} s",
                f"{r['bare_ratio']:.2f}x that empty app",
                f"<= {r['target']:g}x",
                _met(r["bare_ratio"] <= r["target"]),
            ]
        ]
        if "bare_s" in r
        else []
    )


def _asset_size_rows(r: dict[str, Any]) -> list[list[str]]:
    assets = r["assets"]
    events = next((v for k, v in assets.items() if "JobEvents" in k), None)
    source = next((v for k, v in assets.items() if "TrainingSource" in k), None)
    table = [
        [
            "trigger asset (zipped)",
            fmt_bytes(r["trigger_zipped"]),
            f"SDK package {fmt_bytes(r['sdk_zipped'])}",
            f"{r['ratio']:.0f}x smaller",
            "-",
            "-",
        ]
    ]
    if events and source:
        sizes = f"{fmt_bytes(events['zipped'])} / {fmt_bytes(source['zipped'])}"
        table.append(["job-events asset / training source", sizes, "-", "-", "-", "-"])
    return table


def _load_rows(r: dict[str, Any]) -> list[list[str]]:
    lat, over = r["latency"], r["overhead"]
    return [
        [
            f"load: {r['submissions']} distinct submits, moto sandbox",
            f"{r['throughput_per_s']:.0f}/s; overhead p50/p95/p99 {fmt_ms(over['p50_s'])}"
            f" / {fmt_ms(over['p95_s'])} / {fmt_ms(over['p99_s'])}",
            f"latency p50/p99 {fmt_ms(lat['p50_s'])} / {fmt_ms(lat['p99_s'])}",
            "-",
            "none lost or doubled",
            _met(not r["problems"]),
        ]
    ]


def _train_throughput_rows(r: dict[str, Any]) -> list[list[str]]:
    return [
        [
            f"training throughput ({r.get('config')}, {r.get('device')})",
            "tuned defaults",
            "seed settings",
            f"{r['ratio']:.2f}x samples/s",
            "-",
            "-",
        ]
    ]


# Per benchmark: its table rows from its JSON, and the label of its row when it failed. The
# first words of a benchmark's labels say which rows are its own in an earlier RESULTS.md.
ROWS: dict[str, tuple[Callable[[dict[str, Any]], list[list[str]]], str]] = {
    "cold_start": (_cold_start_rows, "trigger cold start"),
    "request_overhead": (_request_overhead_rows, "per-request overhead"),
    "queue_submit": (_queue_submit_rows, "submit in queue mode"),
    "queue_scenario": (_queue_scenario_rows, "queue scenario"),
    "synth": (_synth_rows, "cdk synth"),
    "asset_size": (_asset_size_rows, "asset sizes"),
    "load": (_load_rows, "load"),
    "train_throughput": (_train_throughput_rows, "training throughput"),
}
ROW_LABELS: dict[str, tuple[str, ...]] = {
    "cold_start": ("trigger cold start",),
    "request_overhead": ("validate+render", "full submit", "per-request overhead"),
    "queue_submit": ("submit in queue mode",),
    "queue_scenario": ("queue scenario",),
    "synth": ("cdk synth",),
    "asset_size": ("trigger asset", "job-events asset", "asset sizes"),
    "load": ("load",),
    "train_throughput": ("training throughput",),
}


def rows(results: dict[str, tuple[dict[str, Any] | None, str]]) -> list[list[str]]:
    """The table: each benchmark run, in ``ROWS`` order; a failed one as a row saying why."""
    table: list[list[str]] = []
    for name, (build, label) in ROWS.items():
        if name not in results:
            continue
        data, message = results[name]
        table += build(data) if data else [[label, "-", "-", "-", "-", message]]
    return table


HEADER = ["benchmark", "platform", "baseline (same run)", "ratio", "target", "met"]
_RUN_DATE_RE = re.compile(r"^`[^`\n]+` on (\d{4}-\d{2}-\d{2})", re.MULTILINE)
_DATED_RE = re.compile(r"\(\d{4}-\d{2}-\d{2}[^()]*run\)$")


def _owner(label: str) -> str | None:
    """The benchmark whose row this is (by its label's first words), or None."""
    for name, prefixes in ROW_LABELS.items():
        if label.startswith(prefixes):
            return name
    return None


def _dated(title: str, date: str) -> str:
    return title if _DATED_RE.search(title) or not date else f"{title} ({date} run)"


def carried_over(
    previous: str, ran: Iterable[str], reported: Iterable[str]
) -> tuple[list[list[str]], list[str]]:
    """What an earlier RESULTS.md holds that this run does not replace: the table rows of
    benchmarks not run this time and rows of no benchmark (a person's), and every report
    section but those this run wrote afresh (sections written by hand, such as the SFT
    throughput runs, included). Rows and reports of a benchmark not run this time are
    marked with the earlier run's date."""
    if not previous.strip():
        return [], []
    ran, reported = set(ran), set(reported)
    found = _RUN_DATE_RE.search(previous)
    date = found.group(1) if found else ""
    head, _, tail = previous.partition("\n## Reports\n")
    table_rows: list[list[str]] = []
    for line in head.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or cells == HEADER or len(cells) != len(HEADER):
            continue
        owner = _owner(cells[0])
        if owner not in ran:
            table_rows.append([_dated(cells[0], date) if owner else cells[0], *cells[1:]])
    sections: list[str] = []
    for block in re.split(r"\n(?=##+ )", "\n" + tail):
        if not block.strip():
            continue
        title, _, body = block.strip("\n").partition("\n")
        words = title.removeprefix("### ").split(" ", 1)
        mine = title.startswith("### ") and words[0] in ROWS
        if mine and words[0] in reported and (len(words) == 1 or _DATED_RE.search(words[1])):
            continue  # this run's report replaces it
        if mine and len(words) == 1:
            title = _dated(title, date)
        sections.append(f"{title}\n{body}".rstrip("\n") + "\n")
    return table_rows, sections


def markdown(
    table: list[list[str]],
    reports: dict[str, str],
    seconds: float,
    carried: tuple[list[list[str]], list[str]] = ([], []),
    command: str = "make bench",
    load: float | None = None,
) -> str:
    """RESULTS.md: this run's table and reports, then what ``carried_over`` kept."""
    old_rows, old_sections = carried
    lines = [
        "# Benchmark results",
        "",
        f"`{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python "
        f"{platform.python_version()}, {platform.machine()}, {_cpus()} CPU(s)"
        f"{'' if load is None else f', load average {load:.1f} at the start'}; "
        f"{seconds:.0f} s in all. Every ratio compares two measurements from this same run.",
    ]
    if old_rows or old_sections:
        lines.append(
            "Rows and reports marked with an earlier date were not re-run this time and are "
            "kept from that run, as are sections written by hand."
        )
    lines += [
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
        *("| " + " | ".join(row) + " |" for row in [*table, *old_rows]),
        "",
        "## Reports",
        "",
    ]
    for name, text in reports.items():
        lines += [f"### {name}", "", "```", text.strip(), "```", ""]
    for section in old_sections:
        lines += [section]
    return "\n".join(lines)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip", nargs="*", default=[], choices=list(BENCHES))
    parser.add_argument("--only", nargs="*", default=None, choices=list(BENCHES))
    parser.add_argument("--out", default=str(ROOT / "bench" / "RESULTS.md"))
    args = parser.parse_args(argv)
    names = [n for n in (args.only or BENCHES) if n not in args.skip]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    command = "make bench"
    if args.only or args.skip:
        command = "python -m bench.run_all " + " ".join(argv or sys.argv[1:])
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
    out = Path(args.out)
    previous = out.read_text() if out.exists() else ""
    text = markdown(
        table, reports, seconds, carried_over(previous, results, reports), command, load
    )
    out.write_text(text)
    print("\n" + "\n".join(text.split("\n## Reports")[0].splitlines()[4:]))
    print(f"\nwrote {args.out}")
    return 0 if all(data is not None for data, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
