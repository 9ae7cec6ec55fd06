"""``bench/queue_scenario.py``'s core on a tiny plan: the real trigger in queue mode against the
Batch stand-in, on a fair-share queue and on the FIFO baseline queue.

Two 1-instance slots; alpha submits three jobs, then beta two, one simulated second apart
(t = 0..4 s), each running 60 simulated minutes. alpha's first two start at once. When the
first ends (t = 3600 s) alpha still holds one instance and beta none: beta's first starts.
When alpha's second ends (3601 s) alpha holds nothing, but its last hour of use still counts
(the platform's shareDecaySeconds, 3600), so beta's second starts before alpha's third. FIFO
starts alpha's third first. (With two jobs a team both orders would be the same: alpha's two
start at once and beta's two follow.)
"""

from __future__ import annotations

import pytest

from bench.queue_scenario import SMOKE, report, scenario, summarize

TINY = SMOKE  # the plan of ``--smoke`` (tests/bench/test_smoke.py runs the entry with it)


@pytest.fixture(scope="module")
def runs():
    return scenario(TINY)


def waits(run) -> list[float]:
    """Each job's wait in seconds, as the trigger's describe reported it, in submission order."""
    return [job.wait_s for job in run.jobs]


def test_fair_share_starts_both_of_betas_jobs_before_alphas_third(runs):
    fair = summarize(runs["fairshare"], TINY)
    assert fair["problems"] == []
    assert fair["start_order"] == ["alpha", "alpha", "beta", "beta", "alpha"]
    # a1 a2 start at 0 and 1 s; a1's end starts b1 (t 3600), a2's b2 (3601), b1's a3 (7200).
    assert waits(runs["fairshare"]) == [0, 0, 7198, 3597, 3597]
    assert fair["teams"]["beta"]["first_start_min"] == pytest.approx(60)


def test_the_fifo_baseline_starts_jobs_in_arrival_order(runs):
    fifo = summarize(runs["fifo"], TINY)
    assert fifo["problems"] == []
    assert fifo["start_order"] == ["alpha", "alpha", "alpha", "beta", "beta"]
    assert waits(runs["fifo"]) == [0, 0, 3598, 3598, 7196]
    assert fifo["teams"]["beta"]["first_start_min"] == pytest.approx(60 + 1 / 60)


def test_each_queue_got_its_own_jobs_each_completed_once(runs):
    fair, fifo = runs["fairshare"], runs["fifo"]
    assert fair.queue != fifo.queue
    for run in (fair, fifo):
        assert [j.status for j in run.jobs] == ["Completed"] * 5
        assert len({j.training for j in run.jobs}) == 5
    assert not {j.name for j in fair.jobs} & {j.name for j in fifo.jobs}


def test_the_report_says_the_minutes_are_simulated():
    result = {
        "plan": {"capacity": 2, "bursts": [["alpha", 1]], "instances": 1, "run_minutes": 60},
        "problems": [],
        "wall_s": 1.0,
        "submit_p50_s": 0.01,
        "describe_p50_s": 0.01,
        "calls": {"submit": 2, "describe": 4},
        "p90_ratio": {"alpha": None},
        "first_start_ratio": {"alpha": 1.0},
    }
    one = {"min": 0.0, "p50_min": 0.0, "p90_min": 0.0, "max_min": 0.0, "mean_min": 0.0}
    for policy in ("fairshare", "fifo"):
        result[policy] = {
            "start_order": ["alpha"],
            "overall": one,
            "teams": {"alpha": one | {"first_start_min": 0.0}},
            "spread_p50": None,
        }
    text = report(result)
    assert text.startswith("SIMULATED minutes") and "not a measurement of AWS Batch" in text
    assert "n/a" in text  # a ratio over 0 is not a number
