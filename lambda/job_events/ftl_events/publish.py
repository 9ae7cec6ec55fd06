"""What a recorded observation tells the world: a job's end effects (``jobmodel.jobs.effects``),
the announcement on SNS first (the fleet's metric lines are printed by the one writer,
``ftl_ledger.writer``).

The write that ended the job marked them owed; any event of the job, a replay or a retry of
the one that failed included, does what is still owed, with each effect's stable
deduplication id, so an end is announced at least once and a receiver drops a repeat by the
id. A job that owes nothing announces nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ftl_ledger.effects import EndEffects, announcer
from jobmodel.jobs import effects as E

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_events.dependencies import Runtime


def complete_effects(runtime: Runtime, job: Mapping[str, Any]) -> dict[str, Any]:
    """Do what ``job`` (as the event's write left it) still owes; the record after."""
    if not E.owed(job):
        return dict(job)

    def publish(**message: Any) -> Any:  # the runtime's client when called (tests replace it)
        return runtime.sns.publish(TopicArn=runtime.topic_arn, **message)

    return EndEffects(runtime.recorder.writer, {E.ANNOUNCE: announcer(publish)}).complete(job)
