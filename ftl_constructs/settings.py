"""Typed platform settings built from ``cdk.json`` context.

Every name and tunable of the platform comes from here. A missing or invalid
context value raises :class:`ContextError`, which names the key and what it
accepts, so ``cdk synth`` fails before anything is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ftl_constructs.lambda_settings import KEYS as _LAMBDA_KEYS
from ftl_constructs.lambda_settings import LambdaSettings
from ftl_constructs.settings_parts import (
    ACCOUNT_RE,
    CONTEXT_PREFIX,
    NAME_RE,
    REGION_RE,
    ApiSettings,
    ContextError,
    ExistingVpc,
    NetworkSettings,
    QueueSettings,
    capacity_setting,
    int_setting,
    lambdas_setting,
    mlflow_setting,
    network_setting,
    prices_setting,
    queue_setting,
    string_setting,
    structured_setting,
    teams_setting,
)
from jobmodel._rules import is_bucket_name
from jobmodel.after_training.tracking import TrackingConfig
from jobmodel.capacity.plans import CapacityConfig
from jobmodel.teams import TeamsConfig

__all__ = [
    "ApiSettings",
    "ContextError",
    "ExistingVpc",
    "NetworkSettings",
    "PlatformSettings",
    "QueueSettings",
    "retention_days",
]


@dataclass(frozen=True)
class PlatformSettings:
    """Everything the stacks need, validated once."""

    name: str = "ftl"
    account: str | None = None
    region: str = "us-east-1"
    checkpoint_expiry_days: int = 30
    log_retention_days: int = 365
    extra_input_buckets: tuple[str, ...] = ()
    catalog_file: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    teams: TeamsConfig = field(default_factory=TeamsConfig)
    # Price overrides, {"<region>": {"<instance type>": <USD per instance-hour>}} (FTL_PRICES).
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    lambdas: LambdaSettings = field(default_factory=LambdaSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    # Training plans (``ftl:trainingPlans``): reserved capacity the chains' plan step uses.
    capacity: CapacityConfig = field(default_factory=CapacityConfig)
    # Experiment tracking (``ftl:mlflow``, issue 27): the MLflow servers jobs log to.
    mlflow: TrackingConfig = field(default_factory=TrackingConfig)
    # A team's additions to the evaluation policies (``ftl:evaluation``, issue 36), as JSON;
    # checked against the catalog where the catalog is read (``LauncherStack._templates``).
    evaluation: Any = None

    @property
    def input_bucket_names(self) -> tuple[str, ...]:
        """Every bucket named in context that jobs read inputs from (platform-wide or a team's)."""
        names = [*self.extra_input_buckets, *(b for t in self.teams.teams for b in t.buckets)]
        return tuple(dict.fromkeys(names))

    @property
    def foundation_stack_name(self) -> str:
        return f"{self.name}-foundation"

    @property
    def launcher_stack_name(self) -> str:
        return f"{self.name}-launcher"

    @classmethod
    def from_context(
        cls, get: Any, *, default_region: str | None = None, default_account: str | None = None
    ) -> PlatformSettings:
        """Build settings from a context getter (``node.try_get_context``)."""
        raw = {key: get(CONTEXT_PREFIX + key) for key in _KEYS}
        return cls.from_mapping(raw, default_region=default_region, default_account=default_account)

    @classmethod
    def from_mapping(
        cls,
        raw: Mapping[str, Any],
        *,
        default_region: str | None = None,
        default_account: str | None = None,
    ) -> PlatformSettings:
        unknown = sorted(set(raw) - set(_KEYS))
        if unknown:
            raise ContextError(unknown[0], f"unknown key; known keys are {', '.join(_KEYS)}")
        v = {k: raw.get(k) for k in _KEYS}

        name = string_setting(
            v, "platformName", "ftl", NAME_RE, "a letter then up to 19 letters, digits or '-'"
        )
        region = string_setting(
            v,
            "region",
            default_region or "us-east-1",
            REGION_RE,
            "an AWS region name such as 'us-east-1'",
        )
        account = _account_setting(v, default_account)
        expiry = int_setting(v, "checkpointExpiryDays", 30, 1, 3650)
        retention = _retention_setting(v)
        extra = _buckets_setting(v)
        tags = _tags_setting(v)
        catalog_file = _catalog_setting(v)
        teams = teams_setting(v)
        if teams.enabled and extra:
            raise ContextError(
                "extraInputBuckets",
                "not used with ftl:teams (each team reads only its own inputs): list a shared "
                "bucket in the 'buckets' of each team that may read it",
                extra,
            )

        mlflow = mlflow_setting(v, teams)
        network = network_setting(v)
        if mlflow.enabled and network.mode == "new" and network.egress == "none":
            raise ContextError(
                "mlflow",
                "tracked jobs must reach MLflow (and PyPI, for the client): the VPC of "
                "ftl:network 'new' with ftl:egress 'none' has no route there; set ftl:egress "
                "to 'nat' or leave ftl:mlflow out",
            )
        return cls(
            name=name,
            catalog_file=catalog_file,
            account=account,
            region=region,
            checkpoint_expiry_days=expiry,
            log_retention_days=retention,
            extra_input_buckets=tuple(extra),
            tags=dict(tags),
            network=network,
            teams=teams,
            prices=prices_setting(v),
            lambdas=lambdas_setting(v),
            queue=queue_setting(v),
            capacity=capacity_setting(v, teams),
            mlflow=mlflow,
            evaluation=structured_setting(v, "evaluation"),
            api=ApiSettings(
                throttle_rate=int_setting(v, "apiThrottleRate", 20, 1, 10000),
                throttle_burst=int_setting(v, "apiThrottleBurst", 40, 1, 5000),
            ),
        )


_KEYS = (
    "platformName",
    "account",
    "region",
    "checkpointExpiryDays",
    "logRetentionDays",
    "extraInputBuckets",
    "tags",
    "network",
    "egress",
    "vpcCidr",
    "maxAzs",
    "existingVpc",
    "createEndpoints",
    "apiThrottleRate",
    "apiThrottleBurst",
    "catalogFile",
    "teams",
    "admins",
    "prices",
    *_LAMBDA_KEYS,
    "scheduler",
    "queueCapacityInstances",
    "queueHeadTimeoutMinutes",
    "queueSharePolicy",
    "queueWaitAlarmMinutes",
    "queueSweeps",
    "trainingPlans",
    "mlflow",
    "evaluation",
)


def _account_setting(v: Mapping[str, Any], default_account: str | None) -> str | None:
    account = v["account"] if v["account"] is not None else default_account
    if account is not None and not (isinstance(account, str) and ACCOUNT_RE.match(account)):
        raise ContextError("account", "a 12-digit AWS account id", account)
    return account


def _retention_setting(v: Mapping[str, Any]) -> int:
    retention = int_setting(v, "logRetentionDays", 365, 1, 3653)
    if retention not in _LOG_RETENTION_DAYS:
        raise ContextError(
            "logRetentionDays", f"one of {', '.join(map(str, _LOG_RETENTION_DAYS))}", retention
        )
    return retention


def _buckets_setting(v: Mapping[str, Any]) -> list[str]:
    raw = structured_setting(v, "extraInputBuckets")
    extra = raw if raw is not None else []
    if not isinstance(extra, list) or not all(
        isinstance(b, str) and is_bucket_name(b) for b in extra
    ):
        raise ContextError("extraInputBuckets", "a list of S3 bucket names", extra)
    return extra


def _tags_setting(v: Mapping[str, Any]) -> dict[str, str]:
    raw = structured_setting(v, "tags")
    tags = raw if raw is not None else {}
    if not isinstance(tags, dict) or not all(
        isinstance(k, str)
        and isinstance(t, str)
        and 0 < len(k) <= 128
        and len(t) <= 256
        and not k.lower().startswith(("aws:", CONTEXT_PREFIX))
        for k, t in tags.items()
    ):
        raise ContextError(
            "tags",
            "an object of string tags (keys 1-128 chars, values up to "
            "256, no 'aws:' or 'ftl:' keys)",
            tags,
        )
    return tags


def _catalog_setting(v: Mapping[str, Any]) -> str | None:
    catalog_file = v["catalogFile"]
    if catalog_file is not None and not (
        isinstance(catalog_file, str) and catalog_file.endswith(".json")
    ):
        raise ContextError("catalogFile", "a path to a JSON template catalog", catalog_file)
    return catalog_file


# CloudWatch Logs accepts only these retention periods (days -> aws_logs.RetentionDays name).
_RETENTION_NAMES = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
    2192: "SIX_YEARS",
    2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS",
    3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}
_LOG_RETENTION_DAYS = tuple(_RETENTION_NAMES)


def retention_days(days: int) -> Any:
    """The ``aws_logs.RetentionDays`` member for a validated day count."""
    from aws_cdk import aws_logs

    return getattr(aws_logs.RetentionDays, _RETENTION_NAMES[days])
