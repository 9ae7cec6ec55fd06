"""Fixtures for the job model tests: a catalog with images, platforms, a payload factory."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

import jobmodel as jm
from testsupport import IMAGE as FAKE_IMAGE
from testsupport import IMAGE_ENTRYPOINT


@pytest.fixture(scope="session")
def fake_image() -> str:
    return FAKE_IMAGE


@pytest.fixture(scope="session")
def catalog() -> dict[str, jm.TemplateSpec]:
    """The shipped catalog with a (fake) resolved image and its ENTRYPOINT on every template."""
    return {
        name: spec.with_image(FAKE_IMAGE, entrypoint=IMAGE_ENTRYPOINT)
        for name, spec in jm.shipped_catalog().items()
    }


@pytest.fixture(scope="session")
def platform() -> jm.PlatformConfig:
    """A full platform: KMS key, VPC, an extra input bucket, platform tags."""
    return jm.PlatformConfig(
        region="us-east-1",
        role_arn="arn:aws:iam::123456789012:role/ftl-training",
        data_bucket="ftl-data-123456789012",
        checkpoint_bucket="ftl-checkpoints-123456789012",
        artifact_bucket="ftl-artifacts-123456789012",
        kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/1111aaaa-2222-bbbb-3333-cccc4444dddd",
        subnets=("subnet-0aaa", "subnet-0bbb"),
        security_groups=("sg-0ccc",),
        source_s3_uri="s3://ftl-artifacts-123456789012/source/sourcedir.tar.gz",
        allowed_input_buckets=("shared-datasets",),
        platform_tags={"owner": "ml-platform", "environment": "test"},
    )


@pytest.fixture(scope="session")
def plain_platform(platform: jm.PlatformConfig) -> jm.PlatformConfig:
    """No KMS key, no VPC, no platform tags."""
    return dataclasses.replace(
        platform,
        kms_key_arn=None,
        subnets=(),
        security_groups=(),
        allowed_input_buckets=(),
        platform_tags={},
    )


@pytest.fixture
def submit(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> Callable[..., jm.SubmitRequest]:
    """``submit(template=..., **fields)``: validate a payload against the fixture catalog."""

    def _submit(template: str = "bert-large-qa", **fields: Any) -> jm.SubmitRequest:
        return jm.validate_submit({"template": template, **fields}, catalog, platform)

    return _submit


@pytest.fixture
def reject(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> Callable[..., jm.JobModelError]:
    """``reject(payload, field)``: the payload must fail with a ValidationError on ``field``."""

    def _reject(
        payload: Any, field: str, error: type[jm.JobModelError] = jm.ValidationError
    ) -> jm.JobModelError:
        with pytest.raises(error) as info:
            jm.validate_submit(payload, catalog, platform)
        err = info.value
        assert type(err) is error
        assert err.field == field, err
        # The message names the field (its last part for nested ones is enough).
        assert field.split(".")[0] in err.message or field == "body", err.message
        assert err.to_dict()["error"]["field"] == field
        return err

    return _reject


@pytest.fixture(scope="module")
def shipped() -> dict[str, jm.TemplateSpec]:
    """The shipped catalog as it ships (images unresolved)."""
    return jm.shipped_catalog()
