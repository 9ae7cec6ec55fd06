"""The model registry's actions in the trigger (issue 27), against moto, through both doors:
a describe that sees a job Completed registers its version and shows it; ``models`` lists
only the caller's team's versions (an admin's: every team's, or one); ``review`` is the
admins' alone, refused for a team member through the direct door and the HTTP API."""

from __future__ import annotations

import uuid

import pytest

from jobmodel.after_training.registry import group_name
from tests.lambda_support import client, create_ledger_table, load_handler, trigger_env
from tests.unit.trigger.conftest import TRIGGER_DIR, Launcher
from tests.unit.trigger.test_teams import ADMIN, ALICE, BOB, as_user, job, teams_env


@pytest.fixture
def registry(moto_endpoint, monkeypatch, tmp_path) -> Launcher:
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    topic = client("sns", moto_endpoint).create_topic(Name=f"t-{table}")["TopicArn"]
    env = trigger_env(moto_endpoint, tmp_path, table=table) | teams_env()
    env |= {"FTL_TOPIC_ARN": topic, "FTL_MODEL_REGISTRY": "on"}
    launcher = Launcher(load_handler(TRIGGER_DIR, monkeypatch, env), moto_endpoint, table)
    platform = launcher.module.RUNTIME.platform.platform_name
    for team in ("alpha", "beta"):
        launcher.sagemaker.create_model_package_group(
            ModelPackageGroupName=group_name(platform, "distilbert-spot", team)
        )
    return launcher


def _completed(registry: Launcher, prefix: str) -> dict:
    """An alpha job, described once moto reports it Completed (the describe registers it)."""
    name = registry(job(prefix), alias="team-alpha")["job_name"]
    described = registry({"action": "describe", "job_name": name}, alias="team-alpha")
    assert described["status"] == "Completed", described
    return described


def test_describe_registers_one_version_and_shows_it(registry, prefix):
    described = _completed(registry, prefix)
    assert described["model_approval_status"] == "PendingManualApproval"
    assert described["model_package_group"].endswith("-alpha-distilbert-spot")
    again = registry({"action": "describe", "job_name": described["job_name"]}, alias="team-alpha")
    assert again["model_package_arn"] == described["model_package_arn"]
    versions = registry.sagemaker.list_model_packages(
        ModelPackageGroupName=described["model_package_group"]
    )["ModelPackageSummaryList"]
    assert [v["ModelPackageArn"] for v in versions].count(described["model_package_arn"]) == 1


def test_models_lists_only_the_callers_teams_versions(registry, prefix):
    arn = _completed(registry, prefix)["model_package_arn"]
    mine = registry({"action": "models"}, alias="team-alpha")["models"]
    assert arn in [m["model_package_arn"] for m in mine]
    assert next(m for m in mine if m["model_package_arn"] == arn)["lineage"]["team"] == "alpha"
    theirs = registry({"action": "models"}, alias="team-beta")["models"]
    assert arn not in [m["model_package_arn"] for m in theirs]
    status, body = as_user(registry, BOB, "GET", "/models")
    assert status == 200 and arn not in [m["model_package_arn"] for m in body["models"]]
    # a team member may not name a team; an admin may
    refused = registry({"action": "models", "team": "alpha"}, alias="team-beta")
    assert refused["error"]["type"] == "ValidationError" and refused["error"]["field"] == "team"
    admin = registry({"action": "models", "team": "alpha"}, alias="admin")["models"]
    assert arn in [m["model_package_arn"] for m in admin]


def test_review_is_for_admins_only_through_both_doors(registry, prefix):
    described = _completed(registry, prefix)
    name, arn = described["job_name"], described["model_package_arn"]
    review = {"decision": "Approved", "description": "eval ok"}
    refused = registry({"action": "review", "job_name": name, **review}, alias="team-alpha")
    assert refused["error"]["type"] == "Forbidden" and refused["error"]["field"] == "caller"
    status, body = as_user(registry, ALICE, "POST", f"/jobs/{name}/review", review)
    assert status == 403 and body["error"]["type"] == "Forbidden"
    assert registry.sagemaker.describe_model_package(ModelPackageName=arn)[
        "ModelApprovalStatus"
    ] == ("PendingManualApproval")
    status, body = as_user(registry, ADMIN, "POST", f"/jobs/{name}/review", review)
    assert status == 200 and body["model_approval_status"] == "Approved", body
    version = registry.sagemaker.describe_model_package(ModelPackageName=arn)
    assert version["ModelApprovalStatus"] == "Approved"
    assert version["ApprovalDescription"] == "eval ok"
    shown = registry({"action": "describe", "job_name": name}, alias="team-alpha")
    assert shown["model_approval_status"] == "Approved"


def test_review_checks_its_fields(registry, prefix):
    name = _completed(registry, prefix)["job_name"]
    for bad, field in (
        ({"decision": "PendingManualApproval"}, "decision"),
        ({"decision": "Approved", "description": "x" * 1025}, "description"),
        ({"decision": "Approved", "extra": 1}, "extra"),
    ):
        answer = registry({"action": "review", "job_name": name, **bad}, alias="admin")
        assert answer["error"]["field"] == field, answer
    status, body = as_user(
        registry,
        ADMIN,
        "POST",
        f"/jobs/{name}/review",
        {"job_name": "other", "decision": "Approved"},
    )
    assert status == 400 and body["error"]["field"] == "job_name"
    missing = registry({"action": "review", "job_name": "alpha-none-1", "decision": "Approved"},
                       alias="admin")  # fmt: skip
    assert missing["error"]["type"] == "NotFound"


def test_without_the_registry_the_actions_say_so(moto_endpoint, monkeypatch, tmp_path):
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    env = trigger_env(moto_endpoint, tmp_path, table=table)
    launcher = Launcher(load_handler(TRIGGER_DIR, monkeypatch, env), moto_endpoint, table)
    answer = launcher({"action": "models"})
    assert answer["error"]["type"] == "UpstreamError"
