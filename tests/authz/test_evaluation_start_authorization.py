"""The evaluation jobs the trigger starts (issue 36) in every deployment configuration the
authorization check drives directly: each is among the run's recorded requests (so the checks
of every trigger request, tests/authz/test_authorization.py and test_constraints.py, hold for
it), runs with its evaluated job's role, and reads and writes only its team's data and
artifacts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.authz.conftest import deployment
from tests.authz.harness import CONFIGURATIONS, denied, training_role_requests

TAG = "ftl:evaluation-of"


def _tags(job: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in job.get("Tags") or []}


# The queue configurations' runs end no job Completed through the trigger (their jobs stay
# queued in the stand-in), so they start no evaluation: direct configurations only.
DIRECT = [c for c in CONFIGURATIONS if CONFIGURATIONS[c][0].get("ftl:scheduler") != "queue"]


@pytest.mark.parametrize("name", DIRECT)
def test_each_configurations_evaluation_jobs_run_as_their_jobs_within_their_team(name, trigger_run):
    d, run = deployment(name), trigger_run(name)
    by_name = {j["TrainingJobName"]: j for j in run.created if "TrainingJobName" in j}
    evaluations = [j for j in run.created if TAG in _tags(j)]
    assert evaluations, f"{name}: no evaluation job started"
    for evaluation in evaluations:
        parent = by_name[_tags(evaluation)[TAG]]
        assert evaluation["RoleArn"] == parent["RoleArn"]
        team = _tags(parent).get("ftl:team")
        assert _tags(evaluation).get("ftl:team") == team
        uris = [c["DataSource"]["S3DataSource"]["S3Uri"] for c in evaluation["InputDataConfig"]]
        uris.append(evaluation["OutputDataConfig"]["S3OutputPath"])
        if team:
            assert all(f"/{team}/" in u for u in uris if "/source/" not in u), uris
    via = CONFIGURATIONS[name][0].get("ftl:network", "none") != "none"
    requests = [
        r for j in evaluations for r in training_role_requests(j, d.key_arn(), via_endpoint=via)
    ]
    outcomes = d.evaluate_all(requests)
    assert not denied(outcomes), "\n".join(denied(outcomes))
