"""The model registry's infrastructure (issue 27): one group per team and template (per
template in a single-team deployment), valid names, the output, and least-privilege IAM: the
two functions that complete end effects create only PendingManualApproval versions in the
platform's groups, only the trigger reviews, and no team policy grants SageMaker."""

from __future__ import annotations

import json
import re

import pytest
from aws_cdk.assertions import Match

from jobmodel.after_training.registry import group_name
from tests.infra.synth import TEAMS_CONTEXT, template

GROUP = "AWS::SageMaker::ModelPackageGroup"
NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


@pytest.fixture(scope="module")
def single():
    return template("launcher")


@pytest.fixture(scope="module")
def teams():
    return template("launcher", **TEAMS_CONTEXT)


def _platform(t) -> str:
    for fn in t.find_resources("AWS::Lambda::Function").values():
        variables = fn["Properties"].get("Environment", {}).get("Variables", {})
        if "FTL_ARTIFACT_BUCKET" in variables:  # the trigger
            return str(variables["FTL_PLATFORM_NAME"])
    raise AssertionError("no trigger function")


def _tags(props: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in props["Tags"]}


def _groups(t) -> dict[str, dict]:
    return {
        r["Properties"]["ModelPackageGroupName"]: r["Properties"]
        for r in t.find_resources(GROUP).values()
    }


def test_a_single_team_deployment_has_one_group_per_template(single):
    groups = _groups(single)
    platform = _platform(single)
    templates = [_tags(p)["ftl:template"] for p in groups.values()]
    assert len(templates) == len(set(templates)) >= 5
    assert set(groups) == {group_name(platform, t) for t in templates}
    assert all(NAME_RE.match(n) and len(n) <= 63 for n in groups)
    assert not any("ftl:team" in _tags(p) for p in groups.values())


def test_a_teams_deployment_has_one_group_per_team_and_template(teams):
    groups = _groups(teams)
    platform = _platform(teams)
    by_team: dict[str, int] = {}
    for name, props in groups.items():
        tags = _tags(props)
        team = tags.get("ftl:team")
        assert team in ("team-a", "team-b"), tags
        assert name == group_name(platform, tags["ftl:template"], team)
        by_team[team] = by_team.get(team, 0) + 1
    assert by_team["team-a"] == by_team["team-b"] == len(groups) // 2
    assert all(NAME_RE.match(n) for n in groups)
    assert "ModelPackageGroupPolicy" not in json.dumps(list(groups.values()))
    outputs = teams.find_outputs("ModelPackageGroupNames")
    assert outputs


def _statements(t, sid: str) -> list[dict]:
    out = []
    for policy in t.find_resources("AWS::IAM::Policy").values():
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            if st.get("Sid") == sid:
                out.append(st)
    return out


@pytest.mark.parametrize("fixture", ["single", "teams"])
def test_both_functions_register_only_pending_versions(fixture, request):
    t = request.getfixturevalue(fixture)
    creates = _statements(t, "RegisterModelVersions")
    assert len(creates) == 2  # the trigger and the job-events function
    for st in creates:
        assert st["Action"] == "sagemaker:CreateModelPackage"
        assert st["Condition"] == {
            "StringEquals": {"sagemaker:ModelApprovalStatus": "PendingManualApproval"}
        }
        assert "model-package" in json.dumps(st["Resource"]) and "*" != st["Resource"]
    (review,) = _statements(t, "ReviewModelVersions")
    assert review["Condition"]["StringEquals"]["sagemaker:ModelApprovalStatus"] == [
        "Approved",
        "Rejected",
    ]
    t.has_resource_properties(
        "AWS::Lambda::Function",
        {"Environment": {"Variables": Match.object_like({"FTL_MODEL_REGISTRY": "on"})}},
    )


def test_no_team_policy_grants_sagemaker(teams):
    for policy in teams.find_resources("AWS::IAM::ManagedPolicy").values():
        text = json.dumps(policy["Properties"]["PolicyDocument"])
        assert "sagemaker:" not in text, text[:300]


@pytest.mark.parametrize("fixture", ["single", "teams"])
def test_an_evaluations_results_may_gate_a_version_but_never_make_it_pending(fixture, request):
    """Issue 36: both functions set a version's metadata without its status (Null), or its
    status to Approved or Rejected; none may set it back to PendingManualApproval."""
    t = request.getfixturevalue(fixture)
    records = _statements(t, "RecordEvaluations")
    assert len(records) == 2
    for st in records:
        assert st["Action"] == "sagemaker:UpdateModelPackage"
        assert st["Condition"] == {"Null": {"sagemaker:ModelApprovalStatus": "true"}}
    (gate,) = _statements(t, "GateModelVersions")  # the trigger has ReviewModelVersions
    assert gate["Condition"] == {
        "StringEquals": {"sagemaker:ModelApprovalStatus": ["Approved", "Rejected"]}
    }
    for sid, action, leaf in (
        ("ReadEvaluationOutput", "s3:GetObject", "/*/output/output.tar.gz"),
        ("WriteModelMetrics", "s3:PutObject", "/*/evaluation/model-metrics.json"),
    ):
        found = _statements(t, sid)
        assert len(found) == 2
        for st in found:
            assert st["Action"] == action
            text = json.dumps(st["Resource"])
            assert "ArtifactBucket" in text and leaf in text
