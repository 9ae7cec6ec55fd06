"""SageMaker training job state changes: ledger updates, cost, usage and SNS announcements."""

from __future__ import annotations

import pytest


def _event(name, status, **detail):
    return {
        "id": "e1",
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": name, "TrainingJobStatus": status, **detail},
    }


def _team_job(events, name, **values):
    return events.put_job(
        name,
        team="nlp",
        instance_count=2,
        price_usd_per_hour=30.0,
        estimated_max_cost_usd=60.0,
        **values,
    )


def test_completed_spot_job_records_billable_time_and_savings(events, prefix):
    events.put_job(prefix)
    result = events(
        _event(
            prefix,
            "Completed",
            SecondaryStatus="Completed",
            EnableManagedSpotTraining=True,
            BillableTimeInSeconds=1200,
            TrainingTimeInSeconds=4000,
        )
    )
    assert result["updated"] is True and result["spot_savings_percent"] == 70.0
    job = events.job(prefix)
    assert job["status"] == "Completed" and job["billable_seconds"] == 1200
    assert job["spot_savings_percent"] == 70.0 and job["status_source"] == "sagemaker"
    (message,) = events.messages()
    assert message["job_name"] == prefix and message["spot_savings_percent"] == 70.0


def test_final_metrics_and_spot_interruptions_are_stored(events, prefix):
    events.put_job(prefix)
    transitions = ["Starting", "Training", "Interrupted", "Starting", "Training"]
    transitions += ["Interrupted", "Interrupted", "Training", "Completed"]
    events(
        _event(
            prefix,
            "Completed",
            FinalMetricDataList=[
                {"MetricName": "eval_f1", "Value": 91.25, "Timestamp": 1700000000000},
                {"MetricName": "train_loss", "Value": 0.125, "Timestamp": 1700000000000},
                {"MetricName": "eval_loss", "Value": float("nan"), "Timestamp": 1700000000000},
            ],
            SecondaryStatusTransitions=[{"Status": s, "StartTime": 1} for s in transitions],
        )
    )
    job = events.job(prefix)
    assert job["final_metrics"] == {"eval_f1": 91.25, "train_loss": 0.125}
    assert job["spot_interruptions"] == 2
    (message,) = events.messages()
    assert message["final_metrics"] == {"eval_f1": 91.25, "train_loss": 0.125}


def test_interruption_updates_the_ledger_without_a_notification(events, prefix):
    events.put_job(prefix)
    events(_event(prefix, "InProgress", SecondaryStatus="Interrupted"))
    assert events.job(prefix)["secondary_status"] == "Interrupted"
    assert events.messages() == []


def test_failure_reason_is_recorded_and_announced(events, prefix):
    events.put_job(prefix)
    events(_event(prefix, "Failed", FailureReason="AlgorithmError: OOM"))
    assert events.job(prefix)["failure_reason"] == "AlgorithmError: OOM"
    assert events.messages()[0]["status"] == "Failed"


def test_a_long_failure_reason_is_cut_to_sagemakers_limit(events, prefix):
    events.put_job(prefix)
    events(_event(prefix, "Failed", FailureReason="x" * 5000))
    assert len(events.job(prefix)["failure_reason"]) == 1024


def test_on_demand_jobs_have_no_savings(events, prefix):
    events.put_job(prefix, spot=False)
    events(
        _event(
            prefix,
            "Completed",
            EnableManagedSpotTraining=False,
            BillableTimeInSeconds=10,
            TrainingTimeInSeconds=10,
        )
    )
    assert "spot_savings_percent" not in events.job(prefix)


def test_events_for_unknown_jobs_never_create_records(events, prefix):
    result = events(_event(prefix, "Completed"))
    assert result["updated"] is False
    assert events.ddb.scan(TableName=events.table)["Items"] == []


@pytest.mark.parametrize(
    "event",
    [
        {"detail": {}},
        "not an object",
        {"source": "aws.sagemaker", "detail-type": "Other", "detail": {}},
        {"source": "aws.batch", "detail-type": "SageMaker Training Job State Change", "detail": {}},
        _event("ok-1", "Sleeping"),
        _event("bad name!", "Completed"),
        _event("ok-1", "Completed", BillableTimeInSeconds=-5),
        _event("ok-1", "Completed", BillableTimeInSeconds="lots"),
        _event("ok-1", "Completed", BillableTimeInSeconds=True),
        _event("ok-1", "Completed", TrainingTimeInSeconds=1e300),
        _event("ok-1", "InProgress", SecondaryStatus={"x": 1}),
        _event("ok-1", "Completed", FinalMetricDataList="f1=9"),
        _event("ok-1", "Completed", FinalMetricDataList=[{"MetricName": "f1", "Value": "9"}]),
        _event("ok-1", "Completed", FinalMetricDataList=[{"Value": 9}]),
        _event("ok-1", "Completed", SecondaryStatusTransitions=[{"Status": 3}]),
        _event("ok-1", "Completed", SecondaryStatusTransitions={"Status": "Training"}),
        {**_event("ok-1", "Completed"), "source": "attacker"},
        {**_event("ok-1", "Completed"), "time": "yesterday"},
    ],
)
def test_malformed_events_are_dropped_and_never_stored(events, event):
    events.put_job("ok-1")
    before = events.job("ok-1")
    result = events(event)
    assert result["updated"] is False and result["dropped"]
    assert events.job("ok-1") == before
    assert events.messages() == []


def test_numbers_are_coerced_safely(events, prefix):
    events.put_job(prefix)
    events(_event(prefix, "Completed", BillableTimeInSeconds="120", TrainingTimeInSeconds=200.0))
    job = events.job(prefix)
    assert (job["billable_seconds"], job["training_seconds"]) == (120, 200)


def test_a_terminal_status_is_never_overwritten(events, prefix):
    events.put_job(prefix)
    events(_event(prefix, "Completed", SecondaryStatus="Completed"))
    late = events(_event(prefix, "InProgress", SecondaryStatus="Training"))
    assert late["updated"] is False
    job = events.job(prefix)
    assert job["status"] == "Completed" and job["secondary_status"] == "Completed"


def test_a_newer_event_after_the_end_changes_nothing(events, prefix):
    events.put_job(prefix)
    done = {
        **_event(prefix, "Completed", SecondaryStatus="Completed"),
        "time": "2026-11-22T10:00:00Z",
    }
    later = {
        **_event(prefix, "Stopping", SecondaryStatus="Stopping"),
        "time": "2026-11-22T11:00:00Z",
    }
    events(done)
    assert events(later)["updated"] is False
    assert events.job(prefix)["secondary_status"] == "Completed"


def test_an_older_event_does_not_replace_a_newer_one(events, prefix):
    events.put_job(prefix)
    newer = {
        **_event(prefix, "InProgress", SecondaryStatus="Training"),
        "time": "2026-11-22T10:05:00Z",
    }
    older = {
        **_event(prefix, "InProgress", SecondaryStatus="Starting"),
        "time": "2026-11-22T10:00:00Z",
    }
    assert events(newer)["updated"] is True
    assert events(older)["updated"] is False
    assert events.job(prefix)["secondary_status"] == "Training"


def test_last_modified_time_orders_events_of_the_same_second(events, prefix):
    events.put_job(prefix)
    second = "2026-11-22T10:05:00Z"
    newer = _event(
        prefix, "InProgress", SecondaryStatus="Training", LastModifiedTime=1_700_000_000_900
    )
    older = _event(
        prefix, "InProgress", SecondaryStatus="Starting", LastModifiedTime=1_700_000_000_100
    )
    events({**newer, "time": second})
    assert events({**older, "time": second})["updated"] is False
    assert events.job(prefix)["secondary_status"] == "Training"


def test_the_training_job_arn_is_recorded_once(events, prefix):
    events.put_job(prefix, status="Submitting")
    arn = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{prefix}"
    events(_event(prefix, "InProgress", TrainingJobArn=arn))
    job = events.job(prefix)
    assert job["job_arn"] == arn and job["training_job_arn"] == arn
    assert job["training_job_name"] == prefix and job["status"] == "InProgress"


def test_the_end_of_a_team_job_records_its_cost_and_gives_usage_back_once(events, prefix):
    _team_job(events, prefix)
    events.put_usage("nlp", events.month(), instances=2, reserved=60.0)
    done = _event(prefix, "Completed", BillableTimeInSeconds=1800)
    assert events(done)["cost_usd"] == 30.0  # 0.5 h x 2 x 30
    assert events(done)["updated"] is False
    job = events.job(prefix)
    assert job["cost_usd"] == 30.0 and job["usage_released"] is True
    assert job["usage_spend_usd"] == 30.0
    usage = events.usage("nlp")
    assert usage["instances"] == 0 and float(usage["reserved"]) == 0
    assert float(usage["spend"]) == 30.0 and float(usage["committed"]) == 30.0
    assert len(events.messages()) == 1


def test_a_job_ending_in_a_new_month_counts_there(events, prefix):
    _team_job(events, prefix)
    events.put_usage("nlp", "2001-01", instances=2, reserved=60.0)
    events(_event(prefix, "Stopped", BillableTimeInSeconds=3600))
    usage = events.usage("nlp")
    assert usage["month"] == events.month() and float(usage["spend"]) == 60.0


def test_usage_the_trigger_already_gave_back_is_not_given_back_again(events, prefix):
    _team_job(events, prefix, status="Completed", usage_released=True, usage_spend_usd=30.0)
    events.put_usage("nlp", events.month(), instances=0, reserved=0.0)
    result = events(_event(prefix, "Completed", BillableTimeInSeconds=1800))
    assert result["updated"] is True  # SageMaker's own view of the end is recorded
    usage = events.usage("nlp")
    assert usage["instances"] == 0 and float(usage["spend"]) == 0
    assert events.messages() == []  # the job had already ended: nothing new to announce
