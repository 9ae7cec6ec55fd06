"""A capacity chain's next step and its start, notified by the trigger's own writes (issue 27):
the write that moved the chain owes ``chain-step-<n>``, the one that started it ``started``,
and the trigger sends both (team topic and bus) before answering, leaving nothing owed."""

from __future__ import annotations

import json
from typing import Any

from ftl_ledger.notify import NotifySettings
from jobmodel.jobs import effects as E
from tests.unit.trigger.test_capacity_chain import _submit, chain  # noqa: F401 - the fixture


class Sent:
    """SNS and EventBridge stand-ins that keep what they were given."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def publish(self, **kwargs: Any) -> dict[str, Any]:
        self.published.append(kwargs)
        return {"MessageId": "m"}

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        self.events += kwargs["Entries"]
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"}]}


def test_a_chain_moved_on_at_submit_is_notified_once_with_its_step(chain):  # noqa: F811
    launcher, standin = chain
    runtime = launcher.module.RUNTIME
    sent = Sent()
    runtime.sns, runtime.events, runtime.topic_arn = sent, sent, "arn:aws:sns:us-east-1:1:ftl"
    runtime.notify = NotifySettings(
        team_topics={"alpha": "arn:aws:sns:us-east-1:1:alpha"}, bus="default", source="ftl.t"
    )
    standin.no_on_demand = {"ml.g5.xlarge", "ml.g6.xlarge", "ml.g5.2xlarge"}
    job = _submit(launcher, capacity=["on-demand", "training-plan"])
    assert job["attempt"] == 2 and job["status"] == "InProgress", job
    kinds = [m["MessageAttributes"]["event"]["StringValue"] for m in sent.published]
    assert sorted(kinds) == ["chain-step", "started"]
    assert {m["TopicArn"] for m in sent.published} == {"arn:aws:sns:us-east-1:1:alpha"}
    step = next(m for m in sent.published if "chain-step" in m["Message"])
    body = json.loads(step["Message"])
    assert body["attempt"] == 2 and body["dedup_id"] == f"{job['job_name']}/chain-step-2"
    assert sorted(e["DetailType"] for e in sent.events) == ["FTL Chain Step", "FTL Job Started"]
    record = launcher.module.LAUNCHER.ledger.get_job(job["job_name"])
    assert E.OWED not in record
