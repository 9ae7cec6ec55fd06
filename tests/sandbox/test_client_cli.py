"""The ``ftl`` command against the deployed sandbox, through its real entry point in a
subprocess: both doors (Lambda invoke and the SigV4 HTTP API), its output, exit codes and
the launcher's errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sandbox.http_api import LocalHttpApi
from tests.expected import SHIPPED_TEMPLATES

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).parent / "ftl"
FTL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "ftl_client"]
BAD_COUNT = (
    "error: ValidationError: instance_count must be between 1 and 16 for template "
    "bert-large-qa, got 40 (field: instance_count)"
)


@pytest.fixture(scope="module")
def ftl(deployed):
    env = {k: v for k, v in deployed.env.items() if not k.startswith("FTL_")}

    def run(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*FTL, *args],
            env={**env, **(extra_env or {})},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    return run


@pytest.fixture(scope="module")
def http_api(deployed):
    with LocalHttpApi(deployed.endpoint, deployed.output("TriggerFunctionName")) as api:
        yield api


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_templates_as_a_table_and_as_json(deployed, ftl):
    table = ok(ftl("templates"))
    assert table.splitlines()[0].split() == [
        "TEMPLATE",
        "DIST",
        "INSTANCES",
        "INSTANCE",
        "TYPES",
        "SPOT",
        "MAX",
        "RUN",
        "INPUTS",
        "OVERRIDABLE",
    ]
    for name in SHIPPED_TEMPLATES:
        assert name in table
    assert "learning_rate: float 1e-06..0.001" in table and "ml.p4d.24xlarge*" in table
    data = deployed.output("DataBucketName")
    assert f"train (required) default s3://{data}/squad/train/" in table
    assert "(legacy)" in table and "legacy: gpt-tp-sharded: " in table
    templates = json.loads(ok(ftl("templates", "--json")))["templates"]
    assert [t["name"] for t in templates] == SHIPPED_TEMPLATES


def test_submit_status_list_stop(deployed, ftl):
    data = deployed.output("DataBucketName")
    args = [
        *("--json", "submit", "distilbert-spot"),
        *("--set", "learning_rate=3e-5", "--set", "num_train_epochs=2"),
        *("--set", "model_name_or_path=distilbert-base-cased"),
        *("--instances", "1", "--instance-type", "ml.g5.2xlarge"),
        *("--max-runtime", "2h", "--max-wait", "4h"),
        *("--input", f"train=s3://{data}/imdb/train/", "--tag", "team=nlp"),
        *("--name", "cli run", "--token", "cli-run-1"),
    ]
    submitted = json.loads(ok(ftl(*args)))
    name = submitted["job_name"]
    assert name.startswith("cli-run-") and submitted["instance_type"] == "ml.g5.2xlarge"

    sm = deployed.client("sagemaker").describe_training_job(TrainingJobName=name)
    hp = sm["HyperParameters"]
    assert json.loads(hp["learning_rate"]) == 3e-5 and json.loads(hp["num_train_epochs"]) == 2
    assert json.loads(hp["model_name_or_path"]) == "distilbert-base-cased"
    assert sm["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    channels = {c["ChannelName"]: c for c in sm["InputDataConfig"]}
    assert channels["train"]["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{data}/imdb/train/"
    tags = deployed.client("sagemaker").list_tags(ResourceArn=sm["TrainingJobArn"])["Tags"]
    assert {"Key": "team", "Value": "nlp"} in tags

    # The same token and request is a replay, not a second job.
    again = json.loads(ok(ftl(*args)))
    assert again["job_name"] == name and again["replayed"] is True
    replay = ftl(
        *("--json", "submit", "distilbert-spot", "--token", "cli-run-1", "--name", "other")
    )
    assert replay.returncode == 2 and replay.stderr == ""
    assert json.loads(replay.stdout)["error"]["type"] == "Conflict"

    status = ok(ftl("status", name))
    lines = [line.split(None, 1) for line in status.splitlines()]
    assert lines[0] == ["job_name", name] and ["status", "Completed"] in lines
    described = json.loads(ok(ftl("status", name, "--json")))
    assert described["status"] == "Completed" and described["requested_by"] == "direct-invoke"

    listed = ok(ftl("list", "--template", "distilbert-spot"))
    assert listed.splitlines()[0].startswith("JOB ") and name in listed
    jobs = json.loads(ok(ftl("list", "--status", "Completed", "--json")))["jobs"]
    assert name in [j["job_name"] for j in jobs]

    stopped = ok(ftl("stop", name))
    assert stopped.strip() == f"{name} is already Completed; nothing to stop"


def test_submit_wait_ends_with_the_outcome(ftl):
    proc = ftl("submit", "distilbert-spot", "--name", "cli-wait", "--wait", "--poll", "0.2")
    out = ok(proc)
    name = out.splitlines()[0].removeprefix("submitted ")
    assert name.startswith("cli-wait-")
    assert f"Completed: {name}" in out
    # moto's FinalMetricDataList, read back into the ledger by the launcher's describe
    assert "final metrics: train:progress=100" in out
    assert "spot interruptions: 0" in out and "output: s3://" in out


def test_wait_reports_billable_time_and_spot_savings(deployed, ftl):
    name = json.loads(ok(ftl("--json", "submit", "distilbert-spot", "--name", "cli-bill")))[
        "job_name"
    ]
    lam = deployed.client("lambda")
    events_fn = next(
        f["FunctionName"]
        for f in lam.list_functions()["Functions"]
        if "JobEventsHandler" in f["FunctionName"]
    )
    transitions = ["Starting", "Training", "Interrupted", "Training", "Completed"]
    detail = {
        "TrainingJobName": name,
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "EnableManagedSpotTraining": True,
        "BillableTimeInSeconds": 300,
        "TrainingTimeInSeconds": 1000,
        "FinalMetricDataList": [{"MetricName": "eval_f1", "Value": 91.5, "Timestamp": 0}],
        "SecondaryStatusTransitions": [{"Status": s, "StartTime": 0} for s in transitions],
    }
    event = {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": detail,
    }
    reply = lam.invoke(FunctionName=events_fn, Payload=json.dumps(event).encode())
    assert json.loads(reply["Payload"].read())["updated"] is True
    out = ok(ftl("wait", name, "--poll", "0.2"))
    assert "billable time: 0:05:00 of 0:16:40 training" in out
    assert "spot savings: 70.0%" in out
    assert "final metrics: eval_f1=91.5" in out and "spot interruptions: 1" in out
    # From the ledger (the job-events function stored the event's), not from SageMaker: the
    # client never calls DescribeTrainingJob.
    result = json.loads(ok(ftl("--json", "wait", name)))
    assert result["spot_savings_percent"] == 70.0 and result["spot_interruptions"] == 1
    assert result["final_metrics"] == {"eval_f1": 91.5}
    described = json.loads(ok(ftl("--json", "status", name)))
    assert described["final_metrics"] == {"eval_f1": 91.5}
    assert described["spot_interruptions"] == 1


def test_logs_prints_the_jobs_streams_in_order(deployed, ftl):
    name = json.loads(ok(ftl("--json", "submit", "distilbert-spot", "--name", "cli-logs")))[
        "job_name"
    ]
    logs = deployed.client("logs")
    group = "/aws/sagemaker/TrainingJobs"
    try:
        logs.create_log_group(logGroupName=group)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    now = int(time.time() * 1000)
    lines = {
        f"{name}/algo-1-1700000000": [(0, "epoch 1 step 50 loss 0.69"), (20, "saved checkpoint")],
        f"{name}/algo-2-1700000000": [(10, "worker 2 ready")],
        f"{name}x/algo-1-1700000000": [(5, "another job's line")],
    }
    for stream, events in lines.items():
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        logs.put_log_events(
            logGroupName=group,
            logStreamName=stream,
            logEvents=[{"timestamp": now + t, "message": m} for t, m in events],
        )
    expected = [
        "[algo-1-1700000000] epoch 1 step 50 loss 0.69",
        "[algo-2-1700000000] worker 2 ready",
        "[algo-1-1700000000] saved checkpoint",
    ]
    assert ok(ftl("logs", name)).splitlines() == expected
    assert ok(ftl("logs", name, "--follow", "--poll", "0.2")).splitlines() == expected
    records = [json.loads(line) for line in ok(ftl("--json", "logs", name)).splitlines()]
    assert [r["message"] for r in records] == [e.split("] ")[1] for e in expected]
    assert records[0]["stream"] == f"{name}/algo-1-1700000000"
    empty = ftl("logs", json.loads(ok(ftl("--json", "submit", "distilbert-spot")))["job_name"])
    assert empty.returncode == 0 and empty.stdout == "" and "no log lines" in empty.stderr


def test_the_http_door_signs_requests_and_knows_the_caller(ftl, http_api):
    http = ["--via", "http", "--api-url", http_api.url]
    templates = json.loads(ok(ftl(*http, "--json", "templates")))["templates"]
    assert [t["name"] for t in templates] == SHIPPED_TEMPLATES
    out = ok(
        ftl(*http, "submit", "distilbert-spot", "--name", "cli-http", "--wait", "--poll", "0.2")
    )
    name = out.splitlines()[0].removeprefix("submitted ")
    assert name.startswith("cli-http-") and f"Completed: {name}" in out
    described = json.loads(ok(ftl(*http, "--json", "status", name)))
    assert described["requested_by"] == "arn:aws:iam::123456789012:user/sandbox-testing"
    jobs = json.loads(ok(ftl(*http, "--json", "list", "--status", "Completed", "--limit", "5")))
    assert len(jobs["jobs"]) <= 5 and jobs["jobs"]
    assert "nothing to stop" in ok(ftl(*http, "stop", name))
    bad = ftl(*http, "submit", "bert-large-qa", "--instances", "40")
    assert (bad.returncode, bad.stderr) == (2, BAD_COUNT + "\n")
    # The API URL from the environment works too.
    via_env = ftl("templates", "--json", extra_env={"FTL_API_URL": http_api.url, "FTL_VIA": "http"})
    assert json.loads(ok(via_env))["templates"]


def test_unsigned_http_requests_are_rejected(http_api):
    request = urllib.request.Request(
        http_api.url + "jobs",
        data=json.dumps({"template": "distilbert-spot"}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 403 and json.loads(info.value.read()) == {"message": "Forbidden"}


def test_launcher_errors_are_one_line_with_the_field(ftl):
    bad = ftl("submit", "bert-large-qa", "--instances", "40")
    assert (bad.returncode, bad.stdout, bad.stderr) == (2, "", BAD_COUNT + "\n")
    unknown = ftl("submit", "no-such-template")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: NotFound: ") and unknown.stderr.count("\n") == 1
    assert unknown.stderr.rstrip().endswith("(field: template)")
    missing_job = ftl("status", "no-such-job-20260101-0000-abcd")
    assert missing_job.returncode == 2 and missing_job.stderr.startswith("error: NotFound: ")


def test_bad_flags_exit_2_with_one_line_and_a_pointer_to_help(ftl):
    for args in (
        ["submit"],
        ["submit", "distilbert-spot", "--set", "learning_rate"],
        ["submit", "distilbert-spot", "--instances", "many"],
        ["frobnicate"],
    ):
        proc = ftl(*args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("error: ftl") and "usage:" not in proc.stderr, args
        assert proc.stderr.splitlines()[1].startswith("  see: ftl"), args


def test_finding_the_launcher(deployed, ftl):
    missing = ftl("--stack", "no-such-stack", "templates")
    assert missing.returncode == 2
    assert missing.stderr.startswith(
        "error: ConfigError: stack no-such-stack not found in us-east-1; "
    )
    from_env = ftl("templates", extra_env={"FTL_STACK": "no-such-stack"})
    assert from_env.returncode == 2 and "stack no-such-stack not found" in from_env.stderr
    fn = deployed.output("TriggerFunctionName")
    by_name = ftl("--json", "templates", extra_env={"FTL_FUNCTION_NAME": fn, "FTL_STACK": "x"})
    assert json.loads(ok(by_name))["templates"]
    no_fn = ftl("--function", "no-such-function", "templates")
    assert no_fn.returncode == 2
    assert no_fn.stderr == (
        "error: ConfigError: launcher function no-such-function not found in us-east-1\n"
    )


def test_doctor_against_the_deployed_sandbox_shows_the_p5_shortfall(deployed, ftl):
    """``ftl doctor`` reads the deployed stacks, the Service Quotas stand-in (p5: 0 by
    default), IAM and the CDK bootstrap's version; a default job that can never start makes
    it exit 4."""
    text = ok(ftl("doctor"))
    assert "deployed platform" in text and "nothing blocks" in text
    assert "[WARN ] quota: ml.p5.48xlarge on-demand: quota 'ml.p5.48xlarge for training" in text
    assert "--service-code sagemaker --quota-code L-" in text
    assert "[ok   ] version: ftl-launcher: 0.1.0, as this client" in text
    assert "[ok   ] version: ftl-foundation: 0.1.0" in text
    assert "aws iam create-service-linked-role" in text  # moto has no such role
    assert "iam:CreateServiceLinkedRole" in text  # what creating it needs
    # the sandbox deploy ran `cdk bootstrap`, whose stack wrote the version parameter
    assert "[ok   ] bootstrap: /cdk-bootstrap/hnb659fds/version: bootstrap version " in text
    quotas = deployed.sandbox.quotas
    saved = dict(quotas.values)
    quotas.set("ml.g5.xlarge", spot=0)  # distilbert-spot's default job
    try:
        proc = ftl("doctor", "--json")
    finally:
        quotas.values.update(saved)
    report = json.loads(proc.stdout)
    assert proc.returncode == report["exit_status"] == 4, proc.stderr
    (block,) = [f for f in report["findings"] if f["status"] == "block"]
    assert block["subject"] == "ml.g5.xlarge spot" and block["value"] == 0
    assert "distilbert-spot" in block["templates"]
