"""Notifications through the job-events function against moto's SNS, SQS and EventBridge
(issue 27): a job's start and end reach its team's topic (not another team's) with the
attributes subscription filters select by, and the default bus; a failed send is redone by
the next event with the same deduplication id; a team's budget thresholds are sent once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobmodel.jobs import effects as E
from jobmodel.teams import Team, TeamLimits, TeamsConfig
from tests.lambda_support import client, create_ledger_table, load_handler
from tests.unit.job_events.conftest import EVENTS_DIR, Events
from testsupport import REGION

TEAMS = TeamsConfig(
    teams=(
        Team(
            name="nlp",
            principals=("arn:aws:iam::123456789012:role/nlp-*",),
            limits=TeamLimits(monthly_budget_usd=100.0),
        ),
        Team(name="vision", principals=("arn:aws:iam::123456789012:role/vision-*",)),
    )
)


class Notified(Events):
    queues: dict[str, str]

    def read(self, queue: str) -> list[dict[str, Any]]:
        """Every SNS notification in ``queue`` (raw delivery off): message and attributes."""
        out = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.queues[queue], MaxNumberOfMessages=10)
            if not got.get("Messages"):
                return out
            for m in got["Messages"]:
                body = json.loads(m["Body"])
                out.append(body)
                self.sqs.delete_message(
                    QueueUrl=self.queues[queue], ReceiptHandle=m["ReceiptHandle"]
                )


def _queue(sqs: Any, name: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return url, arn["QueueArn"]


@pytest.fixture
def notified(moto_endpoint, monkeypatch, prefix) -> Notified:
    table = f"ftl-notify-{prefix}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    sns, sqs = client("sns", moto_endpoint), client("sqs", moto_endpoint)
    eventbridge = client("events", moto_endpoint)
    platform = sns.create_topic(Name=f"ftl-{prefix}")["TopicArn"]
    topics = {t.name: sns.create_topic(Name=f"{t.name}-{prefix}")["TopicArn"] for t in TEAMS.teams}
    queues: dict[str, str] = {}
    for name, topic, policy in [
        ("platform", platform, None),
        ("nlp", topics["nlp"], None),
        ("nlp-failures", topics["nlp"], {"status": ["Failed"]}),
        ("vision", topics["vision"], None),
    ]:
        url, arn = _queue(sqs, f"{name}-{prefix}")
        attributes = {"FilterPolicy": json.dumps(policy)} if policy else {}
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes=attributes)
        queues[name] = url
    url, arn = _queue(sqs, f"bus-{prefix}")
    queues["bus"] = url
    rule = f"ftl-{prefix}"
    eventbridge.put_rule(Name=rule, EventPattern=json.dumps({"source": ["ftl.ftl-test"]}))
    eventbridge.put_targets(Rule=rule, Targets=[{"Id": "q", "Arn": arn}])
    env = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "FTL_JOB_TABLE": table,
        "FTL_TOPIC_ARN": platform,
        "FTL_PLATFORM_NAME": "ftl-test",
        "FTL_TEAM_TOPICS": json.dumps(topics),
        "FTL_EVENT_BUS": "default",
        **TEAMS.to_env(),
    }
    module = load_handler(EVENTS_DIR, monkeypatch, env)
    out = Notified(module, moto_endpoint, table, queues["platform"])
    out.queues = queues
    return out


def sagemaker(name: str, status: str, at_ms: int, **detail: Any) -> dict[str, Any]:
    """A direct-mode ``SageMaker Training Job State Change`` of the job ``name``."""
    return {
        "id": f"e-{name}-{status}-{at_ms}",
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {
            "TrainingJobName": name,
            "TrainingJobStatus": status,
            "LastModifiedTime": at_ms,
            **detail,
        },
    }


T0 = 1_795_000_000_000


def _attrs(message: dict[str, Any]) -> dict[str, str]:
    return {k: v["Value"] for k, v in message.get("MessageAttributes", {}).items()}


def _bus(n: Notified) -> list[dict[str, Any]]:
    return [m for m in n.read("bus")]


def _claim(n: Notified, name: str, team: str = "nlp", *, usage: bool = True) -> None:
    n.put_job(
        name,
        status="Submitting",
        team=team,
        template="distilbert-spot",
        requested_by=f"arn:aws:sts::123456789012:assumed-role/{team}-sci/alice",
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        price_usd_per_hour=30.0,
        estimated_max_cost_usd=60.0,
    )
    if usage:
        n.put_usage(team, n.month(), instances=2, reserved=60.0)


def test_start_and_end_reach_the_teams_topic_and_the_bus_with_their_attributes(notified, prefix):
    _claim(notified, prefix)
    notified(sagemaker(prefix, "InProgress", T0 + 1000))
    notified(sagemaker(prefix, "Completed", T0 + 900_000, BillableTimeInSeconds=600))
    nlp = notified.read("nlp")
    assert [_attrs(m)["event"] for m in nlp] == ["started", "ended"]
    started, ended = nlp
    assert _attrs(ended) == {
        "event": "ended",
        "team": "nlp",
        "template": "distilbert-spot",
        "status": "Completed",
        "requester": "arn:aws:sts::123456789012:assumed-role/nlp-sci/alice",
        "dedup_id": f"{prefix}/announce",
    }
    body = json.loads(ended["Message"])
    assert body["cost_usd"] > 0 and body["console_url"].endswith(f"#/jobs/{prefix}")
    assert _attrs(started)["dedup_id"] == f"{prefix}/started"
    # the filter policy selects by status: no failure, nothing; another team: nothing
    assert notified.read("nlp-failures") == [] and notified.read("vision") == []
    # the platform's topic still carries every end (and only ends, with teams)
    assert [_attrs(m)["event"] for m in notified.read("platform")] == ["ended"]
    bus = _bus(notified)
    assert [e["detail-type"] for e in bus] == ["FTL Job Started", "FTL Job Ended"]
    assert {e["source"] for e in bus} == {"ftl.ftl-test"}
    assert bus[1]["detail"]["dedup_id"] == f"{prefix}/announce"
    assert bus[1]["detail"]["team"] == "nlp" and bus[1]["detail"]["status"] == "Completed"
    assert E.OWED not in notified.job(prefix)


def test_a_failed_job_reaches_the_filtered_subscription(notified, prefix):
    _claim(notified, prefix)
    notified(sagemaker(prefix, "Failed", T0 + 5000))
    (failure,) = notified.read("nlp-failures")
    assert _attrs(failure)["status"] == "Failed"


class BrokenBus:
    """EventBridge answering every entry with a failure, as PutEvents does (no exception)."""

    def __init__(self) -> None:
        self.calls = 0

    def put_events(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure"}]}


def test_a_failed_send_stays_owed_and_the_next_event_redoes_it(notified, prefix, monkeypatch):
    _claim(notified, prefix)
    real = notified.runtime.events
    monkeypatch.setattr(notified.runtime, "events", BrokenBus())
    with pytest.raises(Exception, match="EventBridge refused"):  # EventBridge retries the event
        notified(sagemaker(prefix, "InProgress", T0 + 1000))
    assert notified.job(prefix)[E.OWED] == {"started": f"{prefix}/started"}
    monkeypatch.setattr(notified.runtime, "events", real)
    notified(sagemaker(prefix, "InProgress", T0 + 1000))  # a repeat of the event
    assert E.OWED not in notified.job(prefix)
    starts = [_attrs(m) for m in notified.read("nlp")]
    # SNS took it twice (the first time the bus failed after it): the same dedup id
    assert [a["dedup_id"] for a in starts] == [f"{prefix}/started"] * 2
    assert [e["detail"]["dedup_id"] for e in _bus(notified)] == [f"{prefix}/started"]


def test_budget_thresholds_are_sent_once_each_a_month(notified, prefix):
    # Three jobs of 45 USD each (2 instances x 45 minutes x 30 USD/h), a budget of 100 USD:
    # 45, then 90 (80% reached), then 135 (100% reached); every end arrives twice.
    notified.put_usage("nlp", notified.month(), instances=6, reserved=180.0)
    sent: list[dict[str, str]] = []
    for i in range(3):
        name = f"{prefix}-{i}"
        _claim(notified, name, usage=False)
        notified(sagemaker(name, "Completed", T0 + 10_000, BillableTimeInSeconds=2700))
        notified(sagemaker(name, "Completed", T0 + 10_000, BillableTimeInSeconds=2700))
        sent += [_attrs(m) for m in notified.read("nlp") if _attrs(m)["event"] == "budget"]
    assert [a["dedup_id"] for a in sent] == [
        f"nlp/budget-{notified.month()}-80",
        f"nlp/budget-{notified.month()}-100",
    ]
    assert sent[1]["status"] == "budget-reached"
    usage = notified.usage("nlp")
    assert usage["budget_notices"] == [f"{notified.month()}-80", f"{notified.month()}-100"]
    budget = [e for e in _bus(notified) if e["detail-type"] == "FTL Budget Threshold"]
    assert [e["detail"]["threshold_percent"] for e in budget] == [80, 100]
