"""The launcher by composition (issue 29): flows are objects given what they use, the
dispatch table is explicit and covers the contract, and job statuses are the ``Status`` type
in ``lambda/`` (the only literals left are SageMaker and Batch states, at most five)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from jobmodel.contract.errors import ValidationError
from jobmodel.contract.names import CHAIN_ALIAS, SWEEP_ALIAS
from jobmodel.contract.routes import ACTIONS
from jobmodel.contract.statuses import Status
from jobmodel.jobs.queue_state import BATCH_STATUSES
from tests.lambda_support import FakeContext
from tests.unit.trigger.conftest import TRIGGER_DIR

LAMBDA = TRIGGER_DIR.parent
MAX_STATUS_LITERALS = 5
# Every state a job has in the contract, in SageMaker (a subset) or in AWS Batch.
STATES = frozenset(str(s) for s in Status) | frozenset(BATCH_STATUSES)


def status_literals(root: Path = LAMBDA) -> list[str]:
    """Each string constant in the Lambdas' code (not their tests) that is a job state."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts or "tests" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in STATES:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.value!r}")
    return found


def test_at_most_five_status_literals_remain_in_lambda():
    literals = status_literals()
    assert len(literals) <= MAX_STATUS_LITERALS, literals


def test_the_literal_count_sees_every_kind_of_use(tmp_path):
    """The count is not blind: comparisons, assignments, tuples and calls all count."""
    sample = tmp_path / "fn" / "flow.py"
    sample.parent.mkdir()
    sample.write_text(
        'WAITING = ("Queued", "Scheduled")\n'
        'if job["status"] == "Failed":\n'
        '    job["status"] = "InProgress"\n'
        'jobs_in(client, queue, "RUNNABLE")\n'
        'LOG.info("not a state: %s", "Queued up")\n'
    )
    assert len(status_literals(tmp_path)) == 5


def test_the_launcher_and_its_flows_are_composed_not_mixed(launcher):
    built = launcher.module.LAUNCHER
    assert type(built).__bases__ == (object,)
    flows = [
        built.submits,
        built.jobs,
        built.callers,
        built.queue,
        built.chains,
        built.recovery,
        built.views,
        built.records,
    ]
    for flow in flows:
        cls = type(flow)
        assert cls.__bases__ == (object,), cls
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        assert params and all(p.kind is p.KEYWORD_ONLY for p in params), cls


def test_the_dispatch_table_covers_every_action_of_the_contract(launcher):
    from ftl_trigger import adapters
    from ftl_trigger.actions import INTERNAL_ACTIONS

    handlers = launcher.module.LAUNCHER.handlers
    assert set(handlers) == set(ACTIONS) | set(INTERNAL_ACTIONS)
    assert all(callable(h) for h in handlers.values())
    # The internal actions are the ones the chain and sweep doors produce.
    teams = launcher.module.RUNTIME.teams
    chain = adapters.parse({"action": "advance", "job_name": "x"}, FakeContext(alias=CHAIN_ALIAS))
    sweep = adapters.parse({"action": "sweep"}, FakeContext(alias=SWEEP_ALIAS), teams)
    evaluate = adapters.parse(
        {"action": "evaluate", "job_name": "x"}, FakeContext(alias=CHAIN_ALIAS)
    )
    refresh = adapters.parse({"action": "refresh", "job_name": "x"}, FakeContext(alias=CHAIN_ALIAS))
    found = {chain.action, evaluate.action, refresh.action, sweep.action}
    assert found == set(INTERNAL_ACTIONS)


def test_no_flow_reaches_into_another_objects_private_state():
    """``<anything but self>._<name>``: code using what another object keeps to itself
    (as the mixins did, and as the backends did with the launcher's ``host._write``)."""
    reaching = []
    for path in sorted((TRIGGER_DIR / "ftl_trigger").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            owner = node.value
            if node.attr.startswith("__") or (
                isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            ):
                continue
            reaching.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert reaching == []


def test_an_unknown_action_is_refused_by_the_dispatch(launcher):
    from ftl_trigger.adapters import Call
    from ftl_trigger.identity import Caller

    call = Call(action="reboot", params={}, caller=Caller(principal="p"))
    with pytest.raises(ValidationError):
        launcher.module.LAUNCHER.dispatch(call)
