"""A short seeded soak under faults (issue 30; ``make soak`` is the long one, bench/soak.py):
each scheduler deployed with three teams, 36 callers, 10% of the deployed functions' AWS calls
failing, events duplicated and reordered; afterwards nothing is lost, duplicated, orphaned,
stuck or unannounced, usage is exact and every refusal is a contract error."""

from __future__ import annotations

import pytest

from bench.soak import deploy_for, report, soak

SECONDS = 10.0  # callers per scheduler; with its deploy and the checks under a minute each
pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("scheduler", ["direct", "queue"])
def test_a_short_soak_under_faults_keeps_every_invariant(deployed, scheduler):
    outputs = deploy_for(deployed.sandbox, scheduler, f"soakt{scheduler[0]}")
    result = soak(
        deployed.sandbox, outputs, scheduler=scheduler, seconds=SECONDS, faults=0.10, seed=30
    )
    print("\n" + report(result))
    assert result.jobs > 10 and sum(result.injected.values()) > 10, report(result)
    assert not result.problems, "\n".join(result.problems[:20])
    assert (
        result.lost_announcements,
        result.stuck_claims,
        result.duplicates,
        result.usage_mismatches,
        result.bad_answers,
    ) == (0, 0, 0, 0, 0)
