"""checkov on every synthesized template, every network mode and both schedulers: no failures.

A check that does not apply is skipped next to the resource, with its reason, in the
resource's CloudFormation metadata (checkov reads it):

    Metadata: {"checkov": {"skip": [{"id": "CKV_AWS_116", "comment": "why"}]}}

In CDK: ``resource.node.default_child.add_metadata("checkov", {"skip": [...]})``. Every skip
must carry a comment.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.infra.checkov_tool import checkov_command
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


def _templates(mode: str) -> dict[str, dict]:
    return {
        name: t.to_json() for name, t in templates(json.dumps(MODES[mode], sort_keys=True)).items()
    }


def run_checkov(folder: Path) -> list[dict]:
    """checkov's CloudFormation results for every template in ``folder`` (offline)."""
    proc = subprocess.run(
        [
            *checkov_command(),
            "--directory",
            str(folder),
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--compact",
            "--skip-download",  # no calls to the vendor's platform
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LOG_LEVEL": "WARNING", "HOME": str(folder)},
    )
    assert proc.returncode in (0, 1), f"checkov failed to run:\n{proc.stderr[-4000:]}"
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    assert [r["check_type"] for r in reports] == ["cloudformation"], proc.stdout[:2000]
    (report,) = reports
    assert report["summary"]["parsing_errors"] == 0, report["summary"]
    assert report["summary"]["resource_count"] > 0, report["summary"]
    return report["results"]["failed_checks"]


@pytest.mark.parametrize("mode", MODES)
def test_checkov_has_no_failed_checks(mode, tmp_path):
    for name, template in _templates(mode).items():
        (tmp_path / f"{name}.template.json").write_text(json.dumps(template))
    failed = run_checkov(tmp_path)
    findings = sorted(
        {
            f"{f['check_id']} ({f['check_name']}) on {f['resource']} in "
            f"{Path(f['file_path']).name.split('.')[0]}"
            for f in failed
        }
    )
    assert not findings, (
        f"{mode}: checkov found {len(findings)} failed check(s); fix each, or skip it next to "
        'the resource with its reason (Metadata: {"checkov": {"skip": [{"id": ..., '
        '"comment": ...}]}}):\n  ' + "\n  ".join(findings)
    )


@pytest.mark.parametrize("mode", MODES)
def test_every_checkov_skip_gives_its_reason(mode):
    for stack, template in _templates(mode).items():
        for logical_id, resource in template.get("Resources", {}).items():
            skips = resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
            for skip in skips:
                assert str(skip.get("id", "")).startswith("CKV"), (stack, logical_id, skip)
                assert len(str(skip.get("comment", "")).strip()) >= 10, (
                    f"{mode}/{stack}: checkov skip {skip.get('id')} on {logical_id} needs a "
                    "reason in 'comment'"
                )
