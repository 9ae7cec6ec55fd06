"""A Completed job's evaluation job (issue 36), started by the trigger against moto.

``distilbert-spot`` has a shipped policy (``eval_accuracy`` on ``validation``, one spot
``ml.g5.xlarge`` for an hour). The describe that sees the job Completed registers its version
and then claims and starts exactly one evaluation job, ``<job>-eval``, whose request is the
evaluated job's with the evaluation entry point; a repeat (describe again, the job-events
function's ``evaluate`` ask through the chain alias) finds it and starts nothing more. A
refusal by the team's limits is recorded on the job, not retried.
"""

from __future__ import annotations

import json
import uuid

import pytest

from jobmodel.after_training.registry import group_name
from jobmodel.contract.names import CHAIN_ALIAS
from tests.lambda_support import client, create_ledger_table, load_handler, trigger_env
from tests.unit.trigger.conftest import TRIGGER_DIR, Launcher
from tests.unit.trigger.test_teams import job, teams_env


def _launcher(moto_endpoint, monkeypatch, tmp_path, limits=None) -> Launcher:
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    topic = client("sns", moto_endpoint).create_topic(Name=f"t-{table}")["TopicArn"]
    env = trigger_env(moto_endpoint, tmp_path, table=table) | teams_env(limits)
    env |= {"FTL_TOPIC_ARN": topic, "FTL_MODEL_REGISTRY": "on"}
    launcher = Launcher(load_handler(TRIGGER_DIR, monkeypatch, env), moto_endpoint, table)
    platform = launcher.module.RUNTIME.platform.platform_name
    for team in ("alpha", "beta"):
        launcher.sagemaker.create_model_package_group(
            ModelPackageGroupName=group_name(platform, "distilbert-spot", team)
        )
    return launcher


@pytest.fixture
def evaluated(moto_endpoint, monkeypatch, tmp_path) -> Launcher:
    return _launcher(moto_endpoint, monkeypatch, tmp_path)


def _record(launcher: Launcher, name: str) -> dict:
    from ftl_ledger.ledger import Ledger

    found = Ledger(launcher.dynamodb, launcher.table).get_job(name)
    assert found is not None, name
    return found


def test_a_completed_job_gets_one_evaluation_job(evaluated, prefix):
    name = evaluated(job(prefix), alias="team-alpha")["job_name"]
    described = evaluated({"action": "describe", "job_name": name}, alias="team-alpha")
    assert described["status"] == "Completed", described
    evaluation = described["evaluation"]
    assert evaluation["job_name"] == f"{name}-eval", described
    assert described["model_approval_status"] == "PendingManualApproval"

    eval_job = _record(evaluated, f"{name}-eval")
    assert eval_job["kind"] == "evaluation" and eval_job["evaluation_of"] == name
    assert eval_job["team"] == "alpha" and eval_job["instance_count"] == 1
    assert eval_job["estimated_max_cost_usd"] == pytest.approx(1.0)  # ml.g5.xlarge, 1 h
    policy = json.loads(eval_job["evaluation_policy"])
    assert policy["task_metrics"] == {"channel": "validation"}

    request = evaluated.sagemaker.describe_training_job(TrainingJobName=f"{name}-eval")
    hps = {k: json.loads(v) for k, v in request["HyperParameters"].items()}
    assert hps["sagemaker_program"] == "evaluate.py"
    assert hps["ftl_eval_task_metrics_channel"] == "validation"
    assert not [k for k in hps if k.startswith("sagemaker_distributed")]
    assert request["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    assert request["ResourceConfig"]["InstanceCount"] == 1
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    assert channels["archive"]["DataSource"]["S3DataSource"]["S3Uri"].endswith(
        f"/{name}/output/model.tar.gz"
    )
    assert "validation" in channels and "train" not in channels
    # The version names the metrics JSON the evaluation's results will write (D2's).
    version = evaluated.sagemaker.describe_model_package(
        ModelPackageName=described["model_package_arn"]
    )
    assert version["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"].endswith(
        "evaluation/model-metrics.json"
    )

    # Repeats find it: describe again, list, the job-events function's ask.
    again = evaluated({"action": "describe", "job_name": name}, alias="team-alpha")
    assert again["evaluation"]["job_name"] == f"{name}-eval"
    asked = evaluated({"action": "evaluate", "job_name": name}, alias=CHAIN_ALIAS)
    assert asked["evaluation"]["job_name"] == f"{name}-eval"
    evaluated({"action": "list"}, alias="team-alpha")
    assert evaluated.jobs_named(f"{name}-eval") == [f"{name}-eval"]
    assert "evaluate" not in (_record(evaluated, name).get("owed_effects") or {})


def test_a_repeated_evaluate_keeps_the_results_that_reached_the_job_meanwhile(evaluated, prefix):
    """Under faults the write that marks ``evaluate`` done can fail after the evaluation job
    started; the evaluation's results may reach the job before the effect is done again. The
    repeat finds the evaluation job and records it: the verdict already there stays."""
    from ftl_ledger.items import from_item, to_item

    name = evaluated(job(prefix), alias="team-alpha")["job_name"]
    evaluated({"action": "describe", "job_name": name}, alias="team-alpha")
    key = {"pk": {"S": f"job#{name}"}}
    record = from_item(evaluated.dynamodb.get_item(TableName=evaluated.table, Key=key)["Item"])
    # Its results are in (``ftl_ledger.evaluation``), and ``evaluate`` is still owed.
    verdict = {
        "job_name": f"{name}-eval",
        "metrics": {"eval_accuracy": 0.91},
        "verdict": "PendingManualApproval",
        "reason": "gate passed",
        "failed_checks": [],
    }
    record.update(evaluation=verdict, owed_effects={"evaluate": f"{name}/evaluate"})
    evaluated.dynamodb.put_item(TableName=evaluated.table, Item=to_item(record))

    again = evaluated({"action": "describe", "job_name": name}, alias="team-alpha")
    assert "evaluate" not in (_record(evaluated, name).get("owed_effects") or {})
    assert again["evaluation"]["verdict"] == "PendingManualApproval", again["evaluation"]
    assert again["evaluation"]["metrics"] == {"eval_accuracy": 0.91}
    assert evaluated.jobs_named(f"{name}-eval") == [f"{name}-eval"]


def test_the_evaluation_job_itself_is_not_evaluated(evaluated, prefix):
    name = evaluated(job(prefix), alias="team-alpha")["job_name"]
    evaluated({"action": "describe", "job_name": name}, alias="team-alpha")
    ended = evaluated({"action": "describe", "job_name": f"{name}-eval"}, alias="team-alpha")
    assert ended["status"] == "Completed", ended
    assert evaluated.jobs_named(f"{name}-eval-eval") == []
    assert not _record(evaluated, f"{name}-eval").get("model_package_arn")


def test_a_refusal_by_the_teams_limits_is_recorded_and_not_retried(
    moto_endpoint, monkeypatch, tmp_path, prefix
):
    # The job (30 minutes: 0.5 USD) fits the per-job cap; its evaluation (1 h: 1.0 USD) not.
    launcher = _launcher(moto_endpoint, monkeypatch, tmp_path, {"max_job_cost_usd": 0.75})
    submitted = launcher(
        job(prefix, max_runtime_seconds=1800, max_wait_seconds=3600), alias="team-beta"
    )
    assert "error" not in submitted, submitted
    name = submitted["job_name"]
    described = launcher({"action": "describe", "job_name": name}, alias="team-beta")
    evaluation = described["evaluation"]
    assert evaluation["status"] == "Refused", described
    assert evaluation["error"]["type"] == "QuotaExceeded", evaluation
    assert launcher.jobs_named(f"{name}-eval") == []
    assert "evaluate" not in (_record(launcher, name).get("owed_effects") or {})
    assert described["model_approval_status"] == "PendingManualApproval"


def test_the_chain_alias_asks_only_for_known_actions(evaluated):
    refused = evaluated({"action": "submit", "template": "x"}, alias=CHAIN_ALIAS)
    assert refused["error"]["field"] == "action"
    # The evaluate action is not a public action: the direct door refuses it.
    direct = evaluated({"action": "evaluate", "job_name": "x"}, alias="team-alpha")
    assert direct["error"]["type"] == "ValidationError" and direct["error"]["field"] == "action"


def test_in_queue_mode_the_evaluation_job_is_queued_like_a_job(
    batch_sandbox, monkeypatch, tmp_path, prefix
):
    from tests.unit.trigger.conftest import queue_launcher

    topic = client("sns", batch_sandbox.endpoint).create_topic(Name=f"t-{prefix}")["TopicArn"]
    launcher = queue_launcher(
        batch_sandbox, monkeypatch, tmp_path, capacity=1, env={"FTL_TOPIC_ARN": topic}
    )
    name = launcher(job(prefix))["job_name"]
    seen = launcher({"action": "describe", "job_name": name})
    assert seen["status"] == "InProgress", seen
    launcher.standin.finish_training_job(seen["training_job_name"], "Completed")
    done = launcher({"action": "describe", "job_name": name})
    assert done["status"] == "Completed", done
    assert done["evaluation"]["job_name"] == f"{name}-eval", done
    queued = [j for j in launcher.batch_jobs() if j.request["jobName"].startswith(f"{name}-eval")]
    assert len(queued) == 1, [j.request["jobName"] for j in launcher.batch_jobs()]
    eval_job = _record(launcher, f"{name}-eval")
    assert eval_job["kind"] == "evaluation" and eval_job.get("batch_job_id")
    again = launcher({"action": "evaluate", "job_name": name}, alias=CHAIN_ALIAS)
    assert again["evaluation"]["job_name"] == f"{name}-eval"
    assert len([j for j in launcher.batch_jobs() if f"{name}-eval" in j.request["jobName"]]) == 1
