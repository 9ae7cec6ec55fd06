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


def _job_with_team(env, name, **values):
    item = {
        "pk": {"S": f"job#{name}"},
        "job_name": {"S": name},
        "status": {"S": "InProgress"},
        "team": {"S": "nlp"},
        "instance_count": {"N": "2"},
        "price_usd_per_hour": {"N": "30.0"},
        "estimated_max_cost_usd": {"N": "60.0"},
    }
    item.update(values)
    env.ddb.put_item(TableName=env.table, Item=item)


def _usage(env, month, instances=2, reserved=60.0):
    env.ddb.put_item(
        TableName=env.table,
        Item={
            "pk": {"S": "usage#nlp"},
            "month": {"S": month},
            "instances": {"N": str(instances)},
            "reserved": {"N": str(reserved)},
            "spend": {"N": "0"},
            "committed": {"N": str(reserved)},
        },
    )


@pytest.mark.parametrize(
    "event",
    [
        {"detail": {}},
        "not an object",
        {"source": "aws.sagemaker", "detail-type": "Other", "detail": {}},
        _event("ok-1", "Sleeping"),
        _event("bad name!", "Completed"),
        _event("ok-1", "Completed", BillableTimeInSeconds=-5),
        _event("ok-1", "Completed", BillableTimeInSeconds="lots"),
        _event("ok-1", "Completed", BillableTimeInSeconds=True),
        _event("ok-1", "Completed", TrainingTimeInSeconds=1e300),
        _event("ok-1", "InProgress", SecondaryStatus={"x": 1}),
        {**_event("ok-1", "Completed"), "source": "attacker"},
        {**_event("ok-1", "Completed"), "time": "yesterday"},
    ],
)
def test_malformed_events_are_dropped_and_never_stored(events, event):
    _job(events, "ok-1")
    before = _item(events, "ok-1")
    result = events.module.handler(event, FakeContext())
    assert result["updated"] is False and result["dropped"]
    assert _item(events, "ok-1") == before
    assert _messages(events) == []


def test_numbers_are_coerced_safely(events, prefix):
    _job(events, prefix)
    events.module.handler(
        _event(prefix, "Completed", BillableTimeInSeconds="120", TrainingTimeInSeconds=200.0),
        FakeContext(),
    )
    item = _item(events, prefix)
    assert (item["billable_seconds"], item["training_seconds"]) == ("120", "200")


def test_a_terminal_status_is_never_overwritten(events, prefix):
    _job(events, prefix)
    events.module.handler(_event(prefix, "Completed"), FakeContext())
    late = events.module.handler(_event(prefix, "InProgress", SecondaryStatus="Training"), None)
    assert late["updated"] is False
    assert _item(events, prefix)["status"] == "Completed"


def test_an_older_event_does_not_replace_a_newer_one(events, prefix):
    _job(events, prefix)
    newer = {
        **_event(prefix, "InProgress", SecondaryStatus="Training"),
        "time": "2026-11-22T10:05:00Z",
    }
    older = {
        **_event(prefix, "InProgress", SecondaryStatus="Starting"),
        "time": "2026-11-22T10:00:00Z",
    }
    assert events.module.handler(newer, FakeContext())["updated"] is True
    assert events.module.handler(older, FakeContext())["updated"] is False
    assert _item(events, prefix)["secondary_status"] == "Training"


def test_the_end_of_a_team_job_records_its_cost_and_gives_usage_back_once(events, prefix):
    month = events.module.Q.month_of(events.module._now())
    _job_with_team(events, prefix)
    _usage(events, month)
    done = _event(prefix, "Completed", BillableTimeInSeconds=1800)
    assert events.module.handler(done, FakeContext())["cost_usd"] == 30.0  # 0.5 h x 2 x 30
    assert events.module.handler(done, FakeContext())["updated"] is False
    item = _item(events, prefix)
    assert item["cost_usd"] == "30.0" and item["usage_released"] is True
    usage = events.ddb.get_item(TableName=events.table, Key={"pk": {"S": "usage#nlp"}})["Item"]
    assert usage["instances"]["N"] == "0" and float(usage["reserved"]["N"]) == 0
    assert float(usage["spend"]["N"]) == 30.0 and float(usage["committed"]["N"]) == 30.0


def test_a_job_ending_in_a_new_month_counts_there(events, prefix):
    month = events.module.Q.month_of(events.module._now())
    _job_with_team(events, prefix)
    _usage(events, "2001-01")
    events.module.handler(_event(prefix, "Stopped", BillableTimeInSeconds=3600), FakeContext())
    usage = events.ddb.get_item(TableName=events.table, Key={"pk": {"S": "usage#nlp"}})["Item"]
    assert usage["month"]["S"] == month and float(usage["spend"]["N"]) == 60.0
