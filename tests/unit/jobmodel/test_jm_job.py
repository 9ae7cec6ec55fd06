"""The job record's status type and the pure half of the one writer
(``jobmodel.jobs.record.plan``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ftl_ledger.job_codec import from_record
from jobmodel import JOB_STATUSES, TERMINAL_STATUSES
from jobmodel.contract.statuses import TERMINAL_RANK, Status
from jobmodel.jobs.record import REVISION, Change, plan

ROOT = Path(__file__).resolve().parents[3]
ORDER = ["Submitting", "Queued", "Scheduled", "InProgress", "Stopping"]


def test_the_status_type_is_the_contracts_list_with_its_rank_and_terminal_set():
    assert {str(s) for s in Status} == set(JOB_STATUSES)
    assert {str(s) for s in Status if s.terminal} == set(TERMINAL_STATUSES)
    assert [Status(s).rank for s in ORDER] == list(range(len(ORDER)))
    assert {Status(s).rank for s in TERMINAL_STATUSES} == {TERMINAL_RANK}
    assert Status.rank_of(None) == Status.rank_of("Bogus") == -1


def _job(**values) -> dict:
    return {
        "job_name": "j-1",
        "status": "InProgress",
        "status_source": "sagemaker",
        "status_observed_ms": 10,
        "instance_count": 2,
        "team": "nlp",
        "price_usd_per_hour": 3.0,
        "estimated_max_cost_usd": 30.0,
        REVISION: 4,
        **values,
    }


def test_a_launcher_stopping_never_replaces_an_end():
    """The stop that raced the job's end: nothing to write, so nothing published twice."""
    ended = _job(status="Stopped")
    assert plan(ended, Change.launcher(Status.STOPPING, 99), stamp="t", read=from_record) is None
    write = plan(_job(), Change.launcher(Status.STOPPING, 99), stamp="t", read=from_record)
    assert write is not None and write.changes["status"] == "Stopping"
    assert write.expect == {"status": "InProgress", REVISION: 4} and not write.release


def test_a_failed_start_settles_once_and_frees_the_token():
    claimed = _job(status="Submitting", status_source=None, client_token="tok")
    failed = Change.launcher(
        Status.FAILED_TO_START, 5, reason="no", also={"error_type": "X"}, free_token=True
    )
    write = plan(claimed, failed, stamp="t", read=from_record)
    assert write is not None and write.release and write.free_token
    assert write.changes["failure_reason"] == "no" and write.changes["error_type"] == "X"
    assert write.changes["usage_released"] is True and write.changes["updated_at"] == "t"
    assert (
        plan(write.after, failed, stamp="t", read=from_record) is None
    )  # a repeat changes nothing


def test_an_end_with_billable_time_is_costed_and_given_back_once():
    seen = {"status": "Completed", "status_source": "sagemaker", "status_observed_ms": 20}
    write = plan(_job(), Change({**seen, "billable_seconds": 3600}), stamp="t", read=from_record)
    assert write is not None and write.release and write.cost == pytest.approx(6.0)
    assert write.after["cost_usd"] == pytest.approx(6.0)
    again = plan(
        write.after, Change({**seen, "status_observed_ms": 30}), stamp="t", read=from_record
    )
    assert again is None  # bookkeeping only


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }


def test_every_job_write_goes_through_the_one_writer():
    """Only ``ftl_ledger/writer.py`` writes an existing job (``Ledger.write_job``), and only
    ``ftl_ledger/ledger.py`` calls DynamoDB's write operations."""
    writes = {"put_item", "update_item", "delete_item", "transact_write_items"}
    lambdas = ROOT / "lambda"
    for path in lambdas.rglob("*.py"):
        calls = _calls(path)
        rel = path.relative_to(lambdas).as_posix()
        if "write_job" in calls:
            assert rel == "ledger/ftl_ledger/writer.py", rel
        if calls & writes:
            assert rel == "ledger/ftl_ledger/ledger.py", (rel, calls & writes)
