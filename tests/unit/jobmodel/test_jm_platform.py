"""PlatformConfig.from_env."""

from __future__ import annotations

import dataclasses

import pytest

import jobmodel as jm

ENV = {
    "FTL_REGION": "eu-west-1",
    "FTL_ROLE_ARN": "arn:aws:iam::123456789012:role/train",
    "FTL_DATA_BUCKET": "data",
    "FTL_CHECKPOINT_BUCKET": "ckpt",
    "FTL_ARTIFACT_BUCKET": "art",
    "FTL_SOURCE_S3_URI": "s3://art/source/sourcedir.tar.gz",
}


def test_minimal_env() -> None:
    cfg = jm.PlatformConfig.from_env(ENV)
    assert cfg.region == "eu-west-1"
    assert cfg.kms_key_arn is None
    assert cfg.subnets == () and cfg.security_groups == ()
    assert cfg.allowed_input_buckets == ()
    assert dict(cfg.platform_tags) == {}
    assert cfg.platform_tag_key == "ftl:platform"
    assert cfg.platform_name == "ftl"
    assert cfg.input_buckets == {"data"}


def test_full_env() -> None:
    cfg = jm.PlatformConfig.from_env(
        {
            **ENV,
            "FTL_KMS_KEY_ARN": "arn:aws:kms:eu-west-1:123456789012:key/abc",
            "FTL_SUBNETS": "subnet-a, subnet-b,",
            "FTL_SECURITY_GROUPS": "sg-1",
            "FTL_ALLOWED_INPUT_BUCKETS": "shared,public-data",
            "FTL_PLATFORM_TAGS": '{"owner": "ml-platform"}',
            "FTL_PLATFORM_NAME": "ftl-prod",
        }
    )
    assert cfg.kms_key_arn == "arn:aws:kms:eu-west-1:123456789012:key/abc"
    assert cfg.subnets == ("subnet-a", "subnet-b")
    assert cfg.security_groups == ("sg-1",)
    assert cfg.input_buckets == {"data", "shared", "public-data"}
    assert dict(cfg.platform_tags) == {"owner": "ml-platform"}
    assert cfg.platform_name == "ftl-prod"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.region = "x"  # type: ignore[misc]


def test_region_falls_back_to_aws_region() -> None:
    env = {k: v for k, v in ENV.items() if k != "FTL_REGION"}
    assert jm.PlatformConfig.from_env({**env, "AWS_REGION": "us-west-2"}).region == "us-west-2"


def test_empty_kms_means_none() -> None:
    assert jm.PlatformConfig.from_env({**ENV, "FTL_KMS_KEY_ARN": ""}).kms_key_arn is None


@pytest.mark.parametrize("name", sorted(ENV))
def test_missing_variable_is_named(name: str) -> None:
    env = {k: v for k, v in ENV.items() if k != name}
    with pytest.raises(ValueError, match=name):
        jm.PlatformConfig.from_env(env)


@pytest.mark.parametrize(
    ("extra", "name"),
    [
        ({"FTL_PLATFORM_TAGS": "not json"}, "FTL_PLATFORM_TAGS"),
        ({"FTL_PLATFORM_TAGS": '["a"]'}, "FTL_PLATFORM_TAGS"),
        ({"FTL_PLATFORM_TAGS": '{"a": 1}'}, "FTL_PLATFORM_TAGS"),
        ({"FTL_SUBNETS": "subnet-a"}, "FTL_SECURITY_GROUPS"),
        ({"FTL_SECURITY_GROUPS": "sg-1"}, "FTL_SUBNETS"),
        ({"FTL_SOURCE_S3_URI": "/local/path.tar.gz"}, "FTL_SOURCE_S3_URI"),
    ],
)
def test_malformed_variable_is_named(extra: dict[str, str], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        jm.PlatformConfig.from_env({**ENV, **extra})


def test_platform_tags_obey_tag_rules() -> None:
    with pytest.raises(ValueError, match="aws:"):
        jm.PlatformConfig.from_env({**ENV, "FTL_PLATFORM_TAGS": '{"aws:owner": "x"}'})
    many = "{" + ",".join(f'"t{i}": "x"' for i in range(47)) + "}"
    with pytest.raises(ValueError, match="platform_tags"):
        jm.PlatformConfig.from_env({**ENV, "FTL_PLATFORM_TAGS": many})
