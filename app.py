#!/usr/bin/env python3
"""The CDK app: settings from context, the stacks, and cdk-nag on every synth."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from ftl_constructs.settings_parts import ContextError, context_source, top_key
from stacks.assembly import build_platform

# CDK's built-in CloudFormation rules engine is off: it only warns (its errors are downgraded
# unless a feature flag is set) and costs about 3 s of every synth, while the test suite lints
# every synthesized template with the pinned cfn-lint, in every network mode, as a gate.
# cdk-nag is unaffected: it is a validation plugin of its own and still fails synth.
app = cdk.App(builtin_cloud_formation_validation=False)
try:
    build_platform(
        app,
        default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
        default_region=os.environ.get("CDK_DEFAULT_REGION"),
    )
except ContextError as bad:
    # One line that names the key, the rule and where the value came from; no traceback.
    cdk_json = Path(__file__).resolve().parent / "cdk.json"
    source = context_source(
        bad.key,
        app.node.try_get_context(top_key(bad.key)),
        json.loads(cdk_json.read_text()) if cdk_json.exists() else None,
    )
    sys.stderr.write(f"error: {bad} ({source})\n")
    sys.exit(1)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
