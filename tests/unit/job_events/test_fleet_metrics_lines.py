"""The fleet's metrics: one CloudWatch Embedded Metric Format line on standard output per
ledger transition the function applied (docs/QUEUE.md, "Fleet metrics"); replays none."""

from __future__ import annotations

import json

from jobmodel.fleet_metrics import DIMENSION_SETS, METRICS, NAMESPACE
from tests.unit.job_events.sequences import batch, life


def _lines(capsys) -> list[dict]:
    out = capsys.readouterr().out
    assert out.endswith("\n") or out == ""
    return [json.loads(line) for line in out.splitlines()]


def _values(doc: dict) -> dict[str, float]:
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    return {m["Name"]: doc[m["Name"]] for m in directive["Metrics"]}


def test_each_applied_transition_writes_one_emf_line(events, queued, capsys):
    runnable, scheduled, started, running, completed, succeeded = life(queued)
    capsys.readouterr()
    events(runnable)
    (doc,) = _lines(capsys)
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == NAMESPACE == "FineTuningLauncher/Fleet"
    assert directive["Dimensions"] == [list(d) for d in DIMENSION_SETS]
    assert directive["Dimensions"] == [
        ["Platform"],
        ["Platform", "Team"],
        ["Platform", "Team", "InstanceType"],
    ]
    assert {m["Name"]: m["Unit"] for m in directive["Metrics"]} == {
        "JobsQueued": METRICS["JobsQueued"],
        "InstancesQueuedChange": "Count",
    }
    assert (doc["Platform"], doc["Team"], doc["InstanceType"]) == (
        "ftl-test",
        "nlp",
        "ml.p4d.24xlarge",
    )
    assert doc["JobName"] == queued and isinstance(doc["_aws"]["Timestamp"], int)
    assert _values(doc) == {"JobsQueued": 1, "InstancesQueuedChange": 2.0}

    events(scheduled)
    (doc,) = _lines(capsys)
    assert _values(doc) == {
        "InstancesQueuedChange": -2.0,
        "QueueWaitSeconds": 60.0,
        "JobsStarted": 1,
        "InstancesRunningChange": 2.0,
    }
    events(started)
    events(running)
    assert _lines(capsys) == []  # Scheduled -> InProgress moves no metric
    events(completed)
    (doc,) = _lines(capsys)
    assert _values(doc) == {
        "JobsCompleted": 1,
        "InstancesRunningChange": -2.0,
        "SpendUsd": 20.0,  # 1200 s x 2 x 30 USD / 3600
        "SpotSavingsUsd": 46.6667,  # (4000 - 1200) s x 2 x 30 USD / 3600
        "MonthSpendUsd": 20.0,  # the team's usage record after this job
    }
    events(succeeded)
    assert _lines(capsys) == []


def test_replays_and_dropped_events_write_nothing(events, queued, capsys):
    sequence = life(queued)
    for event in sequence:
        events(event)
    capsys.readouterr()
    for event in sequence:
        assert events(event)["updated"] is False
    events({"source": "aws.batch", "detail-type": "Batch Service Job State Change"})
    events(batch(f"{queued}-unknown", "RUNNABLE"))
    assert capsys.readouterr().out == ""


def test_a_late_cost_is_published_once_without_a_second_end(events, queued, capsys):
    *_, completed, succeeded = life(queued)
    capsys.readouterr()
    events(succeeded)
    (ended,) = _lines(capsys)
    assert _values(ended) == {"JobsCompleted": 1, "MonthSpendUsd": 0.0}
    events(completed)
    (cost,) = _lines(capsys)
    assert _values(cost) == {"SpendUsd": 20.0, "SpotSavingsUsd": 46.6667, "MonthSpendUsd": 20.0}
    events(completed)
    assert _lines(capsys) == []


def test_a_single_team_deployments_job_counts_under_the_default_team(events, prefix, capsys):
    events.put_job(prefix, instance_type="ml.g5.2xlarge", price_usd_per_hour=1.5)
    capsys.readouterr()
    events(
        {
            "source": "aws.sagemaker",
            "detail-type": "SageMaker Training Job State Change",
            "detail": {
                "TrainingJobName": prefix,
                "TrainingJobStatus": "Stopped",
                "BillableTimeInSeconds": 3600,
            },
        }
    )
    (doc,) = _lines(capsys)
    assert doc["Team"] == "default" and doc["InstanceType"] == "ml.g5.2xlarge"
    assert _values(doc) == {"JobsStopped": 1, "InstancesRunningChange": -1.0, "SpendUsd": 1.5}
