"""What the job-events function needs from its container, built once: the ledger's client and
the recorder (whose writer prints the metric lines and sends budget notifications), the SNS
and EventBridge clients, the topics and bus (``ftl_ledger.notify``), the SageMaker client of
the model registry (when the stacks made one), the platform's name and the clock (like
``ftl_trigger.trigger_runtime`` for the trigger)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

from ftl_events.apply import Recorder
from ftl_ledger.ledger import Ledger
from ftl_ledger.notify import NotifySettings
from ftl_ledger.runtime import CLIENT_CONFIGS, FunctionRuntime
from jobmodel.after_training.registry import ENV_MODEL_REGISTRY
from jobmodel.contract.names import (
    ENV_CHAIN_FUNCTION,
    ENV_JOB_TABLE,
    ENV_PLATFORM_NAME,
    ENV_TOPIC_ARN,
)
from jobmodel.money import limits as Q
from jobmodel.platform import PlatformConfig


@dataclass
class Runtime(FunctionRuntime):
    recorder: Recorder
    sns: Any
    topic_arn: str
    platform: str
    now: Callable[[], datetime]
    # The trigger's ``chain`` alias (FTL_CHAIN_FUNCTION): asked to start a chain's next attempt.
    chain_function: str = ""
    lambda_client: Any = None
    # The model registry's end effect (FTL_MODEL_REGISTRY=on): None when there is none.
    sagemaker: Any = None
    # The team topics, event bus and budgets of the notifications (ftl_ledger.notify), and
    # the EventBridge client (None: no events).
    notify: NotifySettings = field(default_factory=NotifySettings)
    events: Any = None
    # An evaluation's results (issue 36): built on first use.
    s3: Any = None

    @property
    def platform_name(self) -> str:
        return self.platform

    def make_client(self, service: str) -> Any:
        return boto3.client(service, config=CLIENT_CONFIGS[service])

    def has_registry(self) -> bool:
        return self.sagemaker is not None

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Runtime:
        env = os.environ if env is None else env
        table = env.get(ENV_JOB_TABLE)
        if not table:
            raise ValueError(f"environment variable {ENV_JOB_TABLE} is required")

        def now() -> datetime:
            return datetime.now(UTC)

        ledger = Ledger(boto3.client("dynamodb", config=CLIENT_CONFIGS["dynamodb"]), table)
        platform = env.get(ENV_PLATFORM_NAME) or PlatformConfig.platform_name
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        notify = NotifySettings.from_env(env, platform=platform, region=region)
        runtime = cls(
            recorder=Recorder(ledger, now, platform=platform),
            sns=boto3.client("sns", config=CLIENT_CONFIGS["sns"]),
            topic_arn=env.get(ENV_TOPIC_ARN, ""),
            platform=platform,
            now=now,
            chain_function=env.get(ENV_CHAIN_FUNCTION, ""),
            lambda_client=(
                boto3.client("lambda", config=CLIENT_CONFIGS["lambda"])
                if env.get(ENV_CHAIN_FUNCTION)
                else None
            ),
            sagemaker=(
                boto3.client("sagemaker", config=CLIENT_CONFIGS["sagemaker"])
                if env.get(ENV_MODEL_REGISTRY) == "on"
                else None
            ),
            notify=notify,
            events=boto3.client("events", config=CLIENT_CONFIGS["events"]) if notify.bus else None,
        )
        # The one writer sends the budget notifications of a write that changed a team's spend.
        runtime.recorder.writer.on_spend = runtime.budget_watch(
            ledger, lambda: Q.month_of(runtime.now())
        )
        return runtime
