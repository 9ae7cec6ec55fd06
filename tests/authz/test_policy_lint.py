"""The static lint of every policy document in every documented configuration."""

from __future__ import annotations

import pytest

from tests.authz.conftest import deployment
from tests.authz.harness import CONFIGURATIONS
from testsupport.authz.lint import lint_document, lint_statement
from testsupport.authz.policies import all_documents
from testsupport.authz.sar import data_version


@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_every_policy_document_lints_clean(name):
    docs = all_documents(deployment(name).stacks)
    assert len(docs) >= 10
    findings = [
        str(f)
        for stack, path, kind, doc in docs
        for f in lint_document(doc, stack=stack, construct=path, kind=kind)
    ]
    assert not findings, "\n".join(findings)


def _lint(statement, kind="identity"):
    return [str(f) for f in lint_statement(statement, stack="s", construct="c/Policy", kind=kind)]


def test_the_authorization_data_is_pinned():
    assert data_version() == "0.1.202610271"


def test_deprecated_and_inapplicable_keys_are_findings_naming_the_statement():
    old = {
        "Sid": "CreateCatalogJobsOnly",
        "Effect": "Allow",
        "Action": "sagemaker:CreateTrainingJob",
        "Resource": "arn:aws:sagemaker:us-east-1:123456789012:training-job/*",
        "Condition": {"ArnEquals": {"sagemaker:OutputKmsKey": "arn:aws:kms:us-east-1:1:key/x"}},
    }
    (finding, *rest) = _lint(old)
    assert finding.startswith(
        "s c/Policy [CreateCatalogJobsOnly]: condition key sagemaker:OutputKmsKey"
    )
    assert "deprecated" in finding
    assert any("does not apply to sagemaker:CreateTrainingJob" in f for f in rest)
    new = {
        **old,
        "Condition": {"ArnEquals": {"sagemaker:OutputKmsKeyArn": "arn:aws:kms:us-east-1:1:key/x"}},
    }
    assert _lint(new) == []


def test_actions_without_resource_types_need_star():
    st = {
        "Sid": "Follow",
        "Effect": "Allow",
        "Action": ["batch:DescribeServiceJob", "batch:ListServiceJobs"],
        "Resource": "arn:aws:batch:us-east-1:123456789012:service-job/*",
    }
    assert len(_lint(st)) == 2 and all("takes no resource type" in f for f in _lint(st))
    assert _lint({**st, "Resource": "*"}) == []


def test_resources_must_fit_the_actions_resource_types():
    st = {
        "Sid": "Logs",
        "Effect": "Allow",
        "Action": ["logs:PutLogEvents"],
        "Resource": "arn:aws:s3:::bucket/*",
    }
    assert "none of" in _lint(st)[0]
    ok = {**st, "Resource": "arn:aws:logs:us-east-1:1:log-group:/aws/x:log-stream:team-a-*"}
    assert _lint(ok) == []


def test_operator_and_key_types():
    base = {"Sid": "X", "Effect": "Allow", "Action": "sagemaker:CreateTrainingJob", "Resource": "*"}
    assert any(
        "does not fit" in f
        for f in _lint(
            {**base, "Condition": {"StringEquals": {"sagemaker:MaxRuntimeInSeconds": "1"}}}
        )
    )
    assert (
        any(
            "single-valued" in f
            for f in _lint(
                {**base, "Condition": {"ForAnyValue:StringEquals": {"sagemaker:VpcSubnets": "x"}}}
            )
        )
        is False
    )  # VpcSubnets is multi-valued
    assert any(
        "single-valued" in f
        for f in _lint(
            {
                **base,
                "Condition": {
                    "ForAllValues:NumericLessThanEquals": {"sagemaker:MaxRuntimeInSeconds": "1"}
                },
            }
        )
    )
    unguarded = {
        **base,
        "Condition": {"ForAllValues:StringEquals": {"sagemaker:InstanceTypes": ["ml.g5.xlarge"]}},
    }
    assert any("Null guard" in f for f in _lint(unguarded))
    guarded = {
        **base,
        "Condition": {
            "ForAllValues:StringEquals": {"sagemaker:InstanceTypes": ["ml.g5.xlarge"]},
            "Null": {"sagemaker:InstanceTypes": "false"},
        },
    }
    assert _lint(guarded) == []


def test_unknown_actions_and_keys():
    st = {"Sid": "Y", "Effect": "Allow", "Action": "sagemaker:LaunchRocket", "Resource": "*"}
    assert "does not exist" in _lint(st)[0]
    st = {
        "Sid": "Z",
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": "*",
        "Condition": {"StringEquals": {"s3:NoSuchKey": "x"}},
    }
    assert "does not exist" in _lint(st)[0]
