"""The CDK bootstrap facts ``ftl doctor`` checks (jobmodel.contract.names) are the ones the
synthesized templates carry: their ``BootstrapVersion`` parameter and ``CheckBootstrapVersion``
rule."""

from __future__ import annotations

import pytest
from aws_cdk import DefaultStackSynthesizer

from jobmodel.contract.names import (
    CDK_DEFAULT_QUALIFIER,
    CDK_MIN_BOOTSTRAP_VERSION,
    cdk_bootstrap_parameter,
)
from tests.infra.synth import template


@pytest.mark.parametrize("stack", ["foundation", "launcher"])
def test_the_minimum_bootstrap_version_is_the_one_the_templates_check(stack):
    t = template(stack).to_json()
    assert t["Parameters"]["BootstrapVersion"]["Default"] == cdk_bootstrap_parameter(
        CDK_DEFAULT_QUALIFIER
    )
    (assertion,) = t["Rules"]["CheckBootstrapVersion"]["Assertions"]
    refused = assertion["Assert"]["Fn::Not"][0]["Fn::Contains"][0]
    # The rule refuses every version below the minimum, and only those.
    assert refused == [str(v) for v in range(1, CDK_MIN_BOOTSTRAP_VERSION)]
    assert f"version {CDK_MIN_BOOTSTRAP_VERSION} required" in assertion["AssertDescription"]


def test_the_default_qualifier_is_the_synthesizers():
    assert DefaultStackSynthesizer.DEFAULT_QUALIFIER == CDK_DEFAULT_QUALIFIER


def test_a_qualifier_in_context_moves_the_parameter_and_the_admins_grant():
    from tests.infra.synth import TEAMS_CONTEXT

    context = {**TEAMS_CONTEXT, "@aws-cdk/core:bootstrapQualifier": "ftl123"}
    t = template("launcher", **context)
    assert t.to_json()["Parameters"]["BootstrapVersion"]["Default"] == (
        cdk_bootstrap_parameter("ftl123")
    )
    grants = [
        s
        for p in t.find_resources("AWS::IAM::ManagedPolicy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Sid"] == "PreflightBootstrap"
    ]
    assert len(grants) == 1
    assert "parameter/cdk-bootstrap/ftl123/version" in str(grants[0]["Resource"])
