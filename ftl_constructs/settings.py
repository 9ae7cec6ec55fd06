"""Typed platform settings built from ``cdk.json`` context.

Every name and tunable of the platform comes from here. A missing or invalid
context value raises :class:`ContextError`, which names the key and what it
accepts, so ``cdk synth`` fails before anything is built.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ftl_constructs.lambda_settings import KEYS as _LAMBDA_KEYS
from ftl_constructs.lambda_settings import LambdaSettings, LambdaSettingsError
from jobmodel._rules import is_bucket_name
from jobmodel.instances import INSTANCE_TYPES
from jobmodel.teams import TeamsConfig, TeamsError

CONTEXT_PREFIX = "ftl:"

NETWORK_MODES = ("none", "new", "existing")
EGRESS_MODES = ("nat", "none")

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,19}$")
_REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
_ACCOUNT_RE = re.compile(r"^\d{12}$")
_VPC_ID_RE = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_AZ_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")
_CIDR_RE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-8])$")


class ContextError(ValueError):
    """A context value is missing or invalid; the message names the key and the rule."""

    def __init__(self, key: str, rule: str, got: Any = None) -> None:
        shown = "" if got is None else f", got {got!r}"
        super().__init__(f"cdk.json context '{CONTEXT_PREFIX}{key}': {rule}{shown}")
        self.key = CONTEXT_PREFIX + key


@dataclass(frozen=True)
class ExistingVpc:
    """An existing VPC, described fully so synth needs no account lookup."""

    vpc_id: str
    availability_zones: tuple[str, ...]
    private_subnet_ids: tuple[str, ...]
    route_table_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class NetworkSettings:
    mode: str = "none"
    egress: str = "none"
    vpc_cidr: str = "10.80.0.0/16"
    max_azs: int = 2
    existing: ExistingVpc | None = None
    create_endpoints: bool = True

    @property
    def enabled(self) -> bool:
        return self.mode != "none"


@dataclass(frozen=True)
class ApiSettings:
    throttle_rate: int = 20
    throttle_burst: int = 40


SCHEDULERS = ("direct", "queue")
SHARE_POLICIES = ("fairshare", "quotashare")


@dataclass(frozen=True)
class QueueSettings:
    """The Batch job queue (issue 10); used only when ``scheduler`` is ``queue``.

    ``capacity_instances``: the service environment's limit, in instances across all jobs.
    ``head_timeout_minutes``: a job stuck RUNNABLE at the head of the queue for a capacity or
    quota reason is cancelled after this long (Batch allows 10 minutes to 24 hours).
    ``share_policy``: ``fairshare`` (shares by team weight) or ``quotashare`` (each team a
    quota of instances that it may lend and borrow). ``wait_alarm_minutes``: the dashboard's
    alarm when a job has waited longer than this.
    """

    scheduler: str = "direct"
    capacity_instances: int = 16
    head_timeout_minutes: int = 120
    share_policy: str = "fairshare"
    wait_alarm_minutes: int = 60

    @property
    def enabled(self) -> bool:
        return self.scheduler == "queue"


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

        name = _string(
            v, "platformName", "ftl", _NAME_RE, "a letter then up to 19 letters, digits or '-'"
        )
        region = _string(
            v,
            "region",
            default_region or "us-east-1",
            _REGION_RE,
            "an AWS region name such as 'us-east-1'",
        )
        account = v["account"] if v["account"] is not None else default_account
        if account is not None and not (isinstance(account, str) and _ACCOUNT_RE.match(account)):
            raise ContextError("account", "a 12-digit AWS account id", account)

        expiry = _int(v, "checkpointExpiryDays", 30, 1, 3650)
        retention = _int(v, "logRetentionDays", 365, 1, 3653)
        if retention not in _LOG_RETENTION_DAYS:
            raise ContextError(
                "logRetentionDays", f"one of {', '.join(map(str, _LOG_RETENTION_DAYS))}", retention
            )

        extra = v["extraInputBuckets"] if v["extraInputBuckets"] is not None else []
        if not isinstance(extra, list) or not all(
            isinstance(b, str) and is_bucket_name(b) for b in extra
        ):
            raise ContextError("extraInputBuckets", "a list of S3 bucket names", extra)

        tags = v["tags"] if v["tags"] is not None else {}
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

        catalog_file = v["catalogFile"]
        if catalog_file is not None and not (
            isinstance(catalog_file, str) and catalog_file.endswith(".json")
        ):
            raise ContextError("catalogFile", "a path to a JSON template catalog", catalog_file)

        teams = _teams(v)
        if teams.enabled and extra:
            raise ContextError(
                "extraInputBuckets",
                "not used with ftl:teams (each team reads only its own inputs): list a shared "
                "bucket in the 'buckets' of each team that may read it",
                extra,
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
            network=_network(v),
            teams=teams,
            prices=_prices(v),
            lambdas=_lambdas(v),
            queue=_queue(v),
            api=ApiSettings(
                throttle_rate=_int(v, "apiThrottleRate", 20, 1, 10000),
                throttle_burst=_int(v, "apiThrottleBurst", 40, 1, 5000),
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
)

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


def _string(
    v: Mapping[str, Any], key: str, default: str, pattern: re.Pattern[str], rule: str
) -> str:
    value = v[key] if v[key] is not None else default
    if not isinstance(value, str) or not pattern.match(value):
        raise ContextError(key, rule, value)
    return value


def _int(v: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = v[key] if v[key] is not None else default
    if isinstance(value, str) and value.isdigit():  # `-c key=7` arrives as a string
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ContextError(key, f"an integer from {low} to {high}", value)
    return value


def _bool(v: Mapping[str, Any], key: str, default: bool) -> bool:
    value = v[key] if v[key] is not None else default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise ContextError(key, "true or false", value)
    return value


def _choice(v: Mapping[str, Any], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = v[key] if v[key] is not None else default
    if value not in choices:
        raise ContextError(key, f"one of {', '.join(repr(c) for c in choices)}", value)
    return value


def _structured(v: Mapping[str, Any], key: str) -> Any:
    """A JSON-valued key: from cdk.json it is already parsed; from ``-c key=...`` it is text."""
    value = v[key]
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ContextError(key, "JSON (a list or an object)", value) from None
    return value


def _teams(v: Mapping[str, Any]) -> TeamsConfig:
    try:
        return TeamsConfig.parse(_structured(v, "teams"), _structured(v, "admins"))
    except TeamsError as exc:
        raise ContextError(exc.key.removeprefix(CONTEXT_PREFIX), exc.rule, exc.got) from None


_MAX_HOURLY_PRICE = 10_000.0


def _prices(v: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``ftl:prices``: on-demand USD per instance-hour by region and instance type, merged by
    the launcher over the shipped price table. Only the catalog's instance types are accepted."""
    raw = _structured(v, "prices")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ContextError(
            "prices", 'an object {"<region>": {"<instance type>": <USD per hour>}}', raw
        )
    out: dict[str, dict[str, float]] = {}
    for region, table in raw.items():
        if not isinstance(region, str) or not _REGION_RE.match(region):
            raise ContextError(
                "prices", "keys must be AWS region names such as 'us-east-1'", region
            )
        where = f'prices["{region}"]'
        if not isinstance(table, dict) or not table:
            raise ContextError(
                where, 'a non-empty object {"<instance type>": <USD per hour>}', table
            )
        out[region] = {}
        for itype, price in table.items():
            if itype not in INSTANCE_TYPES:
                raise ContextError(
                    where, "keys must be instance types of the catalog (jobmodel.instances)", itype
                )
            if (
                isinstance(price, bool)
                or not isinstance(price, int | float)
                or not math.isfinite(price)
                or not 0 < price <= _MAX_HOURLY_PRICE
            ):
                raise ContextError(
                    f'{where}["{itype}"]',
                    f"a price in USD per instance-hour, above 0 and at most {_MAX_HOURLY_PRICE:g}",
                    price,
                )
            out[region][itype] = float(price)
    return out


def _lambdas(v: Mapping[str, Any]) -> LambdaSettings:
    try:
        return LambdaSettings.parse(v["lambdaRuntime"], v["snapStart"])
    except LambdaSettingsError as exc:
        raise ContextError(exc.key, exc.rule, exc.got) from None


def _queue(v: Mapping[str, Any]) -> QueueSettings:
    return QueueSettings(
        scheduler=_choice(v, "scheduler", "direct", SCHEDULERS),
        capacity_instances=_int(v, "queueCapacityInstances", 16, 1, 10_000),
        # Batch's JobStateTimeLimitAction accepts 600 to 86400 seconds.
        head_timeout_minutes=_int(v, "queueHeadTimeoutMinutes", 120, 10, 1440),
        share_policy=_choice(v, "queueSharePolicy", "fairshare", SHARE_POLICIES),
        wait_alarm_minutes=_int(v, "queueWaitAlarmMinutes", 60, 1, 10_080),
    )


def _network(v: Mapping[str, Any]) -> NetworkSettings:
    mode = _choice(v, "network", "none", NETWORK_MODES)
    egress = _choice(v, "egress", "none", EGRESS_MODES)
    cidr = v["vpcCidr"] if v["vpcCidr"] is not None else "10.80.0.0/16"
    if not isinstance(cidr, str) or not _CIDR_RE.match(cidr):
        raise ContextError("vpcCidr", "an IPv4 CIDR block from /16 to /28", cidr)
    max_azs = _int(v, "maxAzs", 2, 1, 6)
    create_endpoints = _bool(v, "createEndpoints", True)

    existing = None
    raw = v["existingVpc"]
    if mode == "existing":
        rule = (
            'an object {"vpcId": "vpc-...", "availabilityZones": [...], '
            '"privateSubnetIds": [...], "routeTableIds": [...] (optional)}'
        )
        required = {"vpcId", "availabilityZones", "privateSubnetIds"}
        if not isinstance(raw, dict) or not required <= set(raw) <= required | {"routeTableIds"}:
            raise ContextError("existingVpc", rule, raw)
        vpc_id, azs, subnets = raw["vpcId"], raw["availabilityZones"], raw["privateSubnetIds"]
        if not (isinstance(vpc_id, str) and _VPC_ID_RE.match(vpc_id)):
            raise ContextError("existingVpc", "vpcId must look like 'vpc-0123abcd'", vpc_id)
        if not (
            isinstance(azs, list)
            and azs
            and all(isinstance(a, str) and _AZ_RE.match(a) for a in azs)
        ):
            raise ContextError("existingVpc", "availabilityZones must be zone names", azs)
        if not (
            isinstance(subnets, list)
            and 1 <= len(subnets) <= 16
            and all(isinstance(s, str) and _SUBNET_ID_RE.match(s) for s in subnets)
        ):
            raise ContextError(
                "existingVpc", "privateSubnetIds must be 1-16 'subnet-...' ids", subnets
            )
        if len(subnets) % len(azs):
            raise ContextError(
                "existingVpc",
                "privateSubnetIds must be a multiple of the number of availabilityZones",
                subnets,
            )
        tables = raw.get("routeTableIds", [])
        if not (
            isinstance(tables, list)
            and all(isinstance(t, str) and t.startswith("rtb-") for t in tables)
        ):
            raise ContextError("existingVpc", "routeTableIds must be 'rtb-...' ids", tables)
        if tables and len(tables) != len(subnets):
            raise ContextError(
                "existingVpc", "routeTableIds needs one id per private subnet", tables
            )
        if create_endpoints and not tables:
            raise ContextError(
                "existingVpc",
                "routeTableIds is required to add the S3 gateway "
                "endpoint (or set ftl:createEndpoints to false)",
                raw,
            )
        existing = ExistingVpc(vpc_id, tuple(azs), tuple(subnets), tuple(tables))
    elif raw is not None:
        raise ContextError("existingVpc", "only allowed with network 'existing'", raw)

    if mode != "new" and egress == "nat":
        raise ContextError(
            "egress", "'nat' needs network 'new' (an existing VPC brings its own routing)", egress
        )
    return NetworkSettings(
        mode=mode,
        egress=egress,
        vpc_cidr=cidr,
        max_azs=max_azs,
        existing=existing,
        create_endpoints=create_endpoints,
    )
