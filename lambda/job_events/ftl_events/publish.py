"""What a recorded observation tells the world: the job notices and end effects its record
owes (``jobmodel.jobs.effects``, ``jobmodel.jobs.notifications``): started, a chain's next
step, the end's announcement, each on SNS and EventBridge (``ftl_ledger.notify``), then a
Completed job's model version in the registry (``ftl_ledger.registry``), and an evaluation
job's results on the evaluated job's version and record (``ftl_ledger.evaluation``). The
fleet's metric lines and the budget notifications are the one writer's (``ftl_ledger.writer``).

The write that ended the job marked them owed; any event of the job, a replay or a retry of
the one that failed included, does what is still owed, with each effect's stable
deduplication id, so an end is announced at least once and a receiver drops a repeat by the
id. A job that owes nothing announces nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ftl_ledger.job_codec import from_record
from jobmodel.jobs import effects as E

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_events.events_runtime import Runtime


def complete_effects(runtime: Runtime, job: Mapping[str, Any]) -> dict[str, Any]:
    """Do what ``job`` (as the event's write left it) still owes; the record after. The
    ``evaluate`` effect is the trigger's (it starts jobs): left owed, the handler asks it."""
    if not E.owed(from_record(job)):
        return dict(job)
    return runtime.consequences(runtime.recorder.writer, evaluate=None).complete(job)
