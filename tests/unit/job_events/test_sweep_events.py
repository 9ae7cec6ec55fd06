"""A sweep's events (issue 37): its tuning job's state changes and its trials' (training jobs
naming it in ``TuningJobArn``) ask the trigger, through its ``chain`` alias, to refresh the
sweep; nothing is written by the events function, a trial is never taken for a job of its
own, and an event whose sweep is not in the ledger or that another team's job sent asks
nothing."""

from __future__ import annotations

import json
from typing import Any

ROLE = "arn:aws:iam::123456789012:role/nlp-training"
TRAINING_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"
TUNING_ARN = "arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/"


class Lambda:
    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def invoke(self, **kw: Any) -> dict[str, Any]:
        self.asked.append(json.loads(kw["Payload"]))
        return {"StatusCode": 202}


def _trial(sweep: str, team: str = "nlp") -> dict[str, Any]:
    return {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "id": "e1",
        "time": "2026-11-28T10:00:00Z",
        "detail": {
            "TrainingJobName": f"{sweep}-001-abcdef12",
            "TrainingJobArn": f"{TRAINING_ARN}{sweep}-001-abcdef12",
            "TuningJobArn": TUNING_ARN + sweep,
            "TrainingJobStatus": "Completed",
            "RoleArn": ROLE,
            "Tags": {"ftl:team": team, "ftl:job-name": sweep},
        },
    }


def _tuning(sweep: str, status: str = "Completed") -> dict[str, Any]:
    return {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker HyperParameter Tuning Job State Change",
        "id": "e2",
        "time": "2026-11-28T10:00:00Z",
        "detail": {
            "HyperParameterTuningJobName": sweep,
            "HyperParameterTuningJobStatus": status,
            "TrainingJobDefinition": {"RoleArn": ROLE},
        },
    }


def _wire(events) -> Lambda:
    fake = Lambda()
    events.runtime.lambda_client = fake
    events.runtime.chain_function = "ftl-trigger:chain"
    return fake


def _sweep(events, name: str) -> None:
    events.put_job(
        name,
        kind="sweep",
        team="nlp",
        rendered=json.dumps({"RoleArn": ROLE}),
        sweep={"tuning_job_name": name},
    )


def test_a_trials_and_a_tuning_jobs_change_ask_the_trigger_to_refresh_the_sweep(events, prefix):
    fake = _wire(events)
    _sweep(events, prefix)
    before = events.job(prefix)
    assert events(_trial(prefix))["refresh"] is True
    assert events(_tuning(prefix))["refresh"] is True
    assert fake.asked == [{"action": "refresh", "job_name": prefix}] * 2
    assert events.job(prefix) == before  # nothing written here
    assert events.job(f"{prefix}-001-abcdef12") is None  # a trial is no job of its own


def test_an_event_of_no_sweep_or_of_another_teams_job_asks_nothing(events, prefix):
    fake = _wire(events)
    assert events(_tuning(prefix))["updated"] is False  # not in the ledger
    events.put_job(prefix, team="nlp")  # a job, not a sweep
    assert events(_trial(prefix))["updated"] is False
    other = f"{prefix}x"
    _sweep(events, other)
    assert events(_trial(other, team="vision"))["updated"] is False
    assert fake.asked == []


def test_a_tuning_event_without_a_valid_name_is_dropped(events):
    bad = _tuning("x")
    bad["detail"]["HyperParameterTuningJobName"] = "not a name!"
    assert "dropped" in events(bad)
