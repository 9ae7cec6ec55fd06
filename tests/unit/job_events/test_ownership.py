"""An event changes a ledger job only if its training job (or service job) is that job's
team's: the training job's name and ``ftl:job-name`` tag are whatever its creator chose, its
role and share are not (``ftl_events.ownership``)."""

from __future__ import annotations

import json

import pytest

from tests.unit.job_events.conftest import put_team_job
from tests.unit.job_events.sequences import T0, batch, sagemaker

ROLE_NLP = "arn:aws:iam::123456789012:role/ftl-nlp-training"
ROLE_CV = "arn:aws:iam::123456789012:role/ftl-cv-training"


@pytest.fixture
def nlp_job(events, queued) -> str:
    """The queued team job of team nlp, with the role the launcher rendered for it."""
    rendered = {"TrainingJobName": queued, "RoleArn": ROLE_NLP}
    put_team_job(events, queued, rendered=json.dumps(rendered))
    return queued


def _completed(name: str, *, role: str, team: str) -> dict:
    event = sagemaker(name, "Completed", "Completed", T0 + 90_000, BillableTimeInSeconds=3600)
    event["detail"].update(
        TrainingJobName=name, RoleArn=role, Tags={"ftl:job-name": name, "ftl:team": team}
    )
    return event


@pytest.mark.parametrize(
    ("role", "team"),
    [(ROLE_CV, "cv"), (ROLE_CV, "nlp"), (ROLE_NLP, "cv")],
    ids=["other-teams-job", "other-role-own-tag", "own-role-other-tag"],
)
def test_another_teams_training_job_naming_this_job_changes_nothing(events, nlp_job, role, team):
    """Team cv's training job, named (or tagged) as team nlp's job, neither completes nor
    charges it: nothing is written, announced or given back."""
    before = events.job(nlp_job)
    usage = events.usage("nlp")
    result = events(_completed(nlp_job, role=role, team=team))
    assert result["updated"] is False
    assert events.job(nlp_job) == before and events.usage("nlp") == usage
    assert events.messages() == []


def test_the_teams_own_training_job_is_applied(events, nlp_job):
    result = events(_completed(nlp_job, role=ROLE_NLP, team="nlp"))
    assert result["updated"] is True and result["status"] == "Completed"
    assert events.usage("nlp")["instances"] == 0
    assert events.job(nlp_job)["cost_usd"] == pytest.approx(60.0)


def test_a_service_job_in_another_teams_share_changes_nothing(events, nlp_job):
    event = batch(nlp_job, "RUNNABLE")
    event["detail"]["shareIdentifier"] = "cv"
    assert events(event)["updated"] is False
    assert events.job(nlp_job)["status"] == "Submitting"
    event["detail"]["shareIdentifier"] = "nlp"
    assert events(event)["updated"] is True
    assert events.job(nlp_job)["status"] == "Queued"
