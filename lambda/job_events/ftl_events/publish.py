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

from ftl_ledger.effects import Performer
from ftl_ledger.evaluation import end_effects
from ftl_ledger.registry import registrar
from jobmodel.jobs import effects as E

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_events.dependencies import Runtime


def complete_effects(runtime: Runtime, job: Mapping[str, Any]) -> dict[str, Any]:
    """Do what ``job`` (as the event's write left it) still owes; the record after."""
    if not E.owed(job):
        return dict(job)

    def sagemaker() -> Any:  # the runtime's client when called (tests replace it)
        return runtime.sagemaker

    registry = sagemaker if runtime.sagemaker is not None else None
    register = registrar(registry, runtime.platform)
    performers: dict[str, Performer | None] = {
        **runtime.notifier().performers(),
        E.REGISTER: register,
        E.EVALUATE: None,  # the trigger's (it starts jobs): asked by the handler
    }
    effects = end_effects(
        runtime.recorder.writer,
        performers,
        s3=runtime.s3_client,
        sagemaker=registry,
        platform=runtime.platform,
    )
    return effects.complete(job)
