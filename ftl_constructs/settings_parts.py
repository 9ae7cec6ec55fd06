"""The parts of the platform settings: network, API and queue settings, and the parsers of
the structured context values (teams, prices, lambdas, queue, network).

``settings.PlatformSettings.from_mapping`` uses them; :class:`ContextError` names the key and
what it accepts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ftl_constructs.lambda_settings import LambdaSettings, LambdaSettingsError
from jobmodel.after_training.tracking import TrackingConfig, TrackingError
from jobmodel.capacity.plans import CapacityConfig, CapacityError
from jobmodel.capacity.scheduler import QUEUE_SWEEPS
from jobmodel.contract.errors import SettingsError
from jobmodel.instances import INSTANCE_TYPES
from jobmodel.teams import TeamsConfig, TeamsError

CONTEXT_PREFIX = "ftl:"

NETWORK_MODES = ("none", "new", "existing")
EGRESS_MODES = ("nat", "none")

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,19}$")
REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
ACCOUNT_RE = re.compile(r"^\d{12}$")
_VPC_ID_RE = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_AZ_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")
_CIDR_RE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-8])$")


class ContextError(SettingsError):
    """A context value is missing or invalid; the message names the key and the rule. Where
    the value came from (cdk.json or ``-c``) is :func:`context_source`'s to say: the app
    knows, the settings do not. ``key`` is given without the ``ftl:`` prefix and kept with it."""

    where = "context "

    def __init__(self, key: str, rule: str, got: Any = None) -> None:
        super().__init__(CONTEXT_PREFIX + key, rule, got)

    @classmethod
    def of(cls, error: SettingsError) -> ContextError:
        """A job-model setting's error (teams, training plans, MLflow, Lambda settings) as the
        error of the context key that holds it."""
        return cls(error.key.removeprefix(CONTEXT_PREFIX), error.rule, error.got)


def top_key(key: str) -> str:
    """The context key that holds a nested entry: ``ftl:teams[1].name`` -> ``ftl:teams``."""
    return re.split(r"[\[.]", key, maxsplit=1)[0]


def context_source(key: str, effective: Any, cdk_json: Mapping[str, Any] | None) -> str:
    """Where a context key's value came from: ``cdk.json`` when its ``context`` holds the
    same value, else the command line (``-c``) or another context file; ``not set`` when the
    key has no value at all. ``key`` may name a nested entry (``ftl:teams[1].name``);
    ``effective`` is the value the app sees for its top key."""
    top = top_key(key)
    in_file = (cdk_json or {}).get("context", {})
    if effective is None:
        return "not set: add it to cdk.json's context or pass -c"
    if top in in_file and _same(in_file[top], effective):
        return "set in cdk.json's context"
    return "set with -c on the command line, or in cdk.context.json or ~/.cdk.json"


def _same(in_file: Any, effective: Any) -> bool:
    """cdk.json holds JSON values; ``-c`` gives text: compare both ways."""
    if in_file == effective:
        return True
    if isinstance(effective, str):
        try:
            return json.loads(effective) == in_file
        except ValueError:
            return False
    return False


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
    sweeps: str = "off"  # issue 37: ``outside-queue`` runs sweeps beside the queue

    @property
    def enabled(self) -> bool:
        return self.scheduler == "queue"


def string_setting(
    v: Mapping[str, Any], key: str, default: str, pattern: re.Pattern[str], rule: str
) -> str:
    value = v[key] if v[key] is not None else default
    if not isinstance(value, str) or not pattern.match(value):
        raise ContextError(key, rule, value)
    return value


def int_setting(v: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = v[key] if v[key] is not None else default
    if isinstance(value, str) and value.isdigit():  # `-c key=7` arrives as a string
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ContextError(key, f"an integer from {low} to {high}", value)
    return value


def bool_setting(v: Mapping[str, Any], key: str, default: bool) -> bool:
    value = v[key] if v[key] is not None else default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    if not isinstance(value, bool):
        raise ContextError(key, "true or false", value)
    return value


def choice_setting(v: Mapping[str, Any], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = v[key] if v[key] is not None else default
    if value not in choices:
        raise ContextError(key, f"one of {', '.join(repr(c) for c in choices)}", value)
    return value


def structured_setting(v: Mapping[str, Any], key: str) -> Any:
    """A JSON-valued key: from cdk.json it is already parsed; from ``-c key=...`` it is text."""
    value = v[key]
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ContextError(key, "JSON (a list or an object)", value) from None
    return value


def teams_setting(v: Mapping[str, Any]) -> TeamsConfig:
    try:
        return TeamsConfig.parse(structured_setting(v, "teams"), structured_setting(v, "admins"))
    except TeamsError as exc:
        raise ContextError.of(exc) from None


def capacity_setting(v: Mapping[str, Any], teams: TeamsConfig) -> CapacityConfig:
    """``ftl:trainingPlans``: the platform's training plans (``jobmodel.capacity.plans``)."""
    names = [t.name for t in teams.teams] if teams.enabled else None
    try:
        return CapacityConfig.parse(structured_setting(v, "trainingPlans"), teams=names)
    except CapacityError as exc:
        raise ContextError.of(exc) from None


def mlflow_setting(v: Mapping[str, Any], teams: TeamsConfig) -> TrackingConfig:
    """``ftl:mlflow``: the MLflow tracking servers jobs log to
    (``jobmodel.after_training.tracking``)."""
    names = [t.name for t in teams.teams] if teams.enabled else None
    try:
        return TrackingConfig.parse(structured_setting(v, "mlflow"), teams=names)
    except TrackingError as exc:
        raise ContextError.of(exc) from None


_MAX_HOURLY_PRICE = 10_000.0


def prices_setting(v: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """``ftl:prices``: on-demand USD per instance-hour by region and instance type, merged by
    the launcher over the shipped price table. Only the catalog's instance types are accepted."""
    raw = structured_setting(v, "prices")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ContextError(
            "prices", 'an object {"<region>": {"<instance type>": <USD per hour>}}', raw
        )
    out: dict[str, dict[str, float]] = {}
    for region, table in raw.items():
        if not isinstance(region, str) or not REGION_RE.match(region):
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


def lambdas_setting(v: Mapping[str, Any]) -> LambdaSettings:
    try:
        return LambdaSettings.parse(v["lambdaRuntime"], v["snapStart"])
    except LambdaSettingsError as exc:
        raise ContextError.of(exc) from None


def queue_setting(v: Mapping[str, Any]) -> QueueSettings:
    return QueueSettings(
        scheduler=choice_setting(v, "scheduler", "direct", SCHEDULERS),
        capacity_instances=int_setting(v, "queueCapacityInstances", 16, 1, 10_000),
        # Batch's JobStateTimeLimitAction accepts 600 to 86400 seconds.
        head_timeout_minutes=int_setting(v, "queueHeadTimeoutMinutes", 120, 10, 1440),
        share_policy=choice_setting(v, "queueSharePolicy", "fairshare", SHARE_POLICIES),
        wait_alarm_minutes=int_setting(v, "queueWaitAlarmMinutes", 60, 1, 10_080),
        sweeps=choice_setting(v, "queueSweeps", "off", QUEUE_SWEEPS),
    )


def network_setting(v: Mapping[str, Any]) -> NetworkSettings:
    mode = choice_setting(v, "network", "none", NETWORK_MODES)
    egress = choice_setting(v, "egress", "none", EGRESS_MODES)
    cidr = v["vpcCidr"] if v["vpcCidr"] is not None else "10.80.0.0/16"
    if not isinstance(cidr, str) or not _CIDR_RE.match(cidr):
        raise ContextError("vpcCidr", "an IPv4 CIDR block from /16 to /28", cidr)
    max_azs = int_setting(v, "maxAzs", 2, 1, 6)
    create_endpoints = bool_setting(v, "createEndpoints", True)

    existing = None
    raw = structured_setting(v, "existingVpc")
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
