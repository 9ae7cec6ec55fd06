"""What the launcher stack takes from the foundation stack, so upgrades deploy in one go
(issue 18, point 13; README, Upgrading).

CloudFormation refuses to remove or change an export another stack imports. Every value the
launcher imports must therefore exist, unchanged, in every mode an upgrade moves between:
single team, teams (any set of them), direct and queue. The training roles do not (they are
one per team), so their ARNs reach the launcher through SSM parameters instead.
"""

from __future__ import annotations

import json

import pytest

from tests.infra.synth import QUEUE_CONTEXT, QUEUE_TEAMS_CONTEXT, TEAMS_CONTEXT, templates

MODES = {
    "single": {},
    "teams": TEAMS_CONTEXT,
    "one team": {"ftl:teams": TEAMS_CONTEXT["ftl:teams"][:1]},
    "queue": QUEUE_CONTEXT,
    "queue teams": QUEUE_TEAMS_CONTEXT,
}


def _stacks(mode: str) -> dict:
    return {k: t.to_json() for k, t in templates(json.dumps(MODES[mode], sort_keys=True)).items()}


def _imports(node) -> set[str]:
    if isinstance(node, dict):
        found = {node["Fn::ImportValue"]} if "Fn::ImportValue" in node else set()
        return found.union(*(_imports(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_imports(v) for v in node))
    return set()


def _exports(template: dict) -> set[str]:
    return {o["Export"]["Name"] for o in template.get("Outputs", {}).values() if "Export" in o}


def test_every_import_of_every_mode_is_exported_by_every_mode():
    imported = set().union(*(_imports(_stacks(m)["launcher"]) for m in MODES))
    for mode in MODES:
        missing = imported - _exports(_stacks(mode)["foundation"])
        assert not missing, f"{mode}: an upgrade to it would remove {sorted(missing)}"


@pytest.mark.parametrize("mode", ["single", "teams"])
def test_training_role_arns_reach_the_launcher_through_ssm_not_exports(mode):
    stacks = _stacks(mode)
    assert not any("TrainingRole" in name for name in _imports(stacks["launcher"]))
    written = {
        r["Properties"]["Name"]: r["Properties"]["Value"]
        for r in stacks["foundation"]["Resources"].values()
        if r["Type"] == "AWS::SSM::Parameter"
    }
    expected = (
        {"/fine-tuning/ftl/training-role-arn"}
        if mode == "single"
        else {f"/fine-tuning/ftl/teams/{t}/training-role-arn" for t in ("team-a", "team-b")}
    )
    assert set(written) == expected
    assert all(list(v) == ["Fn::GetAtt"] and v["Fn::GetAtt"][1] == "Arn" for v in written.values())
    read = {
        p["Default"]
        for p in stacks["launcher"]["Parameters"].values()
        if p["Type"] == "AWS::SSM::Parameter::Value<String>" and "/fine-tuning/" in p["Default"]
    }
    assert read == expected


def test_the_exports_earlier_launchers_imported_stay_while_their_role_exists():
    # A deployment made before the hand-over imports the role's ARN by this export name; the
    # first upgrade must not remove it (CloudFormation would refuse).
    single = _exports(_stacks("single")["foundation"])
    assert "ftl-foundation:ExportsOutputFnGetAttTrainingRoleA2F7D4DFArnA81D1217" in single
    teams = _exports(_stacks("teams")["foundation"])
    assert sum("TeamTrainingRoleteam" in name for name in teams) == 2
