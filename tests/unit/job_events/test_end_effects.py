"""A job's end effects survive failures (issue 30): the write that ends a job marks the
announcement owed; a publish that fails leaves it owed and fails the invocation, and
EventBridge's retry of the very event (which no longer changes the job) announces it, once,
with the end's stable deduplication id."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from jobmodel.jobs import effects as E
from jobmodel.jobs.claims import CARE


def _completed(name: str, event_id: str = "e1") -> dict:
    return {
        "id": event_id,
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {
            "TrainingJobName": name,
            "TrainingJobStatus": "Completed",
            "BillableTimeInSeconds": 60,
        },
    }


class FlakySns:
    """SNS that fails the first ``failures`` publishes as botocore does after its retries."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.published: list[dict] = []

    def publish(self, **kwargs):
        if self.failures > 0:
            self.failures -= 1
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "Publish"
            )
        self.published.append(kwargs)
        return {"MessageId": f"m{len(self.published)}"}


@pytest.fixture
def sns(events, monkeypatch) -> FlakySns:
    fake = FlakySns(failures=1)
    monkeypatch.setattr(events.runtime, "sns", fake)
    return fake


def test_a_failed_announcement_is_made_by_the_retry_of_the_same_event(events, prefix, sns):
    events.put_job(prefix, status="InProgress")
    with pytest.raises(ClientError):
        events(_completed(prefix))
    job = events.job(prefix)
    assert job["status"] == "Completed"
    # announced first; the registration (a no-op without the registry) waits behind it
    assert job[E.OWED] == {E.ANNOUNCE: f"{prefix}/announce", E.REGISTER: f"{prefix}/register"}
    assert job[CARE] == "care"  # the sweep sees it too
    assert sns.published == []

    answer = events(_completed(prefix))  # EventBridge retries the event
    assert answer["updated"] is False
    (message,) = sns.published
    body = json.loads(message["Message"])
    assert body["status"] == "Completed" and body[E.DEDUP_ATTRIBUTE] == f"{prefix}/announce"
    assert message["MessageAttributes"][E.DEDUP_ATTRIBUTE]["StringValue"] == f"{prefix}/announce"
    job = events.job(prefix)
    assert E.OWED not in job and CARE not in job

    events(_completed(prefix, "e2"))  # later repeats owe and announce nothing
    assert len(sns.published) == 1


def test_any_later_event_of_the_job_completes_what_it_owes(events, prefix, sns):
    events.put_job(prefix, status="InProgress")
    with pytest.raises(ClientError):
        events(_completed(prefix))
    stale = _completed(prefix, "late")
    stale["detail"]["TrainingJobStatus"] = "InProgress"  # an older, out-of-order event
    events(stale)
    assert [json.loads(m["Message"])["status"] for m in sns.published] == ["Completed"]
    assert E.OWED not in events.job(prefix)


def test_the_end_announced_at_once_owes_nothing(events, prefix):
    events.put_job(prefix, status="InProgress")
    events(_completed(prefix))
    assert [m["status"] for m in events.messages()] == ["Completed"]
    job = events.job(prefix)
    assert E.OWED not in job and CARE not in job
