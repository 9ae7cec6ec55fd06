"""The job-events handler loaded against moto, with helpers to read what it did."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ftl_ledger.items import to_item
from tests.lambda_support import ROOT, FakeContext, client, create_ledger_table, load_handler
from testsupport import REGION

EVENTS_DIR = ROOT / "lambda" / "job_events"


class Events:
    """The handler module and the table, topic and queue it writes to."""

    def __init__(self, module: Any, endpoint: str, table: str, queue: str) -> None:
        self.module = module
        self.ddb = client("dynamodb", endpoint)
        self.sqs = client("sqs", endpoint)
        self.table = table
        self.queue = queue

    def __call__(self, event: Any) -> dict[str, Any]:
        return self.module.handler(event, FakeContext(function_name="ftl-job-events"))

    @property
    def runtime(self) -> Any:
        return self.module.RUNTIME

    def job(self, name: str) -> dict[str, Any] | None:
        """The ledger's job item, decoded with the ledger's own codec."""
        return self.runtime.recorder.ledger.get_job(name)

    def usage(self, team: str) -> dict[str, Any] | None:
        return self.runtime.recorder.ledger.get_usage(team)

    def put_job(self, name: str, **values: Any) -> dict[str, Any]:
        """A ledger job as the trigger claims it (``values`` override)."""
        job = {
            "job_name": name,
            "template": "distilbert-spot",
            "status": "InProgress",
            "instance_type": "ml.g5.2xlarge",
            "instance_count": 1,
            "spot": True,
            "created_at": "2026-11-22T10:00:00.000Z",
            **values,
        }
        self.ddb.put_item(TableName=self.table, Item=to_item({"pk": f"job#{name}", **job}))
        return job

    def put_usage(self, team: str, month: str, *, instances: int, reserved: float) -> None:
        self.ddb.put_item(
            TableName=self.table,
            Item={
                "pk": {"S": f"usage#{team}"},
                "team_usage": {"S": team},
                "month": {"S": month},
                "instances": {"N": str(instances)},
                "reserved": {"N": repr(float(reserved))},
                "spend": {"N": "0"},
                "committed": {"N": repr(float(reserved))},
            },
        )

    def month(self) -> str:
        from jobmodel.money.limits import month_of

        return month_of(self.runtime.now())

    def messages(self, *events: str) -> list[dict[str, Any]]:
        """The messages on the topic of the notification ``events`` (default: job ends; a
        platform without team topics also carries its jobs' starts and chain steps)."""
        out = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10)
        bodies = [json.loads(json.loads(m["Body"])["Message"]) for m in out.get("Messages", [])]
        return [b for b in bodies if b.get("event") in (events or ("ended",))]


@pytest.fixture
def events(moto_endpoint, monkeypatch, prefix) -> Events:
    table = f"ftl-events-{prefix}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    sns = client("sns", moto_endpoint)
    sqs = client("sqs", moto_endpoint)
    topic = sns.create_topic(Name=f"ftl-{prefix}")["TopicArn"]
    queue = sqs.create_queue(QueueName=f"q-{prefix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn["QueueArn"])
    env = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "FTL_JOB_TABLE": table,
        "FTL_TOPIC_ARN": topic,
        "FTL_PLATFORM_NAME": "ftl-test",
    }
    module = load_handler(EVENTS_DIR, monkeypatch, env)
    return Events(module, moto_endpoint, table, queue)


def put_team_job(events: Events, name: str, **fields: Any) -> None:
    """A 2-instance p4d job of team nlp the trigger has claimed (status Submitting), with
    ``fields`` besides."""
    events.put_job(
        name,
        status="Submitting",
        team="nlp",
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        price_usd_per_hour=30.0,
        estimated_max_cost_usd=60.0,
        **fields,
    )


@pytest.fixture
def queued(events, prefix) -> str:
    """A team job the trigger submitted, and the team's usage holding it."""
    put_team_job(events, prefix)
    events.put_usage("nlp", events.month(), instances=2, reserved=60.0)
    return prefix
