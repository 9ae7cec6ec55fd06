"""A bad deploy setting is one line naming the key, the rule and where the value came from
(issue 18, point 10): before, it ended a 15-line traceback and always said cdk.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ftl_constructs.settings_parts import context_source, top_key

ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = {"context": {"ftl:network": "none", "ftl:teams": [{"name": "a"}]}}


def test_a_value_from_cdk_json_says_cdk_json():
    assert context_source("ftl:network", "none", CDK_JSON) == "set in cdk.json's context"
    assert context_source("ftl:teams[0].name", [{"name": "a"}], CDK_JSON) == (
        "set in cdk.json's context"
    )
    assert context_source("ftl:teams[0].name", '[{"name": "a"}]', CDK_JSON) == (
        "set in cdk.json's context"
    )


def test_a_value_from_the_command_line_says_dash_c():
    assert context_source("ftl:network", "bogus", CDK_JSON).startswith(
        "set with -c on the command line"
    )
    assert context_source("ftl:scheduler", "fifo", CDK_JSON).startswith("set with -c")
    assert context_source("ftl:account", None, CDK_JSON).startswith("not set")


def test_top_key():
    assert top_key("ftl:teams[1].limits.max_instances") == "ftl:teams"
    assert top_key("ftl:queueCapacityInstances") == "ftl:queueCapacityInstances"


def test_the_app_prints_one_line_and_no_traceback():
    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], "ftl:network": "bogus"}
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": "/nonexistent"}
    proc = subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: context 'ftl:network': one of 'none', 'new', 'existing', got 'bogus' "
        "(set with -c on the command line, or in cdk.context.json or ~/.cdk.json)"
    )
