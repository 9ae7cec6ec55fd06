"""cfn-lint on every synthesized template, every network mode and both schedulers: no errors."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import ManualArgs, lint
from cfnlint.helpers import REGIONS

from jobmodel.after_training.registry import NOT_OFFERED_REGIONS
from tests.infra.synth import (
    EXISTING_VPC,
    QUEUE_CONTEXT,
    QUOTA_TEAMS_CONTEXT,
    TEAMS_CONTEXT,
    templates,
)

MODES = {
    "no-vpc": {},
    "new-vpc-isolated": {"ftl:network": "new"},
    "new-vpc-nat": {"ftl:network": "new", "ftl:egress": "nat"},
    "existing-vpc": {"ftl:network": "existing", "ftl:existingVpc": EXISTING_VPC},
    "teams": TEAMS_CONTEXT,
    "queue": QUEUE_CONTEXT,
    "queue-teams-quotashare": QUOTA_TEAMS_CONTEXT,
}


# AWS::Batch::QuotaShare is not offered in me-central-1 (cfn-lint's region data; docs/QUEUE.md):
# a quota-share deployment needs another region. Every other mode lints in every region.
NOT_OFFERED = {"queue-teams-quotashare": {"me-central-1"}}
# AWS::SageMaker::ModelPackageGroup is not offered in these regions: the stacks synthesized
# there create no model registry (jobmodel.after_training.registry.NOT_OFFERED_REGIONS), so this
# template
# (synthesized for another region) is not the one deployed there.
NOT_OFFERED = {mode: NOT_OFFERED.get(mode, set()) | NOT_OFFERED_REGIONS for mode in MODES}


@pytest.mark.parametrize("mode", MODES)
def test_cfn_lint_has_no_errors(mode):
    regions = [r for r in REGIONS if r not in NOT_OFFERED.get(mode, set())]
    config = ManualArgs(include_checks=["I"], include_experimental=True, regions=regions)
    for name, t in templates(json.dumps(MODES[mode], sort_keys=True)).items():
        matches = lint(json.dumps(t.to_json()), config=config)
        errors = [m for m in matches if m.rule.id.startswith("E")]
        assert not errors, f"{mode}/{name}: " + "\n".join(str(m) for m in errors)
