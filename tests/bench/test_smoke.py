"""Every benchmark's entry runs (issue 35): ``python -m bench.<name> --smoke`` in a fresh
process, as a user starts it, with tiny counts; it must exit 0 and print its ratio line (or,
for the benchmarks that compare nothing, their summary line). A benchmark whose stubs or
set-up went stale then fails here, in ``make test``, not at the next ``make bench``. The
figures themselves are ``make bench``'s (bench/RESULTS.md); a smoke run's are meaningless.

The GPU checks (``bench/gpu_check.sh``) run their CPU dry run's cheap sections here: the
environment, the generated model and data, LoRA trained, reloaded and merged, and the
summary. QLoRA needs bitsandbytes' CUDA kernels (on a CPU the entrypoint refuses it, which
``tests/training`` covers); the resume and template sections are the entrypoint's own runs,
which ``tests/training`` and the image matrix run on the CPU already.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_bench(args: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    """``python <args>`` from the repository root; its standard output (exit 0 required)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FTL_"))}
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.stdout


def has_line(out: str, pattern: str) -> None:
    assert re.search(pattern, out, re.MULTILINE), f"no line matching {pattern!r} in:\n{out}"


@pytest.mark.parametrize(
    ("name", "patterns"),
    [
        (
            "request_overhead",
            [
                r"ratio SDK/launcher \(full path, with the notice\): p50 [\d.]+x, p99 [\d.]+x \(",
                r"the started notice costs p50 ",  # timed with and without it (issue 35)
                r"calls timed, with the notice: .*sns:Publish, events:PutEvents",
            ],
        ),
        ("queue_submit", [r"ratio queue/direct: p50 [\d.]+x, p99 [\d.]+x$"]),
        ("cold_start", [r"ratio B/A: [\d.]+x wall, [\d.]+x CPU"]),
        ("queue_scenario", [r"^  beta +p90 +[\d.]+x", r"^books: 5 jobs a queue, each completed"]),
        (
            "evaluation_overhead",
            [r"^ratio evaluation/training \(median of 1 templates\): instance-hours worst case "],
        ),
    ],
)
def test_the_benchmark_runs(name, patterns):
    out = run_bench(["-m", f"bench.{name}", "--smoke"], timeout=240)
    for pattern in patterns:
        has_line(out, pattern)


def test_synth_and_the_asset_sizes_run(tmp_path):
    assembly = tmp_path / "assembly"
    out = run_bench(["-m", "bench.synth", "--smoke", "--keep", str(assembly)], timeout=300)
    has_line(out, r"ratio app/empty: [\d.]+x")
    out = run_bench(["-m", "bench.asset_size", "--assembly", str(assembly)], timeout=120)
    has_line(out, r"ratio SDK package / trigger asset \(zipped\): \d+x")


@pytest.mark.sandbox
def test_the_load_benchmark_runs():
    out = run_bench(["-m", "bench.load", "--smoke"], timeout=300)
    has_line(out, r"throughput: [\d.]+ submissions/s")


@pytest.mark.sandbox
def test_the_soak_runs():
    out = run_bench(["-m", "bench.soak", "--smoke"], timeout=300)
    has_line(out, r"^direct +faults 10%: \d+ jobs .* lost jobs 0,")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "pattern"),
    [
        ("qa", r"^ratio tuned/seed: [\d.]+x$"),
        ("sft", r"^ratios \(tokens/s\): new/plain [\d.]+x"),
    ],
)
def test_the_training_throughput_runs(task, pattern):
    out = run_bench(["-m", "bench.train_throughput", "--task", task, "--smoke"], timeout=400)
    has_line(out, pattern)


@pytest.mark.slow
def test_the_gpu_checks_cpu_parts_run(tmp_path):
    env = {"GPU_CHECK_DRY": "1", "GPU_CHECK_WORK": str(tmp_path), "OUT": str(tmp_path / "out")}
    for command in (["env"], ["prep"], ["peft", "--mode", "lora", "--timeout", "300"]):
        run_bench(["bench/gpu_check.py", *command], timeout=330, env=env)
    out = run_bench(["bench/gpu_check.py", "summary"], timeout=60, env=env)
    has_line(out, r"^\[PASS\] peft_lora: ")
