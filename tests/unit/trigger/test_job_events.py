"""The job-events handler: ledger updates and SNS notifications from state-change events."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.lambda_support import ROOT, FakeContext, client, create_ledger_table

EVENTS_DIR = ROOT / "lambda" / "job_events"


@pytest.fixture
def events(moto_endpoint, monkeypatch, prefix):
    table = f"ftl-events-{prefix}"
    ddb = client("dynamodb", moto_endpoint)
    create_ledger_table(ddb, table)
    sns = client("sns", moto_endpoint)
    sqs = client("sqs", moto_endpoint)
    topic = sns.create_topic(Name=f"ftl-{prefix}")["TopicArn"]
    queue = sqs.create_queue(QueueName=f"q-{prefix}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    for key, value in {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "FTL_JOB_TABLE": table,
        "FTL_TOPIC_ARN": topic,
    }.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("ftl_job_events", EVENTS_DIR / "handler.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop("ftl_job_events", None)
    spec.loader.exec_module(module)

    class Env:
        pass

    env = Env()
    env.module, env.ddb, env.table, env.sqs, env.queue = module, ddb, table, sqs, queue
    return env


def _job(env, name, status="InProgress"):
    env.ddb.put_item(
        TableName=env.table,
        Item={"pk": {"S": f"job#{name}"}, "job_name": {"S": name}, "status": {"S": status}},
    )


def _event(name, status, **detail):
    return {
        "id": "e1",
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": name, "TrainingJobStatus": status, **detail},
    }


def _item(env, name):
    item = env.ddb.get_item(TableName=env.table, Key={"pk": {"S": f"job#{name}"}})["Item"]
    return {k: next(iter(v.values())) for k, v in item.items()}


def _messages(env):
    out = env.sqs.receive_message(QueueUrl=env.queue, MaxNumberOfMessages=10)
    return [json.loads(json.loads(m["Body"])["Message"]) for m in out.get("Messages", [])]


def test_completed_spot_job_records_billable_time_and_savings(events, prefix):
    _job(events, prefix)
    result = events.module.handler(
        _event(
            prefix,
            "Completed",
            SecondaryStatus="Completed",
            EnableManagedSpotTraining=True,
            BillableTimeInSeconds=1200,
            TrainingTimeInSeconds=4000,
        ),
        FakeContext(),
    )
    assert result["updated"] is True and result["spot_savings_percent"] == 70.0
    item = _item(events, prefix)
    assert item["status"] == "Completed" and item["billable_seconds"] == "1200"
    assert item["spot_savings_percent"] == "70.0"
    (message,) = _messages(events)
    assert message["job_name"] == prefix and message["spot_savings_percent"] == 70.0


def test_interruption_updates_the_ledger_without_a_notification(events, prefix):
    _job(events, prefix)
    events.module.handler(
        _event(prefix, "InProgress", SecondaryStatus="Interrupted"), FakeContext()
    )
    assert _item(events, prefix)["secondary_status"] == "Interrupted"
    assert _messages(events) == []


def test_failure_reason_is_recorded_and_announced(events, prefix):
    _job(events, prefix)
    events.module.handler(
        _event(prefix, "Failed", FailureReason="AlgorithmError: OOM"), FakeContext()
    )
    assert _item(events, prefix)["failure_reason"] == "AlgorithmError: OOM"
    assert _messages(events)[0]["status"] == "Failed"


def test_on_demand_jobs_have_no_savings(events):
    summary = events.module.summarize(
        {
            "TrainingJobStatus": "Completed",
            "EnableManagedSpotTraining": False,
            "BillableTimeInSeconds": 10,
            "TrainingTimeInSeconds": 10,
        }
    )
    assert "spot_savings_percent" not in summary


def test_events_for_unknown_jobs_never_create_records(events, prefix):
    result = events.module.handler(_event(prefix, "Completed"), FakeContext())
    assert result["updated"] is False
    assert events.ddb.scan(TableName=events.table)["Items"] == []


def test_malformed_events_are_ignored(events):
    assert events.module.handler({"detail": {}}, FakeContext()) == {"updated": False}
