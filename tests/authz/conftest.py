"""The authorization check: one moto sandbox and one synth per documented configuration,
shared by the check's tests (kept on one xdist worker so each configuration runs once)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from tests.authz.harness import (
    CONFIGURATIONS,
    Deployment,
    TriggerRun,
    run_job_events,
    run_price_refresh,
    run_trigger,
)
from testsupport.authz.record import Call


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/authz/" in str(item.path):
            item.add_marker(pytest.mark.xdist_group("authz"))


@pytest.fixture(scope="session")
def authz_sandbox() -> Iterator[Any]:
    from sandbox.batch_api import BatchSandbox

    with BatchSandbox() as sandbox:
        # Every catalog type within quota, so every template's requests are made (the
        # stand-in's default p5 quota is 0: sandbox/service_quotas.py).
        sandbox.quotas.set("ml.p5.48xlarge", on_demand=64, spot=64)
        yield sandbox


@cache
def deployment(name: str) -> Deployment:
    return Deployment(CONFIGURATIONS[name][0])


_RUNS: dict[str, TriggerRun] = {}


@pytest.fixture
def trigger_run(authz_sandbox: Any) -> Any:
    """``trigger_run(name)``: the trigger driven through the configuration (once per run)."""

    def run(name: str) -> TriggerRun:
        if name not in _RUNS:
            with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()):
                _RUNS[name] = run_trigger(
                    deployment(name), authz_sandbox, mp, CONFIGURATIONS[name][1]
                )
        return _RUNS[name]

    return run


_EVENTS: dict[str, list[Call]] = {}
_PRICES: dict[str, list[Call]] = {}


@pytest.fixture
def events_run(trigger_run: Any, authz_sandbox: Any) -> Any:
    """``events_run(name)``: the job-events function's recorded calls for the configuration's
    trigger run (once per run: the events change the ledger)."""

    def run(name: str) -> list[Call]:
        if name not in _EVENTS:
            _EVENTS[name] = run_job_events(deployment(name), trigger_run(name), authz_sandbox)
        return _EVENTS[name]

    return run


@pytest.fixture
def prices_run(trigger_run: Any, authz_sandbox: Any) -> Any:
    """``prices_run(name)``: the price-refresh function's recorded calls (once per run; the
    configuration's trigger run first, so its ledger table exists in the sandbox)."""

    def run(name: str) -> list[Call]:
        if name not in _PRICES:
            trigger_run(name)
            _PRICES[name] = run_price_refresh(deployment(name), authz_sandbox)
        return _PRICES[name]

    return run
