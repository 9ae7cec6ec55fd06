"""No claim held for ever (issue 30): a job whose start never happened is ended as
FailedToStart at the claim bound (jobmodel.jobs.claims) by describe, stop, list, a replay or the
sweep, with its usage given back once; a lost ledger write after a start answers what the
ledger holds, flagged ``record_pending``."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jobmodel.jobs import claims as CL
from tests.lambda_support import client
from tests.unit.trigger.test_faults import (
    Inject,
    aws_error,
    jobs,
    jobs_in_ledger,
    read_timeout,
    request_for,
)
from tests.unit.trigger.test_teams import make

THROTTLED = "ThrottlingException"


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)


@pytest.fixture
def teams(moto_endpoint, monkeypatch, tmp_path, prefix):
    launcher = make(moto_endpoint, monkeypatch, tmp_path)
    sns = client("sns", moto_endpoint)  # the topic the trigger announces the ends it records on
    monkeypatch.setattr(launcher.module.RUNTIME, "sns", sns)
    topic = sns.create_topic(Name=f"ends-{prefix}")["TopicArn"]
    monkeypatch.setattr(launcher.module.RUNTIME, "topic_arn", topic)
    return launcher


def _stuck(launcher, prefix: str) -> dict:
    """The issue's sequence: every CreateTrainingJob attempt times out, then the look-up by
    name is throttled: the submit cannot tell, answers UpstreamError and keeps the claim."""
    with (
        Inject(launcher, "sagemaker", "CreateTrainingJob", read_timeout),
        Inject(launcher, "sagemaker", "ListTrainingJobs", lambda r: aws_error(r, 400, THROTTLED)),
    ):
        answer = launcher(request_for(prefix), alias="team-alpha")
    assert answer["error"]["type"] == "UpstreamError", answer
    (job,) = [j for j in jobs_in_ledger(launcher) if "job_name" in j]
    assert job["status"]["S"] == "Submitting"
    return job


def _at(launcher, monkeypatch, job: dict, seconds: float) -> None:
    created = job["created_at"]["S"]
    moment = datetime.fromisoformat(created.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    monkeypatch.setattr(launcher.module.RUNTIME, "now", lambda: moment)


def _usage(launcher) -> dict:
    return launcher.module.LAUNCHER.usage.peek("alpha").to_view()


def test_a_stuck_claim_ends_as_failed_to_start_at_the_bound_and_gives_usage_back(
    teams, prefix, monkeypatch
):
    job = _stuck(teams, prefix)
    name = job["job_name"]["S"]
    assert _usage(teams)["instances"] == 1
    describe = {"action": "describe", "job_name": name}
    stop = {"action": "stop", "job_name": name}

    _at(teams, monkeypatch, job, CL.SUBMIT_GRACE_S + 1)  # looked for; not there yet
    assert teams(describe, alias="team-alpha")["status"] == "Submitting"
    conflict = teams(stop, alias="team-alpha")["error"]
    assert conflict["type"] == "Conflict" and "300 seconds" in conflict["message"]

    _at(teams, monkeypatch, job, CL.CLAIM_BOUND_S)  # the bound: a stop ends it
    stopped = teams(stop, alias="team-alpha")
    assert stopped["status"] == "FailedToStart", stopped
    assert "was found 300 seconds after the claim" in stopped["failure_reason"]
    assert jobs_in_ledger(teams)[0]["error_type"]["S"] == "UpstreamError"
    assert _usage(teams)["instances"] == 0
    assert teams(describe, alias="team-alpha")["status"] == "FailedToStart"
    assert _usage(teams)["instances"] == 0  # released once
    assert jobs(teams, prefix) == []
    # the token was freed: the same request starts a new job
    again = teams(request_for(prefix), alias="team-alpha")
    assert again["status"] == "InProgress" and again["job_name"] != name


def test_the_sweep_ends_a_stuck_claim_and_a_failed_look_up_decides_nothing(
    teams, prefix, monkeypatch
):
    job = _stuck(teams, prefix)
    _at(teams, monkeypatch, job, CL.CLAIM_BOUND_S + 5)
    with Inject(teams, "sagemaker", "ListTrainingJobs", lambda r: aws_error(r, 400, THROTTLED)):
        swept = teams({"action": "sweep"}, alias="sweep")
    assert swept["failed_to_start"] == 0 and swept["left"] >= 1, swept
    swept = teams({"action": "sweep"}, alias="sweep")
    assert swept["failed_to_start"] == 1, swept
    (item,) = [j for j in jobs_in_ledger(teams) if "job_name" in j]
    assert item["status"]["S"] == "FailedToStart" and "care" not in item
    assert _usage(teams)["instances"] == 0


def test_a_claim_whose_job_exists_is_recorded_started_not_ended(teams, prefix, monkeypatch):
    """The create took effect but its answer was lost and the look-up was throttled: the
    look after the grace finds the job by name and records its start, even past the bound."""
    from tests.unit.trigger.test_faults import lost_response

    with (
        # asked first (botocore calls the "first" handlers in the order registered): the
        # first attempt takes effect, unanswered; the later ones time out
        Inject(teams, "sagemaker", "CreateTrainingJob", lost_response, times=1),
        Inject(teams, "sagemaker", "CreateTrainingJob", read_timeout),
        Inject(teams, "sagemaker", "ListTrainingJobs", lambda r: aws_error(r, 400, THROTTLED)),
    ):
        answer = teams(request_for(prefix), alias="team-alpha")
    assert answer["error"]["type"] == "UpstreamError", answer
    (job,) = [j for j in jobs_in_ledger(teams) if "job_name" in j]
    _at(teams, monkeypatch, job, CL.CLAIM_BOUND_S + 30)
    listed = teams({"action": "list"}, alias="team-alpha")["jobs"]
    assert [j["status"] for j in listed] == ["InProgress"]


def test_a_replay_after_the_replay_window_only_looks(teams, prefix, monkeypatch):
    job = _stuck(teams, prefix)
    _at(teams, monkeypatch, job, CL.REPLAY_START_S + 1)
    replay = teams(request_for(prefix), alias="team-alpha")
    assert replay["status"] == "Submitting" and replay["replayed"] is True
    assert jobs(teams, prefix) == []  # it started nothing
    _at(teams, monkeypatch, job, CL.CLAIM_BOUND_S)
    assert teams(request_for(prefix), alias="team-alpha")["status"] == "FailedToStart"


def test_a_lost_ledger_write_after_the_start_answers_the_ledgers_status(teams, prefix, monkeypatch):
    code = "ProvisionedThroughputExceededException"
    with Inject(teams, "dynamodb", "UpdateItem", lambda r: aws_error(r, 400, code)):
        answer = teams(request_for(prefix, token=False), alias="team-alpha")
    assert answer["status"] == "Submitting" and answer["record_pending"] is True, answer
    assert answer["job_arn"].endswith(answer["job_name"])
    (job,) = [j for j in jobs_in_ledger(teams) if "job_name" in j]
    assert job["status"]["S"] == "Submitting"
    _at(teams, monkeypatch, job, CL.SUBMIT_GRACE_S + 1)
    described = teams({"action": "describe", "job_name": answer["job_name"]}, alias="team-alpha")
    assert described["status"] == "Completed" and "record_pending" not in described


def test_the_issues_sequence_ends_by_the_sweep_alone_within_the_documented_bound(
    teams, prefix, monkeypatch
):
    """Issue 30's sequence with no caller coming back: every CreateTrainingJob attempt times
    out, then the look-up is throttled. Only the scheduled sweep (every SWEEP_MINUTES) looks:
    before the bound it decides nothing, and by the bound plus one sweep the job is
    FailedToStart, its usage (instances and reserved cost) given back exactly once and its
    end announced once, whatever looks come after."""
    published: list[dict] = []
    sns = teams.module.RUNTIME.sns

    class Recording:
        def publish(self, **message):
            published.append(message)
            return sns.publish(**message)

    monkeypatch.setattr(teams.module.RUNTIME, "sns", Recording())
    before = _usage(teams)
    job = _stuck(teams, prefix)
    name = job["job_name"]["S"]
    claimed = _usage(teams)
    assert claimed["instances"] == before["instances"] + 1
    assert claimed["month_reserved_usd"] > before["month_reserved_usd"]

    period = 60 * CL.SWEEP_MINUTES
    deadline = CL.CLAIM_BOUND_S + period  # docs/API.md: "within 360 s of its submit"
    ended_at = None
    age = period
    while age <= deadline:
        _at(teams, monkeypatch, job, age)
        swept = teams({"action": "sweep"}, alias="sweep")
        (item,) = [j for j in jobs_in_ledger(teams) if j["job_name"]["S"] == name]
        if age < CL.CLAIM_BOUND_S:  # looked for, not found: nothing decided yet
            assert item["status"]["S"] == "Submitting", (age, swept)
            assert _usage(teams) == claimed
        elif item["status"]["S"] == "FailedToStart":
            ended_at = age
            break
        age += period
    assert ended_at is not None and ended_at <= deadline, f"still Submitting at {deadline} s"
    assert "was found 300 seconds after the claim" in item["failure_reason"]["S"]
    assert "care" not in item and "owed_effects" not in item
    assert _usage(teams) == before

    # every later look leaves it as it is: usage given back once, the end announced once
    for look in (
        {"action": "sweep"},
        {"action": "describe", "job_name": name},
        {"action": "stop", "job_name": name},
        {"action": "list"},
    ):
        teams(look, alias="sweep" if look["action"] == "sweep" else "team-alpha")
    assert _usage(teams) == before
    ends = [
        m
        for m in published
        if m["MessageAttributes"]["dedup_id"]["StringValue"] == f"{name}/announce"
    ]
    assert len(ends) == 1 and "FailedToStart" in ends[0]["Subject"]
    assert jobs(teams, prefix) == []
