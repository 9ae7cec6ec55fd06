"""The model registry deployed (issue 27): a teams deploy into moto, where a completed job has
exactly one model version, with its lineage, in its team's group; describe shows it; ``models``
lists it for its team and not for another; a team member's approve is refused through both
doors, and the admin's approve works.

Its own platform name (``ftlreg``), so its stacks live beside the session's other deploys.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from jobmodel.after_training.registry import group_name
from sandbox.deploy import ACCOUNT, deploy
from sandbox.http_api import LocalHttpApi
from tests.sandbox.test_teams_deployed import Teams

PLATFORM = "ftlreg"
NLP_ROLE = f"arn:aws:iam::{ACCOUNT}:role/nlp-scientists"
OPS_ROLE = f"arn:aws:iam::{ACCOUNT}:role/platform-ops"
CONTEXT = {
    "ftl:platformName": PLATFORM,
    "ftl:teams": json.dumps(
        [
            {"name": "nlp", "principals": [NLP_ROLE]},
            {"name": "vision", "principals": [f"arn:aws:iam::{ACCOUNT}:role/vision-*"]},
        ]
    ),
    "ftl:admins": json.dumps([OPS_ROLE]),
}
CALLERS = {
    "nlpkey": f"arn:aws:sts::{ACCOUNT}:assumed-role/nlp-scientists/alice",
    "opskey": f"arn:aws:sts::{ACCOUNT}:assumed-role/platform-ops/carol",
}
pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def reg(deployed):
    saved = dict(os.environ)
    started = time.perf_counter()
    outputs = deploy(deployed.endpoint, context=CONTEXT)
    print(f"\nregistry deploy: {time.perf_counter() - started:.1f}s")
    launcher = outputs[f"{PLATFORM}-launcher"]
    with LocalHttpApi(
        deployed.endpoint,
        launcher["TriggerFunctionName"],
        credentials={k: k for k in CALLERS},
        identities=CALLERS,
    ) as api:
        yield Teams(deployed.endpoint, outputs, api)
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def completed(reg) -> dict[str, Any]:
    """A LoRA job of team nlp, described once it ended (moto reports it Completed); its
    version and both teams' ``models`` as they are before any review."""
    job = reg.team("nlp", {"template": "llm-lora", "job_name": "lora-reg"})
    assert "error" not in job, job
    described = reg.team("nlp", {"action": "describe", "job_name": job["job_name"]})
    assert described["status"] == "Completed", described
    arn = described.get("model_package_arn")
    assert arn, described
    return {
        **described,
        "_version": reg.sm.describe_model_package(ModelPackageName=arn),
        "_mine": reg.team("nlp", {"action": "models", "template": "llm-lora"})["models"],
        "_theirs": reg.team("vision", {"action": "models"})["models"],
        "_http": reg.http("nlpkey", "GET", "/models?template=llm-lora"),
    }


def test_the_stack_outputs_its_groups(reg):
    names = set(reg.outputs["ModelPackageGroupNames"].split(","))
    assert group_name(PLATFORM, "llm-lora", "nlp") in names
    assert group_name(PLATFORM, "llm-lora", "vision") in names


def test_a_completed_job_has_one_version_with_its_lineage_in_its_teams_group(reg, completed):
    group = group_name(PLATFORM, "llm-lora", "nlp")
    found = reg.sm.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
    mine = [v for v in found if v["ModelPackageDescription"].startswith(completed["job_name"])]
    assert len(mine) == 1
    assert completed["model_package_arn"] == mine[0]["ModelPackageArn"]
    assert completed["model_package_group"] == group
    assert completed["model_approval_status"] == "PendingManualApproval"
    version = completed["_version"]
    meta = version["CustomerMetadataProperties"]
    assert meta["job_name"] == completed["job_name"] and meta["team"] == "nlp"
    assert meta["template"] == "llm-lora" and meta["artifact"] == "lora-adapter"
    assert meta["base_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert meta["requested_by"] == "team-nlp alias" and meta["source_hash"]
    assert meta["input.train"].startswith("s3://") and "hp.lora_r" in meta
    (container,) = version["InferenceSpecification"]["Containers"]
    assert container["ModelDataUrl"].endswith(f"/{completed['job_name']}/output/model.tar.gz")
    # describe again, and the sweep: still one version
    reg.team("nlp", {"action": "describe", "job_name": completed["job_name"]})
    found = reg.sm.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
    assert len([v for v in found if v["ModelPackageArn"] == completed["model_package_arn"]]) == 1


def test_models_lists_a_teams_versions_and_not_another_teams(reg, completed):
    mine = completed["_mine"]
    assert completed["model_package_arn"] in [m["model_package_arn"] for m in mine]
    listed = next(m for m in mine if m["model_package_arn"] == completed["model_package_arn"])
    assert listed["lineage"]["job_name"] == completed["job_name"]
    assert listed["model_approval_status"] == "PendingManualApproval"
    theirs = completed["_theirs"]
    assert completed["model_package_arn"] not in [m["model_package_arn"] for m in theirs]
    status, body = completed["_http"]
    assert status == 200, body
    assert completed["model_package_arn"] in [m["model_package_arn"] for m in body["models"]]


def test_a_team_member_cannot_approve_and_the_admin_can(reg, completed):
    name = completed["job_name"]
    review = {"decision": "Approved", "description": "looks good"}
    refused = reg.team("nlp", {"action": "review", "job_name": name, **review})
    assert refused["error"]["type"] == "Forbidden" and refused["error"]["field"] == "caller"
    status, body = reg.http("nlpkey", "POST", f"/jobs/{name}/review", review)
    assert status == 403 and body["error"]["type"] == "Forbidden", body
    arn = completed["model_package_arn"]
    assert reg.sm.describe_model_package(ModelPackageName=arn)["ModelApprovalStatus"] == (
        "PendingManualApproval"
    )
    assert (
        reg.admin({"action": "review", "job_name": name, "decision": "Maybe"})["error"]["field"]
        == "decision"
    )
    status, body = reg.http("opskey", "POST", f"/jobs/{name}/review", review)
    assert status == 200 and body["model_approval_status"] == "Approved", body
    assert reg.sm.describe_model_package(ModelPackageName=arn)["ModelApprovalStatus"] == "Approved"
    described = reg.admin({"action": "describe", "job_name": name})
    assert described["model_approval_status"] == "Approved"
    rejected = reg.admin({"action": "review", "job_name": name, "decision": "Rejected"})
    assert rejected["model_approval_status"] == "Rejected"
