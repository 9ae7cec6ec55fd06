#!/usr/bin/env python3
"""The CDK app: settings from context, the stacks, and cdk-nag on every synth."""

from __future__ import annotations

import os

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from stacks.assembly import build_platform

# CDK's built-in CloudFormation rules engine is off: it only warns (its errors are downgraded
# unless a feature flag is set) and costs about 3 s of every synth, while the test suite lints
# every synthesized template with the pinned cfn-lint, in every network mode, as a gate.
# cdk-nag is unaffected: it is a validation plugin of its own and still fails synth.
app = cdk.App(builtin_cloud_formation_validation=False)
build_platform(
    app,
    default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
    default_region=os.environ.get("CDK_DEFAULT_REGION"),
)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
