"""Notifications deployed (issue 27): a teams platform deployed into moto, a job started through
its team's door; its start and end reach the team's topic (an SQS queue subscribed in moto)
with the attributes filter policies select by, not the other team's topic, and the default
event bus (a rule there forwarding ``ftl.<platform>`` to a queue). That another team's member
cannot subscribe is the authorization check's (moto does not evaluate IAM):
``tests/authz/test_authorization.py::test_a_team_member_subscribes_to_its_own_topic_and_no_other``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from sandbox.deploy import deploy
from tests.sandbox.test_teams_deployed import CONTEXT as TEAMS_CONTEXT
from tests.sandbox.test_teams_deployed import Teams, small

PLATFORM = "ftlnotify"
CONTEXT = {**TEAMS_CONTEXT, "ftl:platformName": PLATFORM}
pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def teams(deployed):
    saved = dict(os.environ)  # as test_teams_deployed: the functions' environments stay theirs
    started = time.perf_counter()
    outputs = deploy(deployed.endpoint, context=CONTEXT)
    print(f"\nnotifications deploy: {time.perf_counter() - started:.1f}s")
    yield Teams(deployed.endpoint, outputs, api=None)  # type: ignore[arg-type]
    os.environ.clear()
    os.environ.update(saved)


def _queue(teams: Teams, name: str) -> tuple[str, str]:
    sqs = teams.client("sqs")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return url, arn["QueueArn"]


def _drain(teams: Teams, url: str) -> list[dict[str, Any]]:
    sqs, out = teams.client("sqs"), []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return out
        for m in got:
            out.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_a_jobs_start_and_end_reach_its_teams_topic_and_the_bus(teams):
    sns, events = teams.client("sns"), teams.client("events")
    queues = {}
    for team in ("nlp", "vision"):
        url, arn = _queue(teams, f"{PLATFORM}-{team}-inbox")
        topic = teams.outputs[f"Team{team.capitalize()}TopicArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
        queues[team] = url
    url, arn = _queue(teams, f"{PLATFORM}-bus-inbox")
    events.put_rule(
        Name=f"{PLATFORM}-all", EventPattern=json.dumps({"source": [f"ftl.{PLATFORM}"]})
    )
    events.put_targets(Rule=f"{PLATFORM}-all", Targets=[{"Id": "inbox", "Arn": arn}])

    job = teams.team("nlp", {"action": "submit", **small("nlp-notified")})
    assert "error" not in job, job
    name = job["job_name"]
    ended = teams.team("nlp", {"action": "describe", "job_name": name})  # moto: Completed
    assert ended["status"] == "Completed", ended

    nlp = _drain(teams, queues["nlp"])
    attrs = [{k: v["Value"] for k, v in m["MessageAttributes"].items()} for m in nlp]
    assert [a["event"] for a in attrs] == ["started", "ended"], attrs
    assert all(a["team"] == "nlp" and a["template"] == "distilbert-spot" for a in attrs)
    assert attrs[1]["status"] == "Completed" and attrs[1]["dedup_id"] == f"{name}/announce"
    body = json.loads(nlp[1]["Message"])
    assert body["console_url"].endswith(f"#/jobs/{name}") and body["job_name"] == name
    assert _drain(teams, queues["vision"]) == []

    bus = _drain(teams, url)
    mine = [e for e in bus if e["detail"].get("job_name") == name]
    assert [e["detail-type"] for e in mine] == ["FTL Job Started", "FTL Job Ended"]
    assert {e["source"] for e in mine} == {f"ftl.{PLATFORM}"}
    assert mine[1]["detail"]["dedup_id"] == f"{name}/announce"
    # nothing is left owed on the record
    item = teams.team("nlp", {"action": "describe", "job_name": name})
    assert item["status"] == "Completed"
