"""``bench/run_all.py`` rewrites bench/RESULTS.md: it must keep what it does not replace (the
rows and reports of benchmarks not run this time, and sections written by hand such as the
SFT throughput runs), and replace, not repeat, what it ran again."""

from __future__ import annotations

from pathlib import Path

from bench.run_all import BENCHES, ROWS, carried_over, markdown, rows

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "RESULTS.md"

PREVIOUS = """# Benchmark results

`make bench` on 2026-11-23 08:23 UTC, Python 3.11.7, x86_64, 2 CPU(s); 256 s in all.

| benchmark | platform | baseline (same run) | ratio | target | met |
|---|---|---|---|---|---|
| trigger cold start (fresh process to ready) | 483 ms | SDK 5734 ms | 11.9x faster | >= 8x | yes |
| trigger asset (zipped) | 67.7 KiB | SDK package 2.30 MiB | 35x smaller | - | - |
| validate+render per request (2026-11-22 run) | 0.087 ms | SDK 4.34 ms | 50x | <2 ms | yes |
| GPU SFT by hand | 43280 tok/s | 2918 tok/s | 14.8x | - | - |

## Reports

### cold_start

```
cold start 483 ms
```

### asset_size

```
assets 67.7 KiB
```

### request_overhead (2026-11-22 run)

```
per-request 0.087 ms
```

### train_throughput --task sft (causal-LM SFT, issue 11)

Run by hand; kept across `make bench` runs.

```
ratio tuned/plain: 14.83x tokens/s
```

Goal ">= 45% MFU": **not met**.
"""


def table_of(text: str) -> list[str]:
    return [line for line in text.split("## Reports")[0].splitlines() if line.startswith("| ")]


def test_a_partial_run_keeps_every_other_row_and_section_marked_with_its_date():
    table, reports = (
        [["trigger cold start (fresh process to ready)", "400 ms"] + ["-"] * 4],
        {"cold_start": "cold start 400 ms"},
    )
    kept = carried_over(PREVIOUS, ran=["cold_start"], reported=reports)
    text = markdown(table, reports, 1.0, kept)
    labels = [line.split(" | ")[0].lstrip("| ") for line in table_of(text)[1:]]
    assert labels == [
        "trigger cold start (fresh process to ready)",  # this run's, once
        "trigger asset (zipped) (2026-11-23 run)",
        "validate+render per request (2026-11-22 run)",  # its own date stays
        "GPU SFT by hand",  # a row of no benchmark: a person's, kept as written
    ]
    assert "400 ms" in text and "483 ms" not in text
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert titles == [
        "### cold_start",
        "### asset_size (2026-11-23 run)",
        "### request_overhead (2026-11-22 run)",
        "### train_throughput --task sft (causal-LM SFT, issue 11)",
    ]
    sft = PREVIOUS[PREVIOUS.index("### train_throughput --task sft") :]
    assert sft.strip() in text  # word for word
    assert "not re-run this time" in text


def test_a_full_run_replaces_its_rows_and_reports_and_keeps_hand_written_sections():
    reports = {name: f"{name} fresh" for name in BENCHES}
    kept = carried_over(PREVIOUS, ran=BENCHES, reported=reports)
    text = markdown(
        [["trigger cold start (fresh process to ready)"] + ["x"] * 5], reports, 1.0, kept
    )
    assert [line.split(" | ")[0] for line in table_of(text)[1:]] == [
        "| trigger cold start (fresh process to ready)",
        "| GPU SFT by hand",
    ]
    titles = [line for line in text.splitlines() if line.startswith("### ")]
    assert titles == [f"### {name}" for name in BENCHES] + [
        "### train_throughput --task sft (causal-LM SFT, issue 11)"
    ]
    assert "per-request 0.087 ms" not in text  # the dated report was replaced, not repeated


def test_a_failed_benchmark_keeps_its_earlier_report_and_says_it_failed():
    results = {"asset_size": (None, "failed (exit 1): boom")}
    table = rows(results)
    assert table == [["asset sizes", "-", "-", "-", "-", "failed (exit 1): boom"]]
    kept = carried_over(PREVIOUS, ran=results, reported={})
    text = markdown(table, {}, 1.0, kept)
    assert "### asset_size (2026-11-23 run)" in text and "assets 67.7 KiB" in text
    assert "trigger asset (zipped)" not in text  # its row is this run's failure row


def test_rewriting_twice_neither_loses_nor_repeats_anything():
    reports = {"cold_start": "cold start 400 ms"}
    first = markdown([], reports, 1.0, carried_over(PREVIOUS, ["cold_start"], reports))
    second = markdown([], reports, 1.0, carried_over(first, ["cold_start"], reports))
    assert second.split("\n", 3)[3] == first.split("\n", 3)[3]  # all but the run's own line
    assert second.count("### train_throughput --task sft") == 1


def test_the_checked_in_results_keep_their_sft_section_through_a_full_run():
    previous = RESULTS.read_text()
    reports = {name: "fresh" for name in BENCHES}
    _, sections = carried_over(previous, ran=BENCHES, reported=reports)
    hand_written = [s for s in sections if s.startswith("### train_throughput --task sft")]
    assert len(hand_written) == 1 and "ratio tuned/plain" in hand_written[0]


def test_every_benchmark_has_rows_and_labels():
    assert set(ROWS) == set(BENCHES)


def test_nothing_to_carry_from_a_missing_file():
    assert carried_over("", ran=["synth"], reported={}) == ([], [])


def test_a_partial_run_names_its_command_and_its_date_still_marks_what_it_kept():
    command = "python -m bench.run_all --only cold_start"
    reports = {"cold_start": "cold start 400 ms"}
    table = [["trigger cold start (fresh process to ready)", "400 ms"] + ["-"] * 4]
    text = markdown(table, reports, 1.0, ([], []), command, 3.5)
    assert text.splitlines()[2].startswith(f"`{command}` on ")
    assert "load average 3.5 at the start" in text
    kept_rows, _ = carried_over(text, ran=["synth"], reported={})
    date = text.splitlines()[2].split(" on ")[1][:10]
    assert kept_rows[0][0] == f"trigger cold start (fresh process to ready) ({date} run)"
