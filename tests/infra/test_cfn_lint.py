"""cfn-lint on every synthesized template, in every network mode: zero errors."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import lint_all

from tests.infra.synth import EXISTING_VPC, TEAMS_CONTEXT, templates

MODES = {
    "no-vpc": {},
    "new-vpc-isolated": {"ftl:network": "new"},
    "new-vpc-nat": {"ftl:network": "new", "ftl:egress": "nat"},
    "existing-vpc": {"ftl:network": "existing", "ftl:existingVpc": EXISTING_VPC},
    "teams": TEAMS_CONTEXT,
}


@pytest.mark.parametrize("mode", MODES)
def test_cfn_lint_has_no_errors(mode):
    for name, t in templates(json.dumps(MODES[mode], sort_keys=True)).items():
        matches = lint_all(json.dumps(t.to_json()))
        errors = [m for m in matches if m.rule.id.startswith("E")]
        assert not errors, f"{mode}/{name}: " + "\n".join(str(m) for m in errors)
