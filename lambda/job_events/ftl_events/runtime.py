"""Everything the job-events function needs, built once per container, and one event's path
through it: parse, record in the ledger, then the metrics line and the announcement."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config

from ftl_events.apply import Recorder
from ftl_events.parse import Malformed, parse
from ftl_events.publish import announcement, metric_line, public_view
from ftl_trigger.ledger import Ledger
from jobmodel.names import ENV_JOB_TABLE
from jobmodel.platform import PlatformConfig

# No level of its own: Lambda sets the root logger from the function's application log
# level and writes every record as JSON with the request id (PlatformFunction).
LOG = logging.getLogger("ftl.job_events")
ENV_TOPIC_ARN = "FTL_TOPIC_ARN"
ENV_PLATFORM_NAME = "FTL_PLATFORM_NAME"  # as PlatformConfig.to_env writes it
CLIENT_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 4})


def print_line(line: str) -> None:
    """Standard output: Lambda sends it to the function's log group, where CloudWatch turns
    EMF lines into metrics (no PutMetricData call)."""
    print(line, flush=True)


@dataclass
class EventsRuntime:
    recorder: Recorder
    sns: Any
    topic_arn: str
    platform: str
    now: Callable[[], datetime]
    emit: Callable[[str], None] = print_line

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> EventsRuntime:
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

    def handle(self, event: Any) -> dict[str, Any]:
        """Record one event; the result says whether the ledger changed and what it holds."""
        try:
            observation = parse(event)
        except Malformed as err:
            event_id = event.get("id") if isinstance(event, dict) else None
            LOG.warning("dropped a malformed event %s: %s", event_id, err)
            return {"updated": False, "dropped": str(err)}
        outcome = self.recorder.record(observation)
        if outcome.applied:
            LOG.info(
                "job %s: %s -> %s (%s event %s)",
                outcome.job_name,
                outcome.old_status,
                outcome.new_status,
                observation.source,
                observation.event_id,
            )
        line = metric_line(
            outcome, platform=self.platform, timestamp_ms=int(self.now().timestamp() * 1000)
        )
        if line is not None:
            self.emit(line)
        message = announcement(outcome)
        if message is not None:
            self.sns.publish(TopicArn=self.topic_arn, **message)
        return {
            "updated": outcome.applied,
            "job_name": outcome.job_name,
            **public_view(outcome.after),
        }
