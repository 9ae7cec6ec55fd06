"""Everything the launcher needs from its container, built once: config, catalog, clients."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ftl_ledger.ledger import Ledger
from ftl_ledger.notify import NotifySettings
from ftl_ledger.runtime import CLIENT_CONFIGS, FunctionRuntime
from ftl_trigger import aws
from ftl_trigger.prices import LivePrices
from ftl_trigger.quotas import LiveQuotas
from jobmodel import PlatformConfig, TemplateSpec, load_catalog
from jobmodel.after_training.registry import ENV_MODEL_REGISTRY
from jobmodel.after_training.tracking import TrackingConfig
from jobmodel.capacity.plans import CapacityConfig
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.names import ENV_CATALOG_PATH, ENV_JOB_TABLE, ENV_TEAM_ROLES, ENV_TOPIC_ARN
from jobmodel.evaluation.additions import EvaluationAdditions
from jobmodel.money.pricing import PriceTable
from jobmodel.teams import TeamsConfig

# The clients' retry settings are the shared base's (``ftl_ledger.runtime.CLIENT_CONFIGS``).
SAGEMAKER_CONFIG = CLIENT_CONFIGS["sagemaker"]
DYNAMODB_CONFIG = CLIENT_CONFIGS["dynamodb"]
QUOTAS_CONFIG = CLIENT_CONFIGS["service-quotas"]
SNS_CONFIG = CLIENT_CONFIGS["sns"]
BATCH_CONFIG = CLIENT_CONFIGS["batch"]

DEFAULT_CATALOG = Path(__file__).resolve().parent.parent / "catalog.json"


@dataclass
class Runtime(FunctionRuntime):
    platform: PlatformConfig
    catalog: Mapping[str, TemplateSpec]
    table_name: str
    sagemaker: Any
    dynamodb: Any
    now: Callable[[], datetime]
    random_hex: Callable[[], str]
    console_base: str
    teams: TeamsConfig
    team_roles: Mapping[str, str]
    # A PriceTable, or LivePrices (the Price List prices the refresh stored over it).
    prices: PriceTable | LivePrices
    # How jobs start (FTL_SCHEDULER); ``batch`` is the AWS Batch client, queue mode only.
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    batch: Any = None
    # The platform's training plans (FTL_CAPACITY), for capacity chains' plan step.
    capacity: CapacityConfig = field(default_factory=CapacityConfig)
    # The account's SageMaker quotas (Service Quotas), for quota-aware submit; None: unchecked.
    quotas: LiveQuotas | None = None
    # The topic that announces a job's end (FTL_TOPIC_ARN) and its client: the trigger makes
    # the end effects its own writes owe (jobmodel.jobs.effects). None: left to the sweep.
    sns: Any = None
    topic_arn: str = ""
    # The platform's MLflow servers (FTL_MLFLOW, jobmodel.after_training.tracking); empty: no
    # tracking.
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    # The stacks made the model registry's groups (FTL_MODEL_REGISTRY=on): Completed jobs
    # register (jobmodel.after_training.registry), and the models and review actions answer.
    model_registry: bool = False
    # The teams' additions to the templates' evaluation policies (FTL_EVALUATION, issue 36):
    # a job's policy is recorded at its claim, and a Completed one is evaluated by it.
    evaluation: EvaluationAdditions = field(default_factory=EvaluationAdditions)

    # The notifications' team topics, event bus and budgets (ftl_ledger.notify), and the
    # EventBridge client (None: no events).
    notify: NotifySettings = field(default_factory=NotifySettings)
    events: Any = None
    # An evaluation's results (issue 36: its output read, the metrics JSON written): made on
    # first use, so a container that never ends an evaluation never builds it.
    s3: Any = None

    @property
    def platform_name(self) -> str:
        return self.platform.platform_name

    def make_client(self, service: str) -> Any:
        return aws.session().create_client(
            service, region_name=self.platform.region, config=CLIENT_CONFIGS[service]
        )

    def has_registry(self) -> bool:
        return self.model_registry

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Runtime:
        env = os.environ if env is None else env
        platform = PlatformConfig.from_env(env)
        catalog_path = Path(env.get(ENV_CATALOG_PATH) or DEFAULT_CATALOG)
        catalog = load_catalog(catalog_path)
        table = env.get(ENV_JOB_TABLE)
        if not table:
            raise ValueError(f"environment variable {ENV_JOB_TABLE} is required")
        teams = TeamsConfig.from_env(env)
        scheduler = SchedulerConfig.from_env(env)
        notify = NotifySettings.from_env(
            env, platform=platform.platform_name, region=platform.region
        )
        session = aws.session()
        dynamodb = session.create_client(
            "dynamodb", region_name=platform.region, config=DYNAMODB_CONFIG
        )
        return cls(
            platform=platform,
            catalog=catalog,
            table_name=table,
            sagemaker=session.create_client(
                "sagemaker", region_name=platform.region, config=SAGEMAKER_CONFIG
            ),
            dynamodb=dynamodb,
            now=lambda: datetime.now(UTC),
            random_hex=lambda: secrets.token_hex(2),
            console_base=(
                f"https://{platform.region}.console.aws.amazon.com/sagemaker/home"
                f"?region={platform.region}#/jobs/"
            ),
            teams=teams,
            team_roles=team_roles(env, teams),
            prices=LivePrices(
                PriceTable.from_env(env), Ledger(dynamodb, table).get_item, platform.region
            ),
            scheduler=scheduler,
            capacity=CapacityConfig.from_env(env),
            quotas=LiveQuotas(
                lambda: session.create_client(
                    "service-quotas", region_name=platform.region, config=QUOTAS_CONFIG
                )
            ),
            batch=(
                session.create_client("batch", region_name=platform.region, config=BATCH_CONFIG)
                if scheduler.queued
                else None
            ),
            sns=(
                session.create_client("sns", region_name=platform.region, config=SNS_CONFIG)
                if env.get(ENV_TOPIC_ARN)
                else None
            ),
            topic_arn=env.get(ENV_TOPIC_ARN, ""),
            tracking=TrackingConfig.from_env(env),
            model_registry=env.get(ENV_MODEL_REGISTRY) == "on",
            evaluation=EvaluationAdditions.from_env(
                env, teams=[t.name for t in teams.teams], catalog=catalog
            ),
            notify=notify,
            events=(
                session.create_client("events", region_name=platform.region, config=SNS_CONFIG)
                if notify.bus
                else None
            ),
        )


def team_roles(env: Mapping[str, str], teams: TeamsConfig) -> dict[str, str]:
    """``FTL_TEAM_ROLES``: team -> training role ARN; every team needs one in teams mode."""
    raw = env.get(ENV_TEAM_ROLES) or "{}"
    try:
        roles = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"environment variable FTL_TEAM_ROLES is not JSON: {exc}") from None
    if not isinstance(roles, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.startswith("arn:") for k, v in roles.items()
    ):
        raise ValueError("environment variable FTL_TEAM_ROLES must map team names to role ARNs")
    missing = [t.name for t in teams.teams if t.name not in roles]
    if missing:
        raise ValueError(f"environment variable FTL_TEAM_ROLES has no role for team {missing[0]}")
    return roles
