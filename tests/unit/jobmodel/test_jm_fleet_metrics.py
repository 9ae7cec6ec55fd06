"""The fleet's EMF lines: one namespace and dimension set, values per ledger transition."""

from __future__ import annotations

import json

import pytest

from jobmodel.fleet_metrics import (
    DIMENSION_SETS,
    METRICS,
    NAMESPACE,
    emf_line,
    transition_metrics,
)


def test_queued_then_scheduled_then_completed():
    assert transition_metrics(None, "Queued", instance_count=2) == {
        "JobsQueued": 1,
        "InstancesQueuedChange": 2,
    }
    assert transition_metrics("Queued", "Scheduled", instance_count=2, queued_seconds=90) == {
        "InstancesQueuedChange": -2,
        "QueueWaitSeconds": 90,
        "JobsStarted": 1,
        "InstancesRunningChange": 2,
    }
    done = transition_metrics(
        "InProgress",
        "Completed",
        instance_count=2,
        cost_usd=10.5,
        spot_savings_usd=3,
        month_spend_usd=120,
    )
    assert done == {
        "InstancesRunningChange": -2,
        "JobsCompleted": 1,
        "SpendUsd": 10.5,
        "SpotSavingsUsd": 3,
        "MonthSpendUsd": 120,
    }


def test_scheduled_to_in_progress_starts_nothing_twice():
    assert transition_metrics("Scheduled", "InProgress", instance_count=4) == {}
    assert transition_metrics("InProgress", "InProgress", instance_count=4) == {}


def test_queued_job_cancelled_counts_as_failed_and_wait():
    values = transition_metrics("Queued", "FailedToStart", instance_count=1, queued_seconds=700)
    assert values == {"InstancesQueuedChange": -1, "QueueWaitSeconds": 700, "JobsFailed": 1}


def test_emf_line_shape():
    line = emf_line(
        {"JobsQueued": 1, "InstancesQueuedChange": 2},
        platform="ftl",
        team="team-a",
        instance_type="ml.p4d.24xlarge",
        timestamp_ms=1_700_000_000_000,
        job_name="team-a-x",
    )
    doc = json.loads(line)
    meta = doc["_aws"]["CloudWatchMetrics"][0]
    assert meta["Namespace"] == NAMESPACE
    assert meta["Dimensions"] == [list(d) for d in DIMENSION_SETS]
    assert {m["Name"] for m in meta["Metrics"]} == {"JobsQueued", "InstancesQueuedChange"}
    assert all(m["Unit"] == METRICS[m["Name"]] for m in meta["Metrics"])
    assert doc["Team"] == "team-a" and doc["Platform"] == "ftl"
    assert doc["InstanceType"] == "ml.p4d.24xlarge" and doc["JobsQueued"] == 1
    # every dimension named in a set is a top-level member, as EMF requires
    assert all(name in doc for dims in DIMENSION_SETS for name in dims)


def test_emf_line_single_team_and_empty():
    line = emf_line(
        {"JobsStarted": 1}, platform="ftl", team=None, instance_type="ml.g5.xlarge", timestamp_ms=1
    )
    assert json.loads(line)["Team"] == "default"
    assert emf_line({}, platform="ftl", team="a", instance_type="x", timestamp_ms=1) is None


def test_emf_line_refuses_unknown_metric():
    with pytest.raises(ValueError, match="unknown fleet metric"):
        emf_line({"Nope": 1}, platform="ftl", team="a", instance_type="x", timestamp_ms=1)
