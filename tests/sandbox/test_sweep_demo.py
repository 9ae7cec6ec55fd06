"""`make demo-sweep` (``python -m sandbox.demo --sweep``) end to end, in its own process and
sandbox: the dry run's worst case, ``ftl wait``'s progress lines (trials only ever done, not
undone; spend only ever up), every trial billed its run time on the demo's clock and charged
once, and the best trial's model registered and evaluated."""

from __future__ import annotations

import re

import pytest

from sandbox import sweep_demo
from tests.sandbox.demos import run_demo

PROGRESS = re.compile(
    r"^\[(\d+):(\d\d):(\d\d)\] (\w+)  trials (\d+)/6 done, (\d+) running, (\d+) stopped early, "
    r"(\d+) failed; (?:best eval_accuracy ([\d.]+) \(trial (\S+)\)|no best trial yet); "
    r"spend \$([\d.]+) of \$12\.00  (\S+)$"
)
TRIAL = re.compile(
    r"^  (\S+-\d{3}-[0-9a-f]{8})  learning_rate=(\S+)\s+batch=\s*(\d+)  (\w+)\s+"
    r"eval_accuracy=(\S+)  billable (\d+)s$"
)


def _row(lines: list[str], key: str) -> str:
    (value,) = [line[len(key) + 2 :] for line in lines if line.startswith(f"  {key}  ")]
    return value.strip()


@pytest.fixture(scope="module")
def demo() -> list[str]:
    return run_demo("--sweep").splitlines()


def test_the_sweep_demo_runs_its_trials_to_a_registered_and_evaluated_best(demo):
    lines = demo
    # The dry run: 6 trials x 1 hour x 1.50 USD, under the 12 USD cap; then the start.
    assert "  worst case: $9.00 = 6 trials x $1.50 per-trial max; cap $12.00" in lines
    (started,) = [line.split()[-1] for line in lines if line.startswith("started sweep ")]
    assert started.startswith("nlp-lr-sweep-")

    # ftl wait: a line per poll that found something new, on the demo's clock.
    progress = [m.groups() for m in map(PROGRESS.match, lines) if m]
    assert len(progress) >= 3, "\n".join(lines)
    elapsed = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s, *_ in progress]
    done = [int(p[4]) for p in progress]
    spend = [float(p[10]) for p in progress]
    assert elapsed == sorted(elapsed) and done == sorted(done) and spend == sorted(spend)
    assert all(p[11] == started for p in progress)
    assert all(int(p[5]) <= 2 for p in progress)  # max_parallel
    last = progress[-1]
    assert last[3] == "Completed" and last[4:8] == ("6", "0", "0", "0"), last

    # The trials as the tuner ran them: each billed its run time (its batch size's), and
    # the sweep's spend is their costs, each charged once.
    trials = [m.groups() for m in map(TRIAL.match, lines) if m]
    assert len(trials) == 6 and all(t[3] == "Completed" for t in trials), trials
    for name, lr, batch, _, objective, billable in trials:
        tuned = {"learning_rate": lr, "per_device_train_batch_size": batch}
        assert name.startswith(f"{started}-")
        assert int(billable) == sweep_demo.train_seconds(tuned)
        assert float(objective) == pytest.approx(sweep_demo.accuracy(tuned), abs=2e-4)
    cost = sum(int(t[5]) for t in trials) * sweep_demo.HOURLY / 3600
    assert spend[-1] == pytest.approx(cost, abs=0.01)
    # The run: trials of 10 to 20 minutes, two at a time, each poll a minute apart.
    assert 1800 <= elapsed[-1] <= sum(int(t[5]) for t in trials) / 2 + 1200 + 60

    # The best trial (the highest objective) is registered, and evaluated by <sweep>-eval.
    best = max(trials, key=lambda t: float(t[4]))[0]
    assert last[9] == best
    assert _row(lines, "best trial") == best
    assert _row(lines, "group / version") == "ftl-nlp-distilbert-spot / 1"
    artifact = _row(lines, "artifact")
    assert artifact.endswith(f"/{best}/output/model.tar.gz"), artifact
    assert _row(lines, "evaluation job") == f"{started}-eval (Completed)"
    assert _row(lines, "evaluates") == artifact
    (verdict,) = [line for line in lines if line.startswith("evaluation  ")]
    assert f"{started}-eval" in verdict and "gate passed" in verdict, verdict

    # ftl status's cost and the team's month: the trials' costs, and nothing held.
    (status_cost,) = [line.split()[-1] for line in lines if line.startswith("cost_usd ")]
    assert float(status_cost.lstrip("$")) == pytest.approx(cost, abs=0.01)
    (month,) = [line for line in lines if line.startswith("team nlp's month ")]
    found = re.search(
        r"spend \$([\d.]+) = the sweep's trials \$([\d.]+) .* \+ .* \$([\d.]+);", month
    )
    assert found, month
    total, trials_cost, evaluation = map(float, found.groups())
    assert total == pytest.approx(trials_cost + evaluation, abs=1e-4)
    assert trials_cost == pytest.approx(cost, abs=1e-4)
    assert month.endswith("instances in use 0"), month
