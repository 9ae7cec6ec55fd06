"""The typed base both functions' runtimes share (issue 35): the AWS clients' retry settings,
and what the consequences of a job's change need (``ftl_ledger.consequences.Services``).

``ftl_trigger.trigger_runtime.Runtime`` and ``ftl_events.events_runtime.Runtime`` each extend
:class:`FunctionRuntime`: they hold the clients it names (``sns``, ``events``, ``sagemaker``,
``s3``), the topic, the notification settings and how they make a client; it gives both the
same notifier, S3 client on first use, registry client and performer factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.config import Config

from ftl_ledger.consequences import budget_watch, runner
from ftl_ledger.effects import EndEffects, Performer
from ftl_ledger.ledger import Ledger
from ftl_ledger.notify import BudgetWatch, Notifier, NotifySettings
from ftl_ledger.writer import JobWriter

__all__ = ["CLIENT_CONFIGS", "FunctionRuntime"]

# Explicit retries (boto3's default mode is still "legacy"): standard mode retries throttling
# and 5xx with backoff, and does not retry ResourceLimitExceeded. One setting per service, for
# both functions.
_NOTIFY = Config(
    retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=3, read_timeout=5
)
CLIENT_CONFIGS: dict[str, Config] = {
    "sagemaker": Config(
        retries={"mode": "standard", "total_max_attempts": 5}, connect_timeout=5, read_timeout=20
    ),
    "dynamodb": Config(
        retries={"mode": "standard", "total_max_attempts": 4}, connect_timeout=3, read_timeout=10
    ),
    # Queue mode only. Every SubmitServiceJob carries a clientToken, so a retried submit can
    # never queue a second job.
    "batch": Config(
        retries={"mode": "standard", "total_max_attempts": 4}, connect_timeout=5, read_timeout=20
    ),
    # Read at submit, cached per container; a failed read skips the check, so fail fast.
    "service-quotas": Config(
        retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=2, read_timeout=5
    ),
    "sns": _NOTIFY,
    "events": _NOTIFY,
    "s3": _NOTIFY,
    "lambda": _NOTIFY,
}


class FunctionRuntime:
    """What both functions' runtimes have and do for a job's consequences."""

    sns: Any
    events: Any
    sagemaker: Any
    s3: Any
    topic_arn: str
    notify: NotifySettings

    @property
    def platform_name(self) -> str:
        raise NotImplementedError

    def make_client(self, service: str) -> Any:
        """A client of ``service`` with its retry settings (:data:`CLIENT_CONFIGS`)."""
        raise NotImplementedError

    def has_registry(self) -> bool:
        """Whether this deployment registers Completed jobs' models."""
        raise NotImplementedError

    def notifier(self) -> Notifier:
        """The notifications' sender, with the runtime's clients as they are now."""
        return Notifier(self.sns, self.events, self.topic_arn, self.notify)

    def s3_client(self) -> Any:
        """The S3 client of an evaluation's results, made on first use."""
        if self.s3 is None:
            self.s3 = self.make_client("s3")
        return self.s3

    def registry(self) -> Callable[[], Any] | None:
        """The model registry's SageMaker client, read when called (tests replace it); None
        when the deployment has no registry."""
        if not self.has_registry():
            return None
        return lambda: self.sagemaker

    def consequences(self, writer: JobWriter, *, evaluate: Performer | None) -> EndEffects:
        """The runner of what a job owes (``ftl_ledger.consequences``)."""
        return runner(self, writer, evaluate=evaluate)

    def budget_watch(self, ledger: Ledger, month: Callable[[], str]) -> BudgetWatch:
        """The one writer's spend hook: the budget thresholds (``ftl_ledger.consequences``)."""
        return budget_watch(self, ledger, month)
