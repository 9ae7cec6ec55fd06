#!/usr/bin/env python3
"""The CDK app: settings from context, the stacks, and cdk-nag on every synth."""

from __future__ import annotations

import os

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from stacks.assembly import build_platform

app = cdk.App()
build_platform(
    app,
    default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
    default_region=os.environ.get("CDK_DEFAULT_REGION"),
)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
