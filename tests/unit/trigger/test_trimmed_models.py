"""The trigger asset's trimmed botocore models serve every call the launcher makes.

Two proofs: a scan of the trigger's code for client method calls, each of which must be a
declared operation, and the launcher's flows (submit through both doors, replay, describe,
list, stop) run from the real bundle, whose clients load only the trimmed models, against moto
(direct mode) and against the sandbox's AWS Batch stand-in (queue mode).
"""

from __future__ import annotations

import ast
import gzip
import json
import uuid
from functools import cache
from pathlib import Path

import botocore.session
import pytest
from botocore.awsrequest import AWSResponse

from ftl_constructs.botocore_models import (
    declared_operations,
    latest_version,
    trim_service_model,
)
from ftl_constructs.bundling import (
    BOTOCORE_DATA,
    LEDGER_PACKAGE,
    ROOT,
    TRIGGER_OPERATIONS,
    lambda_bundle,
)
from tests.lambda_support import (
    FakeContext,
    create_ledger_table,
    http_event,
    load_handler,
    trigger_env,
)
from tests.lambda_support import client as moto_client

OPERATIONS = declared_operations(TRIGGER_OPERATIONS)
TRIGGER_CODE = ROOT / "lambda" / "trigger"


@cache
def _bundle() -> Path:
    return lambda_bundle(
        "trigger-trimmed-test",
        code_dir=TRIGGER_CODE,
        packages=[ROOT / "jobmodel", LEDGER_PACKAGE],
        aws_operations=OPERATIONS,
    )


def _receiver(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _client_calls() -> set[str]:
    """Methods called on a client: ``<...>.sagemaker.x(...)``, ``<...>.client.x(...)`` (clients
    live in attributes named after their service, or ``client``/``*_client``), plus every
    ``get_paginator("name")``/``get_waiter("name")`` argument."""
    clients = {*OPERATIONS, "client"}
    names: set[str] = set()
    for path in [*TRIGGER_CODE.rglob("*.py"), *LEDGER_PACKAGE.rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = _receiver(node.func.value)
            if receiver in clients or receiver.endswith("_client"):
                names.add(node.func.attr)
            if node.func.attr in ("get_paginator", "get_waiter") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names.add(arg.value)
    return names


def test_every_client_call_in_the_trigger_is_a_declared_operation():
    session = botocore.session.get_session()
    full = {
        service: session.create_client(
            service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
        ).meta.method_to_api_mapping
        for service in OPERATIONS
    }
    called = _client_calls()
    found = set()
    for name in called:
        owners = {service: methods[name] for service, methods in full.items() if name in methods}
        if owners:
            found.add(name)
            assert any(op in OPERATIONS[s] for s, op in owners.items()), (
                f"the trigger calls {name}() ({', '.join(f'{s}:{o}' for s, o in owners.items())})"
                f" but ftl_trigger/aws_operations.py does not declare it"
            )
    # The scan sees the launcher's calls (it is not vacuous), and only client calls.
    assert {"create_training_job", "describe_training_job", "get_item", "query"} <= found
    # Queue mode's Batch calls (ftl_trigger/backends/queue/service_jobs.py) are seen too.
    assert {
        "submit_service_job",
        "describe_service_job",
        "list_service_jobs",
        "terminate_service_job",
        "get_job_queue_snapshot",
    } <= found
    assert called - found <= {"get_paginator", "get_waiter", "can_paginate"}, called - found


def test_the_bundle_carries_models_trimmed_from_the_installed_botocore():
    data = Path(botocore.__file__).parent / "data"
    shipped = _bundle() / BOTOCORE_DATA
    for service, operations in OPERATIONS.items():
        version = latest_version(data, service)
        full = json.loads(
            gzip.decompress((data / service / version / "service-2.json.gz").read_bytes())
        )
        model = json.loads((shipped / service / version / "service-2.json").read_text())
        assert model == json.loads(json.dumps(trim_service_model(full, operations)))
        assert sorted(model["operations"]) == sorted(operations)
        assert (shipped / service / version / "endpoint-rule-set-1.json").is_file()
    # Generated, never kept in the repository.
    assert not list(ROOT.glob(f"lambda/**/{BOTOCORE_DATA}"))


def test_an_undeclared_operation_is_refused_at_synth(tmp_path):
    with pytest.raises(ValueError, match="SageMaker has no operation.*NoSuchCall"):
        lambda_bundle(
            "trigger-bad-ops",
            code_dir=TRIGGER_CODE,
            aws_operations={"sagemaker": ("NoSuchCall",)},
        )


@pytest.fixture
def bundled(moto_endpoint, monkeypatch, tmp_path):
    """The handler imported from the built bundle, so its clients use the trimmed models."""
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(moto_client("dynamodb", moto_endpoint), table)
    module = load_handler(_bundle(), monkeypatch, trigger_env(moto_endpoint, tmp_path, table=table))
    assert module.RUNTIME.sagemaker.meta.service_model.operation_names == sorted(
        OPERATIONS["sagemaker"]
    )
    assert module.RUNTIME.dynamodb.meta.service_model.operation_names == sorted(
        OPERATIONS["dynamodb"]
    )
    return module


def _call(module, event):
    # HTTP events come through the http alias, as the HTTP API invokes it (docs/API.md, Doors).
    alias = "http" if "requestContext" in event else None
    return module.handler(event, FakeContext(alias=alias))


def test_launcher_flows_run_on_the_trimmed_models(bundled, prefix):
    first = _call(bundled, {"template": "distilbert-spot", "job_name": prefix})
    assert first["status"] == "InProgress", first
    request = {"template": "bert-large-qa", "job_name": f"{prefix}-h", "client_token": prefix}
    created = _call(bundled, http_event("POST", "/jobs", request))
    replay = _call(bundled, http_event("POST", "/jobs", request))
    assert (created["statusCode"], replay["statusCode"]) == (201, 200), created
    described = _call(bundled, {"action": "describe", "job_name": first["job_name"]})
    assert described["job_name"] == first["job_name"]
    listed = _call(bundled, {"action": "list", "limit": 1})
    assert len(listed["jobs"]) == 1 and listed.get("next_token")
    assert _call(bundled, {"action": "list", "next_token": listed["next_token"]})["jobs"]


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self):
        yield self.data


def test_stop_serializes_and_parses_with_the_trimmed_model(bundled, prefix, monkeypatch):
    name = _call(bundled, {"template": "distilbert-spot", "job_name": prefix})["job_name"]
    sm = bundled.RUNTIME.sagemaker
    running = sm.describe_training_job(TrainingJobName=name)
    running.update(TrainingJobStatus="InProgress", SecondaryStatus="Training")
    monkeypatch.setattr(sm, "describe_training_job", lambda **_: running)
    sent = []

    def answer(request, **_):  # after serialization: the trimmed model built this request
        sent.append(json.loads(request.body)["TrainingJobName"])
        return AWSResponse(request.url, 200, {}, _Body(b"{}"))

    sm.meta.events.register("before-send.sagemaker.StopTrainingJob", answer)
    try:
        resp = _call(bundled, {"action": "stop", "job_name": name})
    finally:
        sm.meta.events.unregister("before-send.sagemaker.StopTrainingJob", answer)
    assert resp["status"] == "Stopping", resp
    assert sent == [name]


@pytest.fixture
def bundled_queue(batch_sandbox, monkeypatch, tmp_path):
    """The bundle's handler in queue mode, on a stand-in queue of one instance."""
    from jobmodel.capacity.scheduler import SchedulerConfig

    queue_arn = batch_sandbox.batch.create_queue(f"q-{uuid.uuid4().hex[:8]}", capacity=1)
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(moto_client("dynamodb", batch_sandbox.endpoint), table)
    env = trigger_env(batch_sandbox.endpoint, tmp_path, table=table)
    env |= SchedulerConfig(scheduler="queue", job_queue_arn=queue_arn).to_env()
    module = load_handler(_bundle(), monkeypatch, env)
    assert module.RUNTIME.batch.meta.service_model.operation_names == sorted(OPERATIONS["batch"])
    return module, queue_arn


def test_queue_flows_run_on_the_trimmed_batch_model(bundled_queue, prefix):
    """Every Batch operation the trigger calls, serialized and parsed by the trimmed model."""
    module, queue_arn = bundled_queue
    request = {"template": "distilbert-spot", "job_name": prefix, "client_token": prefix}
    running = _call(module, request)  # SubmitServiceJob
    assert running["status"] == "Queued", running
    assert _call(module, request)["batch_job_id"] == running["batch_job_id"]
    waiting = _call(module, {"template": "distilbert-spot", "job_name": f"{prefix}-b"})
    # DescribeServiceJob + DescribeTrainingJob (Batch started it), then + GetJobQueueSnapshot.
    started = _call(module, {"action": "describe", "job_name": running["job_name"]})
    assert started["training_job_name"].startswith("AWSBatch"), started
    queued = _call(module, {"action": "describe", "job_name": waiting["job_name"]})
    assert queued["queue_position"] == 1, queued
    listed = _call(module, {"action": "list", "status": "Queued"})["jobs"]
    assert [j["queue_position"] for j in listed] == [1]
    # ListServiceJobs (the look-up after a lost SubmitServiceJob answer).
    from ftl_trigger.backends.queue import service_jobs as batch

    found = batch.find_by_name(module.RUNTIME.batch, queue_arn, waiting["job_name"])
    assert found["jobId"] == waiting["batch_job_id"]
    # TerminateServiceJob, for a waiting and a started job.
    assert _call(module, {"action": "stop", "job_name": waiting["job_name"]})["status"] == "Stopped"
    stop = _call(module, {"action": "stop", "job_name": running["job_name"]})
    assert stop["status"] == "Stopping", stop


def test_an_evaluations_s3_calls_run_on_the_trimmed_models(bundled, moto_endpoint, prefix):
    """Issue 36: the results read the evaluation's output and write the metrics JSON."""
    moto_client("s3", moto_endpoint).create_bucket(Bucket=prefix)
    s3 = bundled.RUNTIME.s3_client()
    assert s3.meta.service_model.operation_names == ["GetObject", "PutObject"]
    s3.put_object(Bucket=prefix, Key="j/evaluation/model-metrics.json", Body=b"{}")
    assert (
        s3.get_object(Bucket=prefix, Key="j/evaluation/model-metrics.json")["Body"].read() == b"{}"
    )
