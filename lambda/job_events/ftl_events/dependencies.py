"""What the job-events function needs from its container, built once: the ledger's client and
the recorder, the SNS client and topic, the platform's name, the clock and the metrics output
(like ``ftl_trigger.dependencies`` for the trigger)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config

from ftl_events.apply import Recorder
from ftl_ledger.ledger import Ledger
from jobmodel.names import ENV_JOB_TABLE
from jobmodel.platform import PlatformConfig

ENV_TOPIC_ARN = "FTL_TOPIC_ARN"
ENV_PLATFORM_NAME = "FTL_PLATFORM_NAME"  # as PlatformConfig.to_env writes it
CLIENT_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 4})


def print_line(line: str) -> None:
    """Standard output: Lambda sends it to the function's log group, where CloudWatch turns
    EMF lines into metrics (no PutMetricData call)."""
    print(line, flush=True)


@dataclass
class Runtime:
    recorder: Recorder
    sns: Any
    topic_arn: str
    platform: str
    now: Callable[[], datetime]
    emit: Callable[[str], None] = print_line

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> Runtime:
        env = os.environ if env is None else env
        table = env.get(ENV_JOB_TABLE)
        if not table:
            raise ValueError(f"environment variable {ENV_JOB_TABLE} is required")

        def now() -> datetime:
            return datetime.now(UTC)

        ledger = Ledger(boto3.client("dynamodb", config=CLIENT_CONFIG), table)
        return cls(
            recorder=Recorder(ledger, now),
            sns=boto3.client("sns", config=CLIENT_CONFIG),
            topic_arn=env.get(ENV_TOPIC_ARN, ""),
            platform=env.get(ENV_PLATFORM_NAME) or PlatformConfig.platform_name,
            now=now,
        )
