"""The sandbox's CreateModelPackage keeps SageMaker's idempotency: a repeat with the same
``ClientToken`` (a create whose answer was lost, sent again) answers the version the token
created, not a second one; another token is another version (sandbox/registry_update.py)."""

from __future__ import annotations

import uuid

from tests.lambda_support import client

CONTAINER = {"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/hf:1"}


def _create(sm, group: str, token: str, job: str) -> str:
    return sm.create_model_package(
        ModelPackageGroupName=group,
        ModelPackageDescription=f"{job}: a version",
        InferenceSpecification={
            "Containers": [CONTAINER],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        ClientToken=token,
    )["ModelPackageArn"]


def test_a_repeated_client_token_answers_the_first_version(moto_endpoint):
    sm = client("sagemaker", moto_endpoint)
    group = f"g-{uuid.uuid4().hex[:8]}"
    sm.create_model_package_group(ModelPackageGroupName=group)
    first = _create(sm, group, "tok-a", "job-a")
    assert _create(sm, group, "tok-a", "job-a") == first
    other = _create(sm, group, "tok-b", "job-b")
    assert other != first
    listed = sm.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
    assert sorted(v["ModelPackageVersion"] for v in listed) == [1, 2]
