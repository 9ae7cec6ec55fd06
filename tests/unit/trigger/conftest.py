"""A fresh launcher per test, against the moto server of ``tests/unit/conftest.py``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.lambda_support import ROOT, client, create_ledger_table, load_handler, trigger_env

TRIGGER_DIR = ROOT / "lambda" / "trigger"


class Launcher:
    """The trigger handler loaded against moto, with helpers to read what it did."""

    def __init__(self, module, endpoint: str, table: str) -> None:
        self.module = module
        self.endpoint = endpoint
        self.table = table
        self.sagemaker = client("sagemaker", endpoint)
        self.dynamodb = client("dynamodb", endpoint)

    def __call__(self, event, *, alias: str | None = None):
        """Invoke as Lambda would: HTTP API events through the ``http`` alias (as the API's
        integration does), anything else directly, or through ``alias`` when given."""
        from ftl_trigger.adapters import is_http
        from tests.lambda_support import FakeContext

        if alias is None and is_http(event):
            alias = "http"
        return self.module.handler(event, FakeContext(alias=alias))

    def ledger_items(self) -> list[dict]:
        return self.dynamodb.scan(TableName=self.table, ConsistentRead=True)["Items"]

    def jobs_named(self, prefix: str) -> list[str]:
        # moto pages before it filters by name, so read every page.
        pages = self.sagemaker.get_paginator("list_training_jobs").paginate(NameContains=prefix)
        names = [j["TrainingJobName"] for page in pages for j in page["TrainingJobSummaries"]]
        return [n for n in names if n.startswith(prefix)]


@pytest.fixture
def launcher(moto_endpoint, monkeypatch, tmp_path) -> Launcher:
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    module = load_handler(
        TRIGGER_DIR, monkeypatch, trigger_env(moto_endpoint, tmp_path, table=table)
    )
    return Launcher(module, moto_endpoint, table)


@pytest.fixture(scope="session")
def batch_sandbox() -> Iterator:
    """A moto server with the AWS Batch service-job stand-in on the same endpoint
    (sandbox/batch.py): boto3's real ``batch`` client reaches it (queue mode)."""
    from sandbox.batch_api import BatchSandbox

    with BatchSandbox() as sandbox:
        yield sandbox


class QueueLauncher(Launcher):
    """The trigger handler in queue mode (``FTL_SCHEDULER=queue``) on its own Batch queue."""

    def __init__(self, module, sandbox, table: str, queue_arn: str) -> None:
        super().__init__(module, sandbox.endpoint, table)
        self.standin = sandbox.batch
        self.queue_arn = queue_arn
        self.queue_name = queue_arn.rsplit("/", 1)[-1]

    def batch_jobs(self) -> list:
        """The stand-in's jobs on this launcher's queue, oldest first."""
        jobs = [j for j in self.standin.jobs.values() if j.queue.name == self.queue_name]
        return sorted(jobs, key=lambda j: j.created)


def queue_launcher(
    sandbox, monkeypatch, tmp_path, *, capacity: int, env: dict[str, str] | None = None
) -> QueueLauncher:
    """A queue-mode launcher on a fresh queue of ``capacity`` instances (0: nothing starts)."""
    from jobmodel.capacity.scheduler import SchedulerConfig

    queue_arn = sandbox.batch.create_queue(f"q-{uuid.uuid4().hex[:8]}", capacity=capacity)
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", sandbox.endpoint), table)
    scheduler = SchedulerConfig(scheduler="queue", job_queue_arn=queue_arn).to_env()
    full_env = trigger_env(sandbox.endpoint, tmp_path, table=table) | scheduler | (env or {})
    module = load_handler(TRIGGER_DIR, monkeypatch, full_env)
    return QueueLauncher(module, sandbox, table, queue_arn)
