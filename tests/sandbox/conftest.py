"""One moto sandbox per test session with the whole platform deployed into it.

The sandbox is a ``BatchSandbox``: moto with the AWS Batch service-job stand-in on the same
endpoint (it answers only requests signed for ``batch`` to its operations), so a module can
deploy a queue-mode platform beside the session's direct-mode one (``sandbox/queue_mode.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import boto3
import pytest

from sandbox.batch_api import BatchSandbox
from sandbox.deploy import deploy, sandbox_env


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # One deploy per run: keep every sandbox test on the same xdist worker. First, so the mark
    # is there when xdist's own hook turns xdist_group marks into "@sandbox" node-id suffixes
    # (without it the group was silently ignored and tests of one module ran on two workers).
    for item in items:
        if "tests/sandbox/" in str(item.path):
            item.add_marker(pytest.mark.sandbox)
            item.add_marker(pytest.mark.xdist_group("sandbox"))


def pytest_collection_finish(session: pytest.Session) -> None:
    # Under --dist loadgroup xdist puts the group in the node id ("...@sandbox"); if a pytest
    # or xdist upgrade stops that, the group is ignored without a word: fail loudly instead.
    if session.config.getoption("loadgroup", default=False):
        ungrouped = [
            i.nodeid
            for i in session.items
            if "tests/sandbox/" in str(i.path) and not i.nodeid.endswith("@sandbox")
        ]
        if ungrouped:
            raise pytest.UsageError(
                f"xdist ignored the sandbox group for {len(ungrouped)} tests (pytest and "
                "pytest-xdist versions disagree on node ids; see requirements-dev.txt)"
            )


class Deployed:
    def __init__(
        self, endpoint: str, outputs: dict[str, dict[str, str]], sandbox: BatchSandbox
    ) -> None:
        self.endpoint = endpoint
        self.outputs = outputs
        self.env = sandbox_env(endpoint)
        self.sandbox = sandbox

    def output(self, name: str) -> str:
        found = [o[name] for o in self.outputs.values() if name in o]
        assert len(found) == 1, f"output {name} on {len(found)} stacks"
        return found[0]

    def client(self, service: str):  # noqa: ANN201
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture(scope="session")
def deployed() -> Iterator[Deployed]:
    with BatchSandbox() as sandbox:
        saved = dict(os.environ)
        os.environ.update(sandbox_env(sandbox.endpoint))
        try:
            yield Deployed(sandbox.endpoint, deploy(sandbox.endpoint), sandbox)
        finally:
            os.environ.clear()
            os.environ.update(saved)
