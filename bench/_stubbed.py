"""The trigger's submit with AWS answered by botocore's Stubber, from the calls a real submit makes.

Hand-written stubs go stale silently: when the submit learned to read the price item and to
send its started notice, the benchmarks' stubs answered the wrong calls and the failure came
back as an ``UpstreamError`` (issue 35). Here the answers come from the code itself:

* :func:`record` loads the deployed handler (from its asset, ``bench._common.trigger_asset``)
  with the given environment against moto in this process, with what a deployed platform
  holds: the ledger table, the platform's topic and event bus, and the price item the price
  refresh keeps. moto has no AWS Batch service jobs and no Service Quotas, so the Batch client
  answers ``SubmitServiceJob`` from a canned answer and the quotas (kept 15 minutes by a warm
  container) are read once from the sandbox's stand-in (``sandbox/service_quotas.py``). It runs
  a first submit (a cold container: it also reads the price item) and a second (a warm one)
  and keeps each one's AWS calls in order, with moto's answer (or error).
* :class:`StubbedSubmit` loads a fresh handler with the same environment whose clients'
  Stubbers answer exactly those calls: the first submit with the first recording, every later
  one with the second. Botocore still validates and serialises every request against the
  asset's trimmed models; nothing is sent. Answers are replayed as recorded (a read of the
  job answers the recorded job's item: the same size and the same work).
* :func:`check_calls` compares a recording with the sequence the benchmark says it measures
  (:data:`DIRECT`, :data:`NOTICE`, :data:`QUEUED`) and raises :class:`CallsChanged`, naming
  both, when the submit's AWS calls changed; so does a submit that made a call its stubs do
  not answer. A changed sequence is then a loud failure, not a quietly different measurement.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import REQUEST, offline_env
from testsupport import ACCOUNT, REGION, create_ledger_table

QUEUE_ARN = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/ftl-training"
TOPIC_NAME = "ftl-job-ends"
TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT}:{TOPIC_NAME}"
EVENT_BUS = "default"  # ftl_constructs.team_topics.EVENT_BUS
# The price refresh's item for the benchmark's instance type (USD an hour).
PRICES = {"ml.p4d.24xlarge": 37.688, "ml.g5.2xlarge": 1.515}

# A warm direct submit without notifications: the token look-up, the claim, the start and the
# start's write.
DIRECT = (
    "dynamodb:GetItem",
    "dynamodb:TransactWriteItems",
    "sagemaker:CreateTrainingJob",
    "dynamodb:UpdateItem",
)
# What the started notice adds (the platform's topic and bus set, as the stacks deploy the
# trigger): SNS, EventBridge and the write that records it sent, in one conditional write
# (``JobWriter.apply`` answers the record with the revision its own write added, so the
# notice's write expects the right one).
NOTICE = (
    *DIRECT,
    "sns:Publish",
    "events:PutEvents",
    "dynamodb:UpdateItem",
)
# A warm queue-mode submit: the look-up, the claim, the service job, the merged update.
QUEUED = (
    "dynamodb:GetItem",
    "dynamodb:TransactWriteItems",
    "batch:SubmitServiceJob",
    "dynamodb:UpdateItem",
)


class CallsChanged(RuntimeError):
    """The submit's AWS calls are not those the benchmark answers and describes."""


@dataclass(frozen=True)
class Call:
    """One AWS call as a real submit made it: the service, the operation and moto's answer
    (``error``: the error code, when the call failed)."""

    service: str
    operation: str
    answer: Mapping[str, Any]
    error: str = ""

    @property
    def label(self) -> str:
        return f"{self.service}:{self.operation}" + (f"!{self.error}" if self.error else "")


@dataclass(frozen=True)
class Recording:
    """The calls of a cold container's first submit and of a warm one's."""

    first: tuple[Call, ...]
    warm: tuple[Call, ...]

    def labels(self) -> list[str]:
        return [c.label for c in self.warm]


def check_calls(recording: Recording, expected: Sequence[str], what: str) -> None:
    """Raise :class:`CallsChanged` unless the warm submit made exactly ``expected``."""
    got = recording.labels()
    if got != list(expected):
        raise CallsChanged(
            f"the {what} submit's AWS calls changed:\n  expected {list(expected)}\n"
            f"  made     {got}\nCheck the change, then update bench/_stubbed.py's sequence and "
            "measure again (bench/RESULTS.md describes the calls it timed)."
        )


# --------------------------------------------------------------------------- the handler
def notice_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with the platform's topic and event bus, as the stacks set them: a submit
    then sends its job's started notice."""
    from jobmodel.contract.names import ENV_TOPIC_ARN
    from jobmodel.jobs.notifications import ENV_EVENT_BUS

    return {**base, ENV_TOPIC_ARN: TOPIC_ARN, ENV_EVENT_BUS: EVENT_BUS}


def queue_env(base: Mapping[str, str]) -> dict[str, str]:
    from jobmodel.capacity.scheduler import SchedulerConfig

    return {**base, **SchedulerConfig(scheduler="queue", job_queue_arn=QUEUE_ARN).to_env()}


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """The process's environment is exactly ``env`` inside, as it was after."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def load_handler(asset: Path, name: str, env: Mapping[str, str]) -> Any:
    """Import the asset's ``handler.py`` as module ``name`` with exactly ``env`` (its cold
    start); the process's environment is left as it was. The Lambda packages already imported
    in this process (from the repository, under pytest) are dropped first, so the handler runs
    the asset's own copies (its ``catalog.json`` included), as a fresh container would."""
    for loaded in [
        m for m in sys.modules if m.startswith(("ftl_trigger", "ftl_events", "ftl_ledger"))
    ]:
        del sys.modules[loaded]
    if str(asset) in sys.path:
        sys.path.remove(str(asset))
    sys.path.insert(0, str(asset))
    with environment(env):
        spec = importlib.util.spec_from_file_location(name, asset / "handler.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def clients(runtime: Any) -> dict[str, Any]:
    """The runtime's botocore clients by service name (one level of attributes deep)."""
    from botocore.client import BaseClient

    found: dict[str, Any] = {}
    for value in vars(runtime).values():
        if isinstance(value, BaseClient):
            service = value.meta.service_model.service_name
            if found.get(service, value) is not value:
                raise CallsChanged(f"the trigger's runtime holds two {service} clients")
            found[service] = value
    if "dynamodb" not in found:
        raise CallsChanged("found no DynamoDB client on the trigger's RUNTIME")
    return found


def prime_quotas(runtime: Any) -> None:
    """Give the runtime's Service Quotas reader one answer (the sandbox stand-in's list), which
    a warm container keeps 15 minutes: the first submit reads it, no later one."""
    from botocore.stub import Stubber

    from sandbox.service_quotas import ServiceQuotasStandIn

    live = getattr(runtime, "quotas", None)
    if live is None or not hasattr(live, "make_client"):
        raise CallsChanged("the trigger's RUNTIME has no quotas reader with make_client")
    make = live.make_client

    def stubbed() -> Any:
        client = make()
        stub = Stubber(client)
        request = {"ServiceCode": "sagemaker", "MaxResults": 100}
        answer = ServiceQuotasStandIn().list_service_quotas(request, REGION)
        stub.add_response("list_service_quotas", answer, request)
        stub.activate()
        return client

    live.make_client = stubbed


def submit_once(module: Any, status: str) -> tuple[float, float]:
    """One submit of ``REQUEST`` with a fresh client token; its wall and this thread's CPU
    seconds. Raises
    :class:`CallsChanged` when it did not answer ``status`` (a call its stubs lacked comes
    back as an ``UpstreamError``)."""

    class Context:
        aws_request_id = "bench"
        invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ftl-trigger"

    event = {**REQUEST, "client_token": uuid.uuid4().hex}
    cpu = time.thread_time()
    started = time.perf_counter()
    result = module.handler(event, Context())
    elapsed = time.perf_counter() - started, time.thread_time() - cpu
    if result.get("status") != status:
        raise CallsChanged(f"the submit answered {result}, not status {status}")
    return elapsed


# ------------------------------------------------------------------------------ record
def _batch_answer() -> dict[str, Any]:
    job_id = uuid.uuid4().hex
    return {
        "jobId": job_id,
        "jobName": "bench",
        "jobArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{job_id}",
    }


def record(asset: Path, env: Mapping[str, str], *, status: str, name: str) -> Recording:
    """Two submits of the handler with ``env`` against moto (see the module docstring)."""
    from botocore.stub import Stubber
    from moto import mock_aws

    from jobmodel.contract.names import ENV_JOB_TABLE
    from jobmodel.money.price_list import price_item_key, source_text

    # moto answers in this process, at AWS's own endpoints
    env = {k: v for k, v in offline_env(env).items() if k != "AWS_ENDPOINT_URL"}
    with mock_aws(), environment(env):
        import boto3

        ddb = boto3.client("dynamodb", region_name=REGION)
        table = env[ENV_JOB_TABLE]
        create_ledger_table(ddb, table)
        ddb.put_item(
            TableName=table,
            Item={
                "pk": {"S": price_item_key(REGION)},
                "prices": {"S": json.dumps(PRICES, sort_keys=True)},
                "source": {"S": source_text(REGION)},
                "refreshed_at": {"S": "2026-11-28T00:00:00Z"},
            },
        )
        topic = boto3.client("sns", region_name=REGION).create_topic(Name=TOPIC_NAME)
        assert topic["TopicArn"] == TOPIC_ARN, topic
        module = load_handler(asset, name, env)
        runtime = module.RUNTIME
        prime_quotas(runtime)
        calls: list[Call] = []

        def keep(http_response: Any, parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
            answer = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
            error = str(answer.get("Error", {}).get("Code", "")) if "Error" in answer else ""
            calls.append(Call(model.service_model.service_name, model.name, answer, error))

        batch_stub = None
        for service, client in clients(runtime).items():
            client.meta.events.register("after-call", keep)
            if service == "batch":
                batch_stub = Stubber(client)
                batch_stub.activate()
        runs: list[tuple[Call, ...]] = []
        for _ in range(2):
            calls.clear()
            if batch_stub is not None:
                batch_stub.add_response("submit_service_job", _batch_answer())
            submit_once(module, status)
            runs.append(tuple(calls))
    return Recording(first=runs[0], warm=runs[1])


# -------------------------------------------------------------------------- replay
class StubbedSubmit:
    """A fresh handler (module ``name``) whose Stubbers answer ``recording``'s calls."""

    def __init__(
        self, asset: Path, name: str, env: Mapping[str, str], recording: Recording, status: str
    ) -> None:
        from botocore.stub import Stubber

        self.module = load_handler(asset, name, offline_env(env))
        self.recording = recording
        self.status = status
        runtime = self.module.RUNTIME
        prime_quotas(runtime)
        self.made: list[str] = []  # the calls of the current submit, answered or not
        self.stubs = {}
        for service, client in clients(runtime).items():
            # Before the Stubber's own hook: a call it has no answer for is counted too (the
            # launcher may survive its error, as after a start whose write failed).
            client.meta.events.register_first("before-call.*.*", self._count)
            self.stubs[service] = Stubber(client)
            self.stubs[service].activate()
        self.done = 0

    def _count(self, model: Any, **_: Any) -> None:
        self.made.append(f"{model.service_model.service_name}:{model.name}")

    def _answers(self, calls: Sequence[Call]) -> None:
        from botocore import xform_name

        for call in calls:
            stub = self.stubs.get(call.service)
            if stub is None:
                raise CallsChanged(f"the trigger has no {call.service} client for {call.label}")
            method = xform_name(call.operation)
            if call.error:
                message = str(call.answer["Error"].get("Message", ""))
                stub.add_client_error(method, call.error, message, http_status_code=400)
            else:
                stub.add_response(method, dict(call.answer))

    def submit(self) -> tuple[float, float]:
        """One submit with its answers queued; its wall and CPU seconds (queuing and the
        check not counted)."""
        calls = self.recording.first if self.done == 0 else self.recording.warm
        self._answers(calls)
        self.made.clear()
        elapsed = submit_once(self.module, self.status)
        self.check(calls)
        self.done += 1
        return elapsed

    def check(self, calls: Sequence[Call]) -> None:
        """The submit made the recorded calls, and asked for every answer queued."""
        recorded = [f"{c.service}:{c.operation}" for c in calls]
        if self.made != recorded:
            raise CallsChanged(f"the submit made {self.made}, where the recording has {recorded}")
        for service, stub in self.stubs.items():
            try:
                stub.assert_no_pending_responses()
            except AssertionError as err:
                raise CallsChanged(
                    f"the submit did not make every recorded {service} call: {err}"
                ) from None


def iterate(submits: Sequence[StubbedSubmit], rounds: int) -> Iterator[list[tuple[float, float]]]:
    """``rounds`` rounds of one submit each, interleaved (a busy moment hits all of them)."""
    for _ in range(rounds):
        yield [s.submit() for s in submits]
