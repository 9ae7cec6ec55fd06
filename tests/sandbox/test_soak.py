"""A short seeded soak under faults (issue 30; ``make soak`` is the long one, bench/soak.py):
each scheduler deployed with three teams, 36 callers, 10% of the deployed functions' AWS calls
failing, events duplicated and reordered; afterwards nothing is lost, duplicated, orphaned,
stuck or unannounced, usage and each team's month spend are exact and every refusal is a
contract error. Three sweeps a run (issue 37, ``bench/soak_sweeps.py``), one of each plan,
run their trials under the tuner stand-in: every ended trial charged once, no sweep over its
cap by more than its running trials, one registered version per Completed sweep. Queue mode
takes sweeps as direct mode does (the tuner runs their trials whatever the scheduler)."""

from __future__ import annotations

import pytest

from bench.soak import deploy_for, report, soak

SECONDS = 10.0  # callers per scheduler; with its deploy and the checks under a minute each
SWEEPS = 3  # one a team, each plan once (complete, cap, stop)
pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("scheduler", ["direct", "queue"])
def test_a_short_soak_under_faults_keeps_every_invariant(deployed, scheduler):
    outputs = deploy_for(deployed.sandbox, scheduler, f"soakt{scheduler[0]}")
    result = soak(
        deployed.sandbox,
        outputs,
        scheduler=scheduler,
        seconds=SECONDS,
        faults=0.10,
        seed=30,
        sweeps=SWEEPS,
    )
    print("\n" + report(result))
    assert result.jobs > 10 and sum(result.injected.values()) > 10, report(result)
    assert not result.problems, "\n".join(result.problems[:20])
    assert (
        result.lost_announcements,
        result.stuck_claims,
        result.duplicates,
        result.usage_mismatches,
        result.spend_mismatches,
        result.bad_answers,
    ) == (0, 0, 0, 0, 0, 0)
    sweeps = result.sweeps
    assert sweeps["sweeps"] >= 2 and not result.sweep_refusals.get("ValidationError"), sweeps
    assert sweeps["trials_ended"] >= 4, sweeps
    assert sweeps["trials_charged"] == sweeps["trials_ended"], sweeps
    assert (sweeps["lost_trials"], sweeps["charge_mismatches"], sweeps["cap_overruns"]) == (0, 0, 0)
    assert sweeps["lost_versions"] == 0 and sweeps["versions"] == sweeps["statuses"].get(
        "Completed", 0
    ), sweeps
