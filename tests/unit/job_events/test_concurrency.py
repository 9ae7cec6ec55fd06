"""Two events for one job at the same time never lose an update: the write is conditional on
the revision read, and a write that lost the race reads again and redoes its work."""

from __future__ import annotations

import threading

import pytest

from jobmodel.contract.errors import Conflict
from tests.unit.job_events.conftest import put_team_job
from tests.unit.job_events.sequences import T0, batch, life, sagemaker


def test_an_event_that_loses_the_race_is_applied_on_top_of_the_winner(events, prefix, monkeypatch):
    put_team_job(events, prefix)
    ledger = events.runtime.recorder.ledger
    read = ledger.get_job
    reads: list[str] = []

    def racing(name):
        job = read(name)
        reads.append(job["status"])
        if len(reads) == 1:
            # Another container records Batch's RUNNABLE between this read and this write.
            events(batch(prefix, "RUNNABLE"))
        return job

    monkeypatch.setattr(ledger, "get_job", racing)
    monkeypatch.setattr(events.runtime.recorder.writer, "sleep", lambda _: None)
    result = events(sagemaker(prefix, "InProgress", "Training", T0 + 80_000))
    assert result["updated"] is True
    # First read (lost), the racer's read, then the retry's read of the racer's record (the
    # reads after it are the started notice's, recorded sent: jobmodel.jobs.notifications).
    assert reads[:3] == ["Submitting", "Submitting", "Queued"]
    job = events.job(prefix)
    assert job["status"] == "InProgress" and job["secondary_status"] == "Training"
    assert job["batch_job_id"] == f"id-{prefix}" and job["queued_ms"] == T0
    assert job["revision"] == 3  # 2, and the started notice recorded sent


def test_a_job_that_keeps_changing_gives_the_event_back_to_eventbridge(events, prefix, monkeypatch):
    put_team_job(events, prefix)
    recorder = events.runtime.recorder
    monkeypatch.setattr(recorder.ledger, "write_job", lambda *a, **k: False)
    monkeypatch.setattr(recorder.writer, "sleep", lambda _: None)
    # The handler fails, so Lambda reports an error and EventBridge retries the event.
    with pytest.raises(Conflict, match="changed on every one of"):
        events(batch(prefix, "RUNNABLE"))


EVENTBRIDGE_DELIVERIES = 4


def test_concurrent_events_of_many_jobs_lose_nothing(events, prefix, capsys):
    names = [f"{prefix}-{i}" for i in range(4)]
    for name in names:
        put_team_job(events, name)
    events.put_usage("nlp", events.month(), instances=8, reserved=240.0)
    errors: list[BaseException] = []

    def run(event):
        # An invocation that lost every one of its conditional writes fails, and EventBridge
        # delivers the event again (docs/API.md, "Order and repeats"): retried here the same
        # way, a few times, as a loaded machine can make one lose six races in a row.
        for _ in range(EVENTBRIDGE_DELIVERIES):
            try:
                events(event)
                return
            except BaseException as exc:  # noqa: BLE001 - reported below
                failed = exc
                if "changed on every one of" not in str(exc):
                    break
        errors.append(failed)

    threads = [threading.Thread(target=run, args=(e,)) for n in names for e in life(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for name in names:
        job = events.job(name)
        assert job["status"] == "Completed" and job["batch_status"] == "SUCCEEDED", job
        assert job["final_metrics"] == {"eval_f1": 91.5, "train_loss": 0.25}
        assert job["cost_usd"] == 20.0 and job["usage_spend_usd"] == 20.0
    usage = events.usage("nlp")
    assert usage["instances"] == 0 and float(usage["spend"]) == 80.0
    ends = [line for line in capsys.readouterr().out.splitlines() if "JobsCompleted" in line]
    assert len(ends) == 4


def test_a_write_and_the_notice_it_owes_need_no_second_read(events, prefix, monkeypatch):
    """The writer answers the record as the ledger now has it (revision included), so the
    started notice's write that follows expects the right revision: no failed condition, no
    re-read and no back-off sleep between the two writes of one event."""
    put_team_job(events, prefix)
    recorder = events.runtime.recorder
    reads: list[str] = []
    read = recorder.ledger.get_job
    monkeypatch.setattr(recorder.ledger, "get_job", lambda name: reads.append(name) or read(name))
    slept: list[float] = []
    monkeypatch.setattr(recorder.writer, "sleep", slept.append)
    assert events(sagemaker(prefix, "InProgress", "Training", T0 + 80_000))["updated"] is True
    assert slept == []
    assert len(reads) == 1  # the event's own read; the notice's write reuses its answer
    assert events.job(prefix)["revision"] == 2  # the status, then the notice recorded sent
