"""A job's progress as ``ftl status --wait`` follows it, and the fields read from SageMaker's
description (final metrics, spot interruptions, timestamps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobmodel.contract import TERMINAL_STATUSES

SUCCEEDED = "Completed"
INTERRUPTED = "Interrupted"


@dataclass
class Progress:
    """What a watcher knows about a job so far; passed to ``on_update`` after each poll."""

    job: dict[str, Any]
    started_at: datetime
    interruptions: int = 0
    polls: int = 0
    changed: bool = True
    history: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.job.get("job_name", ""))

    @property
    def status(self) -> str:
        return str(self.job.get("status") or "Unknown")

    @property
    def secondary_status(self) -> str | None:
        return self.job.get("secondary_status")

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def succeeded(self) -> bool:
        return self.status == SUCCEEDED

    def elapsed(self, now: datetime | None = None) -> float:
        """Seconds since the job was created (or since watching began when that is unknown)."""
        now = now or datetime.now(UTC)
        return max(0.0, (now - self.started_at).total_seconds())

    def observe(self, job: dict[str, Any]) -> None:
        """Take one poll's describe result; count transitions into ``Interrupted``."""
        before = (self.status, self.secondary_status) if self.polls else None
        self.job = job
        self.polls += 1
        now = (self.status, self.secondary_status)
        self.changed = now != before
        if self.changed:
            if now[1] == INTERRUPTED and (before is None or before[1] != INTERRUPTED):
                self.interruptions += 1
            self.history.append(now)


def metrics_of(described: dict[str, Any] | None) -> dict[str, float]:
    """``FinalMetricDataList`` of a DescribeTrainingJob response as ``{name: value}``."""
    return {
        m["MetricName"]: float(m["Value"])
        for m in (described or {}).get("FinalMetricDataList", [])
        if "MetricName" in m and "Value" in m
    }


def interruptions_of(described: dict[str, Any] | None) -> int:
    """How many times SageMaker's ``SecondaryStatusTransitions`` entered ``Interrupted``."""
    transitions = (described or {}).get("SecondaryStatusTransitions", [])
    count, previous = 0, None
    for t in transitions:
        status = t.get("Status")
        if status == INTERRUPTED and previous != INTERRUPTED:
            count += 1
        previous = status
    return count


def parse_time(text: Any) -> datetime | None:
    """An ISO-8601 timestamp (``...Z`` allowed) as an aware datetime, or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
