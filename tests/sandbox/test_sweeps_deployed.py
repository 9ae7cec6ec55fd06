"""Sweeps deployed (issue 37): a teams deploy into the sandbox, whose tuner stand-in
(``sandbox/tuner.py``) runs the trials. Through the deployed trigger and both doors: a dry run
shows the worst case; a sweep started with one call runs its trials under the tuner, shows
one line with its progress, is charged trial by trial, and ends with its best trial's model
registered and its evaluation job started; a refused sweep creates nothing; another team
neither sees nor stops it; a stop stops the whole sweep; a sweep whose trials' spend reaches
its cap is stopped.

Its own platform name (``ftlswp``), so its stacks live beside the session's other deploys.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from jobmodel.after_training.registry import group_name
from sandbox.deploy import ACCOUNT, deploy
from sandbox.http_api import LocalHttpApi
from tests.sandbox.test_teams_deployed import Teams

PLATFORM = "ftlswp"
TEMPLATE = "distilbert-spot"
HOURLY = 1.5  # the sandbox's price of ml.g5.xlarge here (not AWS's)
LIMITS = {"max_instances": 4, "max_job_cost_usd": 40.0, "monthly_budget_usd": 200.0}
CONTEXT = {
    "ftl:platformName": PLATFORM,
    "ftl:teams": json.dumps(
        [
            {
                "name": "nlp",
                "principals": [f"arn:aws:iam::{ACCOUNT}:role/nlp-scientists"],
                "limits": LIMITS,
            },
            {"name": "vision", "principals": [f"arn:aws:iam::{ACCOUNT}:role/vision-scientists"]},
        ]
    ),
    "ftl:admins": json.dumps([f"arn:aws:iam::{ACCOUNT}:role/platform-ops"]),
    "ftl:prices": json.dumps({"us-east-1": {"ml.g5.xlarge": HOURLY, "ml.p4d.24xlarge": 40.0}}),
}
CALLERS = {
    "nlpkey": f"arn:aws:sts::{ACCOUNT}:assumed-role/nlp-scientists/alice",
    "visionkey": f"arn:aws:sts::{ACCOUNT}:assumed-role/vision-scientists/bob",
}
pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def swp(deployed):
    saved = dict(os.environ)
    outputs = deploy(deployed.endpoint, context=CONTEXT)
    launcher = outputs[f"{PLATFORM}-launcher"]
    with LocalHttpApi(
        deployed.endpoint,
        launcher["TriggerFunctionName"],
        credentials={k: k for k in CALLERS},
        identities=CALLERS,
    ) as api:
        teams = Teams(deployed.endpoint, outputs, api)
        teams.tuner = deployed.sandbox.tuner  # type: ignore[attr-defined]
        yield teams
    os.environ.clear()
    os.environ.update(saved)


def sweep(prefix: str, **extra: Any) -> dict[str, Any]:
    return {
        "template": TEMPLATE,
        "job_name": prefix,
        "ranges": {
            "learning_rate": {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"},
            "per_device_train_batch_size": {"values": [8, 16]},
        },
        "objective": "eval_accuracy",
        "direction": "Maximize",
        "max_trials": 4,
        "max_parallel": 2,
        "max_runtime_seconds": 3600,
        "cap_usd": 30.0,
        **extra,
    }


def _usage(swp: Teams, team: str) -> dict[str, Any]:
    item = swp.ddb.get_item(TableName=swp.table, Key={"pk": {"S": f"usage#{team}"}}).get("Item")
    return {k: float(v["N"]) for k, v in (item or {}).items() if "N" in v}


def _accuracy(tuned: dict[str, str]) -> float:
    """A made-up response surface: best near learning rate 1e-4."""
    import math

    return round(0.9 - abs(math.log10(float(tuned["learning_rate"])) + 4) / 10, 4)


def test_a_dry_run_through_the_http_door_shows_the_worst_case_and_creates_nothing(swp):
    before = set(swp.tuner.jobs)
    status, answer = swp.http("nlpkey", "POST", "/sweeps", sweep("dry", dry_run=True))
    assert status == 200, answer
    assert answer["worst_case_usd"] == pytest.approx(4 * HOURLY) and answer["instances_held"] == 2
    assert "TrainingJobDefinition" in answer["request"] and answer["not_carried"]
    assert set(swp.tuner.jobs) == before


def test_a_sweep_runs_under_the_tuner_to_its_registered_and_evaluated_best(swp):
    started = swp.team("nlp", {"action": "sweep", **sweep("lr")})
    assert "error" not in started, started
    name = started["job_name"]
    assert started["kind"] == "sweep" and started["status"] == "InProgress"
    assert name.startswith("nlp-lr-") and len(name) <= 32
    assert _usage(swp, "nlp")["instances"] == 2
    # The trials run under the tuner with the trigger's rendered definition.
    trials = swp.tuner.trials(name)
    assert len(trials) == 2  # max_parallel
    first = swp.sm.describe_training_job(TrainingJobName=trials[0])
    assert first["HyperParameters"]["_tuning_objective_metric"] == "eval_accuracy"
    assert "learning_rate" in first["HyperParameters"]

    swp.tuner.run_to_end(name, objective_of=_accuracy, seconds_per_trial=1200)
    status, ended = swp.http("nlpkey", "GET", f"/jobs/{name}")
    assert status == 200 and ended["status"] == "Completed", ended
    progress = ended["sweep"]
    assert progress["trials"]["completed"] + progress["trials"]["stopped_early"] == 4, progress
    tuner_best = swp.sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
    best = tuner_best["BestTrainingJob"]["TrainingJobName"]
    assert progress["best"]["trial"] == best
    # Four trials of 1200 billable seconds on one instance at HOURLY.
    assert ended["cost_usd"] == pytest.approx(4 * 1200 * HOURLY / 3600, abs=1e-3)
    usage = _usage(swp, "nlp")
    assert usage["spend"] >= 4 * 1200 * HOURLY / 3600 - 1e-3
    # One version, of the best trial's model; the evaluation job of the best model.
    package = swp.sm.describe_model_package(ModelPackageName=ended["model_package_arn"])
    url = package["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    assert url.endswith(f"/{best}/output/model.tar.gz"), url
    lineage = package["CustomerMetadataProperties"]
    assert lineage["job_name"] == name and lineage["training_job"] == best
    tuned = progress["best"]["hyperparameters"]
    assert float(lineage["hp.learning_rate"]) == pytest.approx(float(tuned["learning_rate"]))
    group = group_name(PLATFORM, TEMPLATE, "nlp")
    versions = swp.sm.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
    assert len(versions) == 1
    assert ended["evaluation"]["job_name"] == f"{name}-eval"
    evaluation = swp.sm.describe_training_job(TrainingJobName=f"{name}-eval")
    trained = evaluation["InputDataConfig"]
    assert any(best in json.dumps(c) for c in trained), trained
    # One line in the list, the sweep with its progress; its trials are not jobs of their own.
    status, listed = swp.http("nlpkey", "GET", "/jobs")
    names = [j["job_name"] for j in listed["jobs"]]
    assert name in names and not any(n.startswith(f"{name}-0") for n in names)


def test_a_refused_sweep_creates_nothing_through_either_door(swp):
    before, items = set(swp.tuner.jobs), len(swp.ledger())
    over = swp.team("nlp", {"action": "sweep", **sweep("over", cap_usd=1.0)})
    assert over["error"]["field"] == "cap_usd", over
    status, per_job = swp.http(
        "nlpkey", "POST", "/sweeps", sweep("big", max_trials=40, cap_usd=100.0)
    )
    assert status == 400 and "per-job cap" in per_job["error"]["message"], per_job
    status, bad = swp.http("nlpkey", "POST", "/sweeps", sweep("bad", objective="loss"))
    assert status == 400 and bad["error"]["field"] == "objective"
    assert set(swp.tuner.jobs) == before and len(swp.ledger()) == items


def test_another_team_neither_sees_nor_stops_a_sweep_and_its_stop_stops_it_whole(swp):
    held = _usage(swp, "nlp").get("instances", 0)
    name = swp.team("nlp", {"action": "sweep", **sweep("stop")})["job_name"]
    assert _usage(swp, "nlp")["instances"] == held + 2
    assert (
        swp.team("vision", {"action": "describe", "job_name": name})["error"]["type"] == "NotFound"
    )
    status, _ = swp.http("visionkey", "POST", f"/jobs/{name}/stop")
    assert status == 404
    status, _ = swp.http("visionkey", "GET", f"/jobs/{name}")
    assert status == 404
    assert swp.tuner.jobs[name].status == "InProgress"
    status, stopped = swp.http("nlpkey", "POST", f"/jobs/{name}/stop")
    assert status == 200 and stopped["status"] in ("Stopping", "Stopped"), stopped
    ended = swp.team("nlp", {"action": "describe", "job_name": name})
    assert ended["status"] == "Stopped", ended
    assert ended["sweep"]["trials"]["stopped"] == 2 and "model_package_arn" not in ended
    assert _usage(swp, "nlp")["instances"] == held


def test_a_sweep_whose_trials_reach_its_cap_is_stopped(swp):
    name = swp.team("nlp", {"action": "sweep", **sweep("cap", cap_usd=6.01)})["job_name"]
    first, _ = swp.tuner.trials(name)
    # A trial billed past its runtime limit (a price that rose, a retried trial): 7.50 USD.
    swp.tuner.finish_trial(first, objective=0.5, billable=5 * 3600)
    capped = swp.team("nlp", {"action": "describe", "job_name": name})
    assert capped["status"] in ("Stopping", "Stopped") and "cap" in capped["failure_reason"]
    ended = swp.team("nlp", {"action": "describe", "job_name": name})
    assert ended["status"] == "Stopped", ended
    assert ended["failure_reason"] == capped["failure_reason"]  # why: its cap, kept
    assert ended["cost_usd"] <= 6.01 + 2 * HOURLY  # the cap plus the trials running then
