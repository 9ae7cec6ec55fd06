"""SageMaker training-job state -> ledger fields, and the merge with the ledger's record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobmodel.jobs.queue_state import from_service_job
from jobmodel.jobs.training_state import (
    count_interruptions,
    final_metrics,
    from_training_job,
    merge,
    spot_interruptions,
)


def detail(status="InProgress", **extra):
    return {"TrainingJobName": "job-1", "TrainingJobStatus": status, **extra}


def fold(record, *updates):
    for update in updates:
        changes = merge(record, update)
        record = {k: v for k, v in {**record, **changes}.items() if v is not None}
    return record


@pytest.mark.parametrize(
    ("statuses", "count"),
    [
        ([], 0),
        (["Starting", "Training"], 0),
        (["Training", "Interrupted", "Training"], 1),
        (["Interrupted", "Interrupted", "Starting", "Interrupted"], 2),
        ([None, "Interrupted"], 1),
    ],
)
def test_interruptions_count_entries_into_interrupted(statuses, count):
    assert count_interruptions(statuses) == count
    assert spot_interruptions([{"Status": s} for s in statuses if s]) == count_interruptions(
        s for s in statuses if s
    )


@pytest.mark.parametrize("bad", [None, "Training", [{"Status": 1}], ["Training"]])
def test_malformed_transitions_are_refused(bad):
    with pytest.raises(ValueError, match="SecondaryStatusTransitions"):
        spot_interruptions(bad)


def test_final_metrics_keep_finite_numbers_by_name():
    metrics = [
        {"MetricName": "eval_f1", "Value": 91, "Timestamp": 1},
        {"MetricName": "loss", "Value": float("inf")},
        {"MetricName": "acc", "Value": 0.5},
    ]
    assert final_metrics(metrics) == {"eval_f1": 91.0, "acc": 0.5}
    for bad in ("x", [{"MetricName": "", "Value": 1}], [{"MetricName": "a", "Value": True}]):
        with pytest.raises(ValueError, match="FinalMetricDataList"):
            final_metrics(bad)
    with pytest.raises(ValueError, match="at most"):
        final_metrics([{"MetricName": "a", "Value": 1}] * 101)


def test_a_description_becomes_ledger_fields():
    fields = from_training_job(
        detail(
            "Completed",
            TrainingJobArn="arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1",
            SecondaryStatus="Completed",
            FailureReason="",
            BillableTimeInSeconds=300,
            TrainingTimeInSeconds="1000",
            EnableManagedSpotTraining=True,
            LastModifiedTime=datetime(2026, 11, 22, 10, 0, tzinfo=UTC),
            FinalMetricDataList=[{"MetricName": "f1", "Value": 0.9}],
            SecondaryStatusTransitions=[{"Status": "Training"}, {"Status": "Completed"}],
        )
    )
    ms = int(datetime(2026, 11, 22, 10, 0, tzinfo=UTC).timestamp() * 1000)
    assert fields == {
        "status": "Completed",
        "status_source": "sagemaker",
        "status_observed_ms": ms,
        "sagemaker_observed_ms": ms,
        "training_job_name": "job-1",
        "training_job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1",
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1",
        "secondary_status": "Completed",
        "billable_seconds": 300,
        "training_seconds": 1000,
        "spot_savings_percent": 70.0,
        "final_metrics": {"f1": 0.9},
        "spot_interruptions": 0,
    }


@pytest.mark.parametrize(
    ("last_modified", "fallback", "want"),
    [(1_700_000_000_123, 5, 1_700_000_000_123), ("2026-11-22T10:00:00Z", None, 1795341600000)],
)
def test_the_observation_time_is_sagemakers_or_the_events(last_modified, fallback, want):
    fields = from_training_job(detail(LastModifiedTime=last_modified), fallback_ms=fallback)
    assert fields["status_observed_ms"] == want
    assert from_training_job(detail(), fallback_ms=42)["status_observed_ms"] == 42


def test_a_newer_sagemaker_view_replaces_the_older_as_a_whole():
    older = from_training_job(detail(SecondaryStatus="Training", LastModifiedTime=1000))
    newer = from_training_job(
        detail(SecondaryStatus="Interrupted", LastModifiedTime=2000, BillableTimeInSeconds=5)
    )
    assert fold({}, older, newer) == fold({}, newer, older)
    record = fold({}, newer, older)
    assert record["secondary_status"] == "Interrupted" and record["billable_seconds"] == 5
    assert merge(record, newer) == {} and merge(record, older) == {}


def test_sagemakers_end_is_final_for_its_own_view():
    done = from_training_job(detail("Completed", SecondaryStatus="Completed", LastModifiedTime=5))
    late = from_training_job(detail("Stopping", SecondaryStatus="Stopping", LastModifiedTime=9))
    record = fold({"status": "InProgress"}, done)
    assert merge(record, late) == {}


def test_sagemakers_spelling_of_the_training_job_name_wins_over_the_arns():
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/awsbatchjob-1" + "a" * 32
    queued = from_service_job(
        {
            "jobId": "j",
            "status": "RUNNING",
            "latestAttempt": {"serviceResourceId": {"name": "TrainingJobArn", "value": arn}},
        }
    ).fields()
    running = from_training_job(
        {**detail(LastModifiedTime=7), "TrainingJobName": "AWSBatchjob-1" + "a" * 32}
    )
    for order in ((queued, running), (running, queued)):
        record = fold({"status": "Submitting"}, *order)
        assert record["training_job_name"] == "AWSBatchjob-1" + "a" * 32
        assert record["training_job_arn"] == arn


statuses = st.sampled_from(["InProgress", "Stopping"])
secondaries = st.sampled_from(["Starting", "Training", "Interrupted", "Uploading"])


@given(
    st.lists(st.tuples(statuses, secondaries), min_size=1, max_size=6),
    st.sampled_from(["Completed", "Failed", "Stopped"]),
    st.randoms(use_true_random=False),
)
def test_any_order_of_one_jobs_sagemaker_events_gives_one_record(steps, end, rnd):
    """Realistic: distinct times, and the end is SageMaker's last observation."""
    events = [
        from_training_job(detail(s, SecondaryStatus=sec, LastModifiedTime=1000 + i))
        for i, (s, sec) in enumerate(steps)
    ]
    events.append(from_training_job(detail(end, SecondaryStatus=end, LastModifiedTime=9999)))
    shuffled = events[:]
    rnd.shuffle(shuffled)
    start = {"status": "Submitting"}
    record = fold(start, *events)
    assert fold(start, *shuffled) == record
    assert record["status"] == end and record["secondary_status"] == end
    assert fold(record, *shuffled) == record  # replays change nothing
