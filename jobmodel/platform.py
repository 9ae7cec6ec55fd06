"""The deployed platform's configuration, as the trigger Lambda sees it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from . import _rules as R
from .contract.names import (
    ENV_ALLOWED_INPUT_BUCKETS,
    ENV_ARTIFACT_BUCKET,
    ENV_CHECKPOINT_BUCKET,
    ENV_DATA_BUCKET,
    ENV_KMS_KEY_ARN,
    ENV_PLATFORM_NAME,
    ENV_PLATFORM_TAGS,
    ENV_REGION,
    ENV_ROLE_ARN,
    ENV_SECURITY_GROUPS,
    ENV_SOURCE_S3_URI,
    ENV_SUBNETS,
    ENV_TEAM_ROLES,
    PLATFORM_TAG_KEY,
    launcher_tag_count,
)

__all__ = ["PlatformConfig"]


def _split(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True, kw_only=True)
class PlatformConfig:
    """Where jobs run and write: role, buckets, key, network, training source, tags.

    ``data_bucket`` is always an allowed input bucket; ``allowed_input_buckets``
    adds more. ``platform_tags`` go on every job; ``platform_tag_key`` (default
    ``ftl:platform``) carries ``platform_name``.
    """

    region: str
    role_arn: str
    data_bucket: str
    checkpoint_bucket: str
    artifact_bucket: str
    kms_key_arn: str | None = None
    subnets: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    source_s3_uri: str
    allowed_input_buckets: tuple[str, ...] = ()
    platform_tags: Mapping[str, str] = field(default_factory=dict)
    platform_tag_key: str = PLATFORM_TAG_KEY
    platform_name: str = "ftl"

    def __post_init__(self) -> None:
        setter = object.__setattr__
        for name in ("subnets", "security_groups", "allowed_input_buckets"):
            value = getattr(self, name)
            if isinstance(value, str):
                setter(self, name, _split(value))
            elif not isinstance(value, tuple):
                setter(self, name, tuple(value))
        if not isinstance(self.platform_tags, MappingProxyType):
            setter(self, "platform_tags", MappingProxyType(dict(self.platform_tags)))
        if self.kms_key_arn == "":
            setter(self, "kms_key_arn", None)
        for key, value in self.platform_tags.items():
            problem = R.tag_problem(key, value)
            if problem is not None:
                raise ValueError(f"platform_tags: {problem}")
        if len(self.platform_tags) + launcher_tag_count() > R.MAX_TAGS:
            raise ValueError(f"platform_tags: at most {R.MAX_TAGS - launcher_tag_count()} tags")

    def __hash__(self) -> int:
        return hash((self.region, self.role_arn, self.data_bucket, self.source_s3_uri))

    @cached_property
    def input_buckets(self) -> frozenset[str]:
        """Buckets a caller's input URIs may point at (the data bucket plus the allowed ones)."""
        return frozenset((self.data_bucket, *self.allowed_input_buckets))

    def to_env(self) -> dict[str, str]:
        """The ``FTL_*`` variables :meth:`from_env` reads; the launcher construct writes them
        into the trigger's environment at synth time (values may be CDK tokens).

        An empty ``role_arn`` is left out: in a teams deployment ``FTL_TEAM_ROLES`` names one
        training role per team instead of ``FTL_ROLE_ARN``.
        """
        env = {
            ENV_PLATFORM_NAME: self.platform_name,
            ENV_REGION: self.region,
            ENV_ROLE_ARN: self.role_arn,
            ENV_DATA_BUCKET: self.data_bucket,
            ENV_CHECKPOINT_BUCKET: self.checkpoint_bucket,
            ENV_ARTIFACT_BUCKET: self.artifact_bucket,
            ENV_KMS_KEY_ARN: self.kms_key_arn or "",
            ENV_SOURCE_S3_URI: self.source_s3_uri,
            ENV_PLATFORM_TAGS: json.dumps(dict(self.platform_tags), sort_keys=True),
            ENV_ALLOWED_INPUT_BUCKETS: ",".join(self.allowed_input_buckets),
        }
        if not self.role_arn:
            del env[ENV_ROLE_ARN]
        if self.subnets:
            env[ENV_SUBNETS] = ",".join(self.subnets)
            env[ENV_SECURITY_GROUPS] = ",".join(self.security_groups)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PlatformConfig:
        """Build from the trigger Lambda's environment (``FTL_*`` variables).

        Required: ``FTL_REGION`` (or ``AWS_REGION``), ``FTL_ROLE_ARN`` (unless ``FTL_TEAM_ROLES``
        names a role per team), ``FTL_DATA_BUCKET``,
        ``FTL_CHECKPOINT_BUCKET``, ``FTL_ARTIFACT_BUCKET``, ``FTL_SOURCE_S3_URI``.
        Optional: ``FTL_KMS_KEY_ARN`` (empty means none), ``FTL_SUBNETS`` and
        ``FTL_SECURITY_GROUPS`` (comma-separated; subnets need security groups),
        ``FTL_ALLOWED_INPUT_BUCKETS`` (comma-separated), ``FTL_PLATFORM_TAGS``
        (a JSON object of strings), ``FTL_PLATFORM_NAME``. A missing or malformed
        variable raises ``ValueError`` naming it.
        """

        def required(name: str, fallback: str | None = None) -> str:
            value = env.get(name) or (env.get(fallback) if fallback else None)
            if not value:
                hint = f" (or {fallback})" if fallback else ""
                raise ValueError(f"environment variable {name}{hint} is required")
            return value

        region = required(ENV_REGION, "AWS_REGION")
        source = required(ENV_SOURCE_S3_URI)
        if not source.startswith("s3://"):
            raise ValueError(
                f"environment variable {ENV_SOURCE_S3_URI} must be an s3:// URI, got {source!r}"
            )
        subnets = _split(env.get(ENV_SUBNETS))
        security_groups = _split(env.get(ENV_SECURITY_GROUPS))
        if subnets and not security_groups:
            raise ValueError(
                f"environment variable {ENV_SECURITY_GROUPS} is required when {ENV_SUBNETS} is set"
            )
        if security_groups and not subnets:
            raise ValueError(
                f"environment variable {ENV_SUBNETS} is required when {ENV_SECURITY_GROUPS} is set"
            )
        raw_tags = env.get(ENV_PLATFORM_TAGS) or "{}"
        try:
            tags = json.loads(raw_tags)
        except ValueError as exc:
            raise ValueError(
                f"environment variable {ENV_PLATFORM_TAGS} is not JSON: {exc}"
            ) from None
        if not isinstance(tags, dict) or not all(
            type(k) is str and type(v) is str for k, v in tags.items()
        ):
            raise ValueError(
                f"environment variable {ENV_PLATFORM_TAGS} must be a JSON object of strings"
            )
        return cls(
            region=region,
            # A teams deployment has one role per team (FTL_TEAM_ROLES) and no shared one.
            role_arn=(
                env.get(ENV_ROLE_ARN) or "" if env.get(ENV_TEAM_ROLES) else required(ENV_ROLE_ARN)
            ),
            data_bucket=required(ENV_DATA_BUCKET),
            checkpoint_bucket=required(ENV_CHECKPOINT_BUCKET),
            artifact_bucket=required(ENV_ARTIFACT_BUCKET),
            kms_key_arn=env.get(ENV_KMS_KEY_ARN) or None,
            subnets=subnets,
            security_groups=security_groups,
            source_s3_uri=source,
            allowed_input_buckets=_split(env.get(ENV_ALLOWED_INPUT_BUCKETS)),
            platform_tags=tags,
            platform_name=env.get(ENV_PLATFORM_NAME) or "ftl",
        )
