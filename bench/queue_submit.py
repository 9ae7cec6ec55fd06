"""Submit latency in queue mode against direct mode, AWS stubbed (issue 10).

    python -m bench.queue_submit [--iterations N] [--smoke] [--json PATH]

The trigger's real handler, loaded twice from the deployed asset's files: once in direct mode
(``FTL_SCHEDULER`` unset) and once in queue mode (``FTL_SCHEDULER=queue``), each with botocore's
Stubber answering every AWS call with the answers a real submit got (``bench._stubbed``:
recorded against moto in the same run; requests are still validated and serialized by botocore
against the trimmed models; nothing is sent). Neither has the platform's topic, so neither
sends a notice (a queued job's started notice is sent when it starts, not at submit; the
direct submit's notice is measured by ``bench.request_overhead``). Each submit is the same
request (``bench._common.REQUEST``) with a fresh ``client_token``, in a warm container (the
price item and the service quotas already read):

* direct: token look-up, ledger claim, ``CreateTrainingJob``, ledger update;
* queue: token look-up, the 10 KiB payload check, ledger claim, ``SubmitServiceJob``, the
  merged and conditional ledger update.

The bench stops with ``bench._stubbed.CallsChanged`` when either mode's AWS calls differ from
these. ``--smoke``: 10 rounds, to show it runs.

The two modes run interleaved in rounds, so a busy moment on a shared machine hits both. The
baseline is direct mode from the same run; the ratio is queue / direct (above 1: slower).
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
from typing import Any

from bench import _stubbed as S
from bench._common import (
    fmt_ms,
    handler_output_discarded,
    percentile,
    tempdir,
    trigger_asset,
    write_json,
)
from testsupport import TRIGGER_ENV


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_s": percentile(values, 50),
        "p90_s": percentile(values, 90),
        "p99_s": percentile(values, 99),
        "mean_s": sum(values) / len(values),
    }


def run(iterations: int = 2000, warmup: int = 50) -> dict[str, Any]:
    work = tempdir("queue")
    asset = trigger_asset(work / "asset")
    modes = {
        "direct": (dict(TRIGGER_ENV), S.DIRECT, "InProgress"),
        "queue": (S.queue_env(TRIGGER_ENV), S.QUEUED, "Queued"),
    }
    try:
        with handler_output_discarded():
            submits = []
            for mode, (env, expected, status) in modes.items():
                recording = S.record(asset, env, status=status, name=f"handler_rec_{mode}")
                S.check_calls(recording, expected, f"{mode} mode")
                submits.append(S.StubbedSubmit(asset, f"handler_{mode}", env, recording, status))
            for _ in S.iterate(submits, warmup):
                pass
            gc.collect()
            times: dict[str, list[float]] = {"direct": [], "queue": []}
            for round_ in S.iterate(submits, iterations):
                for mode, (wall, _cpu) in zip(modes, round_, strict=True):
                    times[mode].append(wall)
    finally:
        if str(asset) in sys.path:
            sys.path.remove(str(asset))
        shutil.rmtree(work, ignore_errors=True)
    d, q = _stats(times["direct"]), _stats(times["queue"])
    return {
        "direct": d,
        "queue": q,
        "ratio_p50": q["p50_s"] / d["p50_s"],
        "ratio_p99": q["p99_s"] / d["p99_s"],
        "calls_direct": list(S.DIRECT),
        "calls_queue": list(S.QUEUED),
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
            "  calls timed, direct: " + ", ".join(r["calls_direct"]),
            "  queue: " + ", ".join(r["calls_queue"]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--smoke", action="store_true", help="a few iterations: does it run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = run(10, warmup=2) if args.smoke else run(args.iterations)
    print(report(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
