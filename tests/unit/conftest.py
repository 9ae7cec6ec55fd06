"""A moto server on localhost shared by the Lambdas' runtime tests (trigger, job events)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from sandbox.server import Sandbox


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    with Sandbox() as sandbox:
        yield sandbox.endpoint


@pytest.fixture
def prefix() -> str:
    """A job-name prefix unique to the test, so jobs in the shared moto server don't mix."""
    return f"t{uuid.uuid4().hex[:10]}"
