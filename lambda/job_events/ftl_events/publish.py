"""What a recorded observation tells the world: the job notices and end effects its record
owes (``jobmodel.effects``, ``jobmodel.notifications``): started, a chain's next step, the
end's announcement, each on SNS and EventBridge (``ftl_ledger.notify``). The fleet's metric
lines and the budget notifications are the one writer's (``ftl_ledger.writer``).

The write that ended the job marked them owed; any event of the job, a replay or a retry of
the one that failed included, does what is still owed, with each effect's stable
deduplication id, so an end is announced at least once and a receiver drops a repeat by the
id. A job that owes nothing announces nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ftl_ledger.effects import EndEffects
from jobmodel import effects as E

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_events.dependencies import Runtime


def complete_effects(runtime: Runtime, job: Mapping[str, Any]) -> dict[str, Any]:
    """Do what ``job`` (as the event's write left it) still owes; the record after."""
    if not E.owed(job):
        return dict(job)

    return EndEffects(runtime.recorder.writer, runtime.notifier().performers()).complete(job)
