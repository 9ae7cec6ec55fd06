"""The evaluation jobs the trigger starts (issue 36) in every deployment configuration the
authorization check drives: each is among the run's recorded requests (so the checks
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
# queued in the stand-in), so they start no evaluation: direct configurations here, queue ones
# below (a queued job Completed in the stand-in, then described).
DIRECT = [c for c in CONFIGURATIONS if CONFIGURATIONS[c][0].get("ftl:scheduler") != "queue"]


@pytest.mark.parametrize("name", DIRECT)
def test_each_configurations_evaluation_jobs_run_as_their_jobs_within_their_team(name, trigger_run):
    d, run = deployment(name), trigger_run(name)
    by_name = {j["TrainingJobName"]: j for j in run.created if "TrainingJobName" in j}
    if run.sweeps is not None:  # a Completed sweep's evaluation is its best trial's (issue 37)
        trials = {t["TrainingJobName"]: t for t in run.sweeps.trials}
        for sweep, answer in run.sweeps.answers.items():
            best = (answer.get("sweep") or {}).get("best")
            if answer.get("status") == "Completed" and best:
                by_name[sweep] = trials[best["trial"]]
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


QUEUE = [c for c in CONFIGURATIONS if CONFIGURATIONS[c][0].get("ftl:scheduler") == "queue"]


@pytest.mark.parametrize("name", QUEUE)
def test_a_queued_jobs_evaluation_is_submitted_as_allowed(name, trigger_run, authz_sandbox):
    """Queue mode: the describe that sees a queued job Completed submits its evaluation's
    service job (``<job>-eval``), with the calls a submit makes, all allowed."""
    import contextlib
    import io
    import uuid

    from tests.authz.harness import trigger
    from tests.authz.test_authorization import trigger_requests
    from tests.lambda_support import FakeContext
    from testsupport.authz.record import recording

    d, _ = deployment(name), trigger_run(name)
    door = CONFIGURATIONS[name][1][0]
    stand_in = authz_sandbox.batch
    submit = {"action": "submit", "template": "distilbert-spot"}
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):
        with recording() as started:
            job = module.handler(
                {**submit, "client_token": uuid.uuid4().hex[:12]}, FakeContext(alias=door or None)
            )
        assert "error" not in job, job
        first = stand_in.jobs[job["batch_job_id"]]
        stand_in.tick()
        stand_in.finish_training_job(first.training_arn.rsplit("/", 1)[-1], "Completed")
        with recording() as calls:
            described = module.handler(
                {"action": "describe", "job_name": job["job_name"]}, FakeContext(alias=door or None)
            )
    assert described["status"] == "Completed", described
    assert described.get("evaluation", {}).get("job_name", "").endswith("-eval"), described
    submitted = [c.params for c in calls if c.operation == "SubmitServiceJob"]
    assert [s["jobName"] for s in submitted] == [described["evaluation"]["job_name"]], submitted
    recorded = [(door, c) for c in started] + [(door, c) for c in calls]
    outcomes = d.evaluate_all(trigger_requests(d, type("Run", (), {"calls": recorded})()))
    assert "batch:SubmitServiceJob" in {o.request.action for o in outcomes}
    assert not denied(outcomes), "\n".join(denied(outcomes))
