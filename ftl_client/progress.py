"""A job's progress as ``ftl status --wait`` follows it, from the launcher's ``describe``
(which carries the job's final metrics and spot interruptions once SageMaker reports them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobmodel.contract.statuses import TERMINAL_STATUSES
from jobmodel.jobs.training_state import count_interruptions

SUCCEEDED = "Completed"


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
        """Take one poll's describe result.

        Spot interruptions: the launcher's count (``spot_interruptions``, from SageMaker's
        secondary status transitions) or the entries into ``Interrupted`` seen by polling,
        whichever is larger; both counted by the one rule in ``jobmodel.jobs.training_state``.
        """
        before = self._state() if self.polls else None
        self.job = job
        self.polls += 1
        now = self._state()
        self.changed = now != before
        if not self.history or self.history[-1] != now[:2]:
            self.history.append(now[:2])
        seen = count_interruptions(secondary for _, secondary in self.history)
        self.interruptions = max(self.interruptions, seen, int(job.get("spot_interruptions") or 0))

    def _state(self) -> tuple[str, str | None, str]:
        """What a change is: status, secondary status and, for a sweep (issue 37), its trial
        counts and best trial, so that a new finished trial is a line of its own."""
        sweep = self.job.get("sweep") if self.job.get("kind") == "sweep" else None
        seen = ""
        if isinstance(sweep, dict):
            best = sweep.get("best")
            trial = best.get("trial") if isinstance(best, dict) else None
            seen = json.dumps([sweep.get("trials"), trial], sort_keys=True, default=str)
        return (self.status, self.secondary_status, seen)

    @property
    def final_metrics(self) -> dict[str, float]:
        """The job's final metrics as the launcher reports them (empty until it ends)."""
        return dict(self.job.get("final_metrics") or {})


def parse_time(text: Any) -> datetime | None:
    """An ISO-8601 timestamp (``...Z`` allowed) as an aware datetime, or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
