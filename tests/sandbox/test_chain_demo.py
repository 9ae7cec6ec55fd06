"""`make demo-chain` (``python -m sandbox.demo --chain``) end to end, in its own process and
sandbox: the job finishes on its plan, and each attempt's start and end, as ``ftl status``
prints them, come from one clock (start before end, the billable time inside the window,
each attempt after the one before)."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.sandbox.demos import run_demo


def _attempts(stdout: str) -> list[dict[str, str]]:
    """The rows of ``ftl status``'s attempts table (ftl_client.display.attempts_table)."""
    lines = stdout.splitlines()
    start = lines.index("attempts:") + 1
    header = lines[start].split()
    assert header == [
        "#",
        "TYPE",
        "COUNT",
        "CAPACITY",
        "STATUS",
        "START",
        "END",
        "BILLABLE",
        "COST",
    ]
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("  ") or not line.strip():
            break
        rows.append(dict(zip(header, line.split(), strict=True)))
    return rows


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_chain_demo_prints_every_attempt_on_one_clock():
    stdout = run_demo("--chain")
    rows = _attempts(stdout)
    assert [(r["CAPACITY"], r["STATUS"]) for r in rows] == [
        ("spot", "Stopped"),
        ("on-demand", "Failed"),
        ("training-plan", "Completed"),
    ]
    assert [r["TYPE"] for r in rows] == ["ml.g5.xlarge", "ml.g6.xlarge", "ml.g5.xlarge"]
    previous_end = None
    for row in rows:
        start, end = _at(row["START"]), _at(row["END"])
        assert start < end, row
        billable = 0 if row["BILLABLE"] == "-" else int(row["BILLABLE"].removesuffix("s"))
        assert billable <= (end - start).total_seconds(), row
        if previous_end is not None:
            assert previous_end <= start, row
        previous_end = end
    # The simulated minutes: the spot wait, 20 minutes on-demand, 40 on the plan (less the
    # milliseconds the stand-in adds to keep each change newer than the last); a running
    # attempt bills the whole seconds of its window.
    windows = [(_at(r["END"]) - _at(r["START"])).total_seconds() for r in rows]
    assert windows == pytest.approx([1800, 1200, 2400], abs=0.01)
    for row, window in zip(rows[1:], windows[1:], strict=True):
        assert int(row["BILLABLE"].removesuffix("s")) == int(window)
