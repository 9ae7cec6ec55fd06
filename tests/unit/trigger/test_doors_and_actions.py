"""The launcher through both doors against moto: every contract action and its errors."""

from __future__ import annotations

import json

import pytest
from botocore.awsrequest import AWSResponse

from tests.expected import JOB_FIELDS, SHIPPED_TEMPLATES
from tests.lambda_support import emf_records, emf_totals, http_event
from testsupport import ROLE_ARN


def body(resp):
    return json.loads(resp["body"])


def test_submit_direct_starts_a_spot_job_with_checkpoints(launcher, prefix):
    resp = launcher(
        {
            "template": "bert-large-qa",
            "job_name": prefix,
            "hyperparameters": {"learning_rate": 3e-5},
            "instance_count": 2,
        }
    )
    assert set(resp) == JOB_FIELDS, resp
    assert resp["status"] == "InProgress"
    assert resp["spot"] is True and resp["instance_count"] == 2
    name = resp["job_name"]
    assert name.startswith(prefix + "-") and len(name) <= 63
    assert resp["checkpoint_s3_uri"] == f"s3://ftl-checkpoints/{name}/"
    assert resp["output_s3_uri"] == f"s3://ftl-artifacts/{name}/"
    job = launcher.sagemaker.describe_training_job(TrainingJobName=name)
    assert job["EnableManagedSpotTraining"] is True
    assert job["CheckpointConfig"]["S3Uri"] == resp["checkpoint_s3_uri"]
    assert (
        job["StoppingCondition"]["MaxWaitTimeInSeconds"]
        >= job["StoppingCondition"]["MaxRuntimeInSeconds"]
    )
    assert job["RoleArn"] == ROLE_ARN
    assert job["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert json.loads(job["HyperParameters"]["learning_rate"]) == 3e-5
    assert json.loads(job["HyperParameters"]["sagemaker_distributed_dataparallel_enabled"])


def test_submit_records_who_asked_and_the_rendered_hash(launcher, prefix):
    resp = launcher(
        http_event("POST", "/jobs", {"template": "distilbert-spot", "job_name": prefix})
    )
    assert resp["statusCode"] == 201
    name = body(resp)["job_name"]
    (item,) = [i for i in launcher.ledger_items() if i["pk"]["S"] == f"job#{name}"]
    assert item["requested_by"]["S"] == "arn:aws:iam::123456789012:user/data-scientist"
    assert len(item["rendered_hash"]["S"]) == 64
    assert item["status"]["S"] == "InProgress"
    assert json.loads(item["request"]["S"])["template"] == "distilbert-spot"


def test_direct_invoke_records_the_door(launcher, prefix):
    name = launcher({"template": "distilbert-spot", "job_name": prefix})["job_name"]
    described = launcher({"action": "describe", "job_name": name})
    assert described["requested_by"] == "direct-invoke"


def test_replay_with_the_same_token_returns_the_first_job(launcher, prefix):
    request = {"template": "distilbert-spot", "job_name": prefix, "client_token": prefix}
    first = launcher(http_event("POST", "/jobs", request))
    again = launcher(http_event("POST", "/jobs", request))
    assert (first["statusCode"], again["statusCode"]) == (201, 200)
    assert body(first)["job_name"] == body(again)["job_name"]
    assert launcher({**request, "action": "submit"})["job_name"] == body(first)["job_name"]
    assert len(launcher.jobs_named(prefix)) == 1


def test_same_token_different_request_is_a_conflict(launcher, prefix):
    launcher({"template": "distilbert-spot", "job_name": prefix, "client_token": prefix})
    resp = launcher(
        http_event(
            "POST",
            "/jobs",
            {
                "template": "distilbert-spot",
                "job_name": prefix,
                "client_token": prefix,
                "spot": False,
            },
        )
    )
    assert resp["statusCode"] == 409
    assert body(resp)["error"]["type"] == "Conflict"
    assert body(resp)["error"]["field"] == "client_token"
    assert len(launcher.jobs_named(prefix)) == 1


def test_describe_both_doors(launcher, prefix):
    name = launcher({"template": "distilbert-spot", "job_name": prefix})["job_name"]
    direct = launcher({"action": "describe", "job_name": name})
    http = launcher(http_event("GET", f"/jobs/{name}"))
    assert http["statusCode"] == 200
    assert body(http)["job_name"] == direct["job_name"] == name
    # moto finishes jobs at once; describe reads the fresh status back into the ledger.
    assert direct["status"] == "Completed"
    assert {"secondary_status", "created_at", "requested_by"} <= set(direct)


def test_the_transitions_the_trigger_writes_publish_their_fleet_metrics(launcher, prefix, capsys):
    """The trigger writes the start (Submitting -> InProgress) and, when its describe sees the
    end first, the end: it prints their EMF lines, once each, so the running level is back to
    0 (the job-events function then finds no transition left to publish)."""
    name = launcher({"template": "distilbert-spot", "job_name": prefix})["job_name"]
    started = emf_totals(emf_records(capsys.readouterr().out), name)
    assert started == {"JobsStarted": 1, "InstancesRunningChange": 1}
    assert launcher({"action": "describe", "job_name": name})["status"] == "Completed"
    assert launcher({"action": "describe", "job_name": name})["status"] == "Completed"
    ended = emf_records(capsys.readouterr().out)
    assert emf_totals(ended, name) == {"JobsCompleted": 1, "InstancesRunningChange": -1}
    (record,) = ended
    assert (record["Platform"], record["Team"], record["InstanceType"]) == (
        "ftl",
        "default",
        "ml.g5.xlarge",
    )


@pytest.mark.parametrize(
    "event",
    [
        {"action": "describe", "job_name": "never-started-1"},
        http_event("GET", "/jobs/never-started-1"),
    ],
)
def test_unknown_job_is_not_found(launcher, event):
    resp = launcher(event)
    err = body(resp)["error"] if "statusCode" in resp else resp["error"]
    assert err["type"] == "NotFound" and err["field"] == "job_name"
    if "statusCode" in resp:
        assert resp["statusCode"] == 404


def test_stop_calls_sagemaker_and_records_stopping(launcher, prefix, monkeypatch):
    name = launcher({"template": "distilbert-spot", "job_name": prefix})["job_name"]
    sm = launcher.module.RUNTIME.sagemaker
    # moto finishes jobs at once and lacks StopTrainingJob: show SageMaker a running job and
    # answer the stop call in the client, asserting on the outgoing request.
    stopped = []

    def fake_describe(**kwargs):
        return {
            "TrainingJobName": name,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "TrainingJobArn": "arn:x",
        }

    def answer_stop(params, **kwargs):
        stopped.append(json.loads(params["body"])["TrainingJobName"])  # the outgoing request
        return AWSResponse("https://sagemaker", 200, {}, None), {}  # answers in the client

    monkeypatch.setattr(sm, "describe_training_job", fake_describe)
    sm.meta.events.register("before-call.sagemaker.StopTrainingJob", answer_stop)
    try:
        resp = launcher(http_event("POST", f"/jobs/{name}/stop"))
    finally:
        sm.meta.events.unregister("before-call.sagemaker.StopTrainingJob", answer_stop)
    assert resp["statusCode"] == 200, resp
    assert body(resp)["status"] == "Stopping"
    assert stopped == [name]
    (item,) = [i for i in launcher.ledger_items() if i["pk"]["S"] == f"job#{name}"]
    assert item["status"]["S"] == "Stopping"


def test_a_stop_racing_the_jobs_end_keeps_the_end_and_publishes_it_once(
    launcher, prefix, monkeypatch, capsys
):
    """The job ends (and the job-events function records ``Stopped``, printing its line)
    while the stop call is in flight: the stop's ``Stopping`` must not overwrite the terminal
    status, so no later describe records (and publishes) the same end a second time."""
    name = launcher({"template": "distilbert-spot", "job_name": prefix})["job_name"]
    sm = launcher.module.RUNTIME.sagemaker
    seen = {"TrainingJobStatus": "InProgress"}

    def fake_describe(**kwargs):
        return {"TrainingJobName": name, "TrainingJobArn": "arn:x", **seen}

    def job_ends_meanwhile(params, **kwargs):
        seen["TrainingJobStatus"] = "Stopped"  # SageMaker ended it; job-events wrote it first
        launcher.dynamodb.update_item(
            TableName=launcher.table,
            Key={"pk": {"S": f"job#{name}"}},
            UpdateExpression="SET #s = :s ADD revision :one",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": "Stopped"}, ":one": {"N": "1"}},
        )
        return AWSResponse("https://sagemaker", 200, {}, None), {}

    monkeypatch.setattr(sm, "describe_training_job", fake_describe)
    sm.meta.events.register("before-call.sagemaker.StopTrainingJob", job_ends_meanwhile)
    capsys.readouterr()
    try:
        resp = launcher({"action": "stop", "job_name": name})
    finally:
        sm.meta.events.unregister("before-call.sagemaker.StopTrainingJob", job_ends_meanwhile)
    assert resp["status"] == "Stopped", resp
    (item,) = [i for i in launcher.ledger_items() if i["pk"]["S"] == f"job#{name}"]
    assert item["status"]["S"] == "Stopped"
    assert launcher({"action": "describe", "job_name": name})["status"] == "Stopped"
    assert "JobsStopped" not in emf_totals(emf_records(capsys.readouterr().out), name)


def test_stop_of_a_finished_job_is_a_no_op(launcher, prefix):
    name = launcher({"template": "distilbert-spot", "job_name": prefix})["job_name"]
    resp = launcher({"action": "stop", "job_name": name})
    assert resp["status"] == "Completed"


def test_list_newest_first_with_filters_and_pages(launcher, prefix):
    names = [
        launcher({"template": t, "job_name": f"{prefix}-{i}"})["job_name"]
        for i, t in enumerate(["distilbert-spot", "bert-large-qa", "distilbert-spot"])
    ]
    listed = launcher({"action": "list"})["jobs"]
    assert [j["job_name"] for j in listed] == names[::-1]
    assert "secondary_status" not in listed[0]
    only = launcher(http_event("GET", "/jobs", query={"template": "bert-large-qa"}))
    assert [j["job_name"] for j in body(only)["jobs"]] == [names[1]]
    page1 = launcher({"action": "list", "limit": 2})
    assert len(page1["jobs"]) == 2 and page1["next_token"]
    page2 = launcher({"action": "list", "limit": 2, "next_token": page1["next_token"]})
    assert [j["job_name"] for j in page2["jobs"]] == [names[0]]


def test_templates_both_doors(launcher):
    direct = launcher({"action": "templates"})
    http = body(launcher(http_event("GET", "/templates")))
    assert direct == http
    names = {t["name"] for t in direct["templates"]}
    assert names == set(SHIPPED_TEMPLATES)
    bert = next(t for t in direct["templates"] if t["name"] == "bert-large-qa")
    assert bert["distribution"] == "smddp" and bert["spot"] is True
    assert bert["hyperparameters"]["overridable"]["learning_rate"]["type"] == "float"


BAD_REQUESTS = [
    ({"template": "bert-large-qa", "instance_count": 40}, "instance_count"),
    ({"template": "bert-large-qa", "instance_type": "ml.g5.xlarge"}, "instance_type"),
    ({"template": "distilbert-spot", "instance_count": 2}, "instance_count"),
    ({"template": "bert-large-qa", "hyperparameters": {"evil": 1}}, "hyperparameters.evil"),
    (
        {"template": "bert-large-qa", "hyperparameters": {"learning_rate": 5}},
        "hyperparameters.learning_rate",
    ),
    ({"template": "bert-large-qa", "max_runtime_seconds": 0}, "max_runtime_seconds"),
    (
        {"template": "bert-large-qa", "max_runtime_seconds": 7200, "max_wait_seconds": 3600},
        "max_wait_seconds",
    ),
    ({"template": "bert-large-qa", "spot": False, "max_wait_seconds": 7200}, "max_wait_seconds"),
    (
        {"template": "bert-large-qa", "inputs": {"train": "s3://someone-elses-bucket/x/"}},
        "inputs.train",
    ),
    ({"template": "bert-large-qa", "inputs": {"train": "https://ftl-data/x/"}}, "inputs.train"),
    ({"template": "bert-large-qa", "inputs": {"nope": "s3://ftl-data/x/"}}, "inputs.nope"),
    ({"template": "bert-large-qa", "tags": {"aws:owner": "me"}}, "tags.aws:owner"),
    ({"template": "bert-large-qa", "unexpected": 1}, "unexpected"),
    ({"template": "bert-large-qa", "spot": "yes"}, "spot"),
    ({"template": "bert-large-qa", "client_token": ""}, "client_token"),
    ({"template": "bert-large-qa", "job_name": "!!!"}, "job_name"),
    ({}, "template"),
]


@pytest.mark.parametrize(("request_body", "field"), BAD_REQUESTS)
def test_bad_submit_is_rejected_with_the_field_and_leaves_nothing(
    launcher, request_body, field, prefix
):
    before = len(launcher.sagemaker.list_training_jobs(MaxResults=100)["TrainingJobSummaries"])
    direct = launcher(dict(request_body))
    http = launcher(http_event("POST", "/jobs", request_body))
    assert http["statusCode"] == 400
    for err in (direct["error"], body(http)["error"]):
        assert err["type"] == "ValidationError"
        assert err["field"] == field
        assert field.split(".")[0] in err["message"]
    assert launcher.ledger_items() == []
    after = len(launcher.sagemaker.list_training_jobs(MaxResults=100)["TrainingJobSummaries"])
    assert after == before


def test_unknown_template_is_not_found(launcher):
    resp = launcher(http_event("POST", "/jobs", {"template": "gpt-17"}))
    assert resp["statusCode"] == 404
    assert body(resp)["error"] == {
        "type": "NotFound",
        "field": "template",
        "message": body(resp)["error"]["message"],
    }
    assert launcher.ledger_items() == []


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (http_event("POST", "/jobs", "{not json"), "body"),
        (http_event("POST", "/jobs", "[1, 2]"), "body"),
        (http_event("POST", "/jobs", None), "body"),
        (http_event("POST", "/jobs", {"template": "x", "action": "stop"}), "action"),
        (http_event("GET", "/jobs", query={"limit": "lots"}), "limit"),
        (http_event("GET", "/jobs", query={"next_token": "garbage"}), "next_token"),
        # Non-ASCII after the dot reached hmac.compare_digest as str (a TypeError, a 500).
        (http_event("GET", "/jobs", query={"next_token": ".\x80"}), "next_token"),
        (http_event("GET", "/jobs", query={"next_token": "e30.é"}), "next_token"),
        (http_event("GET", "/jobs", query={"status": "Sleeping"}), "status"),
        (http_event("GET", "/jobs/bad_name!"), "job_name"),
    ],
)
def test_bad_http_requests(launcher, event, field):
    resp = launcher(event)
    assert resp["statusCode"] == 400, resp
    assert body(resp)["error"]["field"] == field


@pytest.mark.parametrize("token", ["garbage", ".\x80", "e30.é"])
def test_bad_next_tokens_on_the_direct_door(launcher, token):
    err = launcher({"action": "list", "next_token": token})["error"]
    assert (err["type"], err["field"]) == ("ValidationError", "next_token")


@pytest.mark.parametrize("event", [None, [], "submit", 3, {"action": "launch"}])
def test_bad_direct_events(launcher, event):
    err = launcher(event)["error"]
    assert err["type"] == "ValidationError"


def test_unknown_route_is_not_found(launcher):
    assert launcher(http_event("DELETE", "/jobs"))["statusCode"] == 404


def test_oversized_body_is_rejected(launcher):
    resp = launcher(http_event("POST", "/jobs", json.dumps({"template": "x" * 70_000})))
    assert resp["statusCode"] == 400 and body(resp)["error"]["field"] == "body"


def test_an_unexpected_bug_is_an_error_object_not_a_trace(launcher, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("secret internals")

    monkeypatch.setitem(launcher.module.LAUNCHER.handlers, "list", boom)
    resp = launcher(http_event("GET", "/jobs"))
    assert resp["statusCode"] == 502
    err = body(resp)["error"]
    assert err["type"] == "UpstreamError" and "secret" not in err["message"]
