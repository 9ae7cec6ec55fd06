"""The deployed trigger refuses, at submit and at dry run, a job that needs more instances
than its queue's capacity, and writes nothing (issue 18, point 8)."""

from __future__ import annotations

import pytest

from tests.unit.trigger.conftest import queue_launcher


@pytest.fixture
def small_queue(batch_sandbox, monkeypatch, tmp_path):
    return queue_launcher(
        batch_sandbox, monkeypatch, tmp_path, capacity=4, env={"FTL_QUEUE_CAPACITY": "4"}
    )


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_job_bigger_than_the_queue_is_refused(small_queue, prefix, dry_run):
    resp = small_queue(
        {
            "template": "bert-large-qa",
            "job_name": prefix,
            "instance_count": 8,
            "client_token": prefix,
            "dry_run": dry_run,
        }
    )
    assert resp["error"]["type"] == "ValidationError"
    assert resp["error"]["field"] == "instance_count"
    assert "the job queue's capacity of 4 instances" in resp["error"]["message"]
    assert small_queue.ledger_items() == [] and small_queue.batch_jobs() == []


def test_a_job_that_fits_is_queued(small_queue, prefix):
    resp = small_queue({"template": "bert-large-qa", "job_name": prefix, "instance_count": 4})
    assert resp["status"] in ("Queued", "Scheduled", "InProgress"), resp
