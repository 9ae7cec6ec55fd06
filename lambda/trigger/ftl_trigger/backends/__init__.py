"""How a job gets capacity: one interface for an attempt's whole life, one module per backend.

A backend owns an attempt's life on its capacity: it checks and starts a claimed attempt
(status ``Submitting``, from its rendered ``CreateTrainingJob`` request), recovers a claim
whose answer was lost, refreshes and stops a started one, catches up on what its events may
not have said, and gives a listed page's places in its queue. ``direct/`` calls
SageMaker (``CreateTrainingJob``), ``queue/`` AWS Batch (a service job); each folder holds
everything its backend needs. The launcher
chooses one, once, from the scheduler configuration (``FTL_SCHEDULER``, :func:`choose`);
submit, a token's replay, describe, stop, list, a chain's ``advance`` and the repair of a
stale ``Submitting`` use only this interface and never ask which mode a job runs in. Another
way to obtain capacity is another module with a class of this shape and one entry in
:data:`BACKENDS`.

A backend's writes go through the launcher's one writer (``ftl_ledger.writer``), reached
through the :class:`Host` the backend is given (``host.StartRecorder``). :class:`Backends`
holds the chosen backend and finds the one a job was claimed for; a sweep (issue 37) is the
tuner's (``tuner/``) whichever backend the platform chose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ftl_ledger.job_codec import from_record
from ftl_trigger.backends.queue.places import QueueSpot
from ftl_trigger.identity import Caller
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.errors import JobModelError, UpstreamError
from jobmodel.jobs.record import Change, ChangeFor

__all__ = ["BACKENDS", "Backend", "Backends", "Host", "choose"]


class Host(Protocol):
    """What a backend uses of the launcher: the runtime's clients and settings (``rt``) and
    the recording of starts (``host.StartRecorder``)."""

    rt: Any  # ftl_trigger.trigger_runtime.Runtime
    queue: Any  # ftl_trigger.backends.queue.flow.QueueFlow: queue mode's refresh and stop

    def write(self, job: dict[str, Any], change: ChangeFor) -> dict[str, Any]: ...

    def record_start(self, job: dict[str, Any], change: Change) -> dict[str, Any]: ...

    def record_failed(self, job: dict[str, Any], error: JobModelError) -> None: ...

    def describe_remote(self, name: str) -> dict[str, Any] | None: ...

    def now_ms(self) -> int: ...

    def map_error(self, exc: Exception, call: str) -> JobModelError: ...

    def ambiguous(self, exc: Exception) -> bool: ...


class Backend(Protocol):
    """Starts claimed jobs on one kind of capacity."""

    name: str

    def owns(self, job: Mapping[str, Any]) -> bool:
        """Whether ``job`` was claimed for this backend (a replay or repair of a job claimed
        under another configuration is not this backend's)."""
        ...

    def check(self, job: Mapping[str, Any], rendered: Mapping[str, Any]) -> None:
        """Refuse, before the claim is written, what this backend cannot start
        (``ValidationError``); dry runs run it too."""
        ...

    def start(self, job: dict[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
        """Start the claimed job; the record as the ledger then holds it. A start that
        failed is recorded (``FailedToStart``, token freed) and raised; one that may or may
        not have happened keeps the claim (a replay of its token finishes it)."""
        ...

    def recover(self, job: dict[str, Any]) -> dict[str, Any]:
        """A job still ``Submitting`` after the grace: ask the capacity by the job's name and,
        when it has the job, record the start; else return the record unchanged."""
        ...

    def refresh(self, job: dict[str, Any]) -> tuple[dict[str, Any], QueueSpot | None]:
        """A started, live job brought up to date from its capacity (what describe shows),
        and its place in a queue (None where it has none)."""
        ...

    def catch_up(self, job: dict[str, Any]) -> dict[str, Any]:
        """Before a chain's next attempt is looked for: what the capacity knows that its
        events may not have said yet (queue mode: Batch's held end of an attempt)."""
        ...

    def stop(self, job: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """Stop a started, live job's current attempt; the record as the ledger then has it."""
        ...

    def positions(self, items: Sequence[Mapping[str, Any]]) -> dict[str, QueueSpot]:
        """A listed page's waiting jobs' places, by Batch job ARN (empty without a queue)."""
        ...


def choose(host: Host, scheduler: SchedulerConfig) -> Backend:
    """The backend the scheduler configuration names (chosen once per container)."""
    return BACKENDS[scheduler.scheduler](host)


class Backends:
    """The platform's backend (``chosen``, once per container) and, for a claim from before
    the platform changed its scheduler, the one that owns a job."""

    def __init__(self, *, host: Host, scheduler: SchedulerConfig) -> None:
        from ftl_trigger.backends.tuner.backend import TunerBackend

        self.host = host
        self.chosen = choose(host, scheduler)
        # A sweep's trials are SageMaker's tuner's in either mode (issue 37).
        self.tuner: Backend = TunerBackend(host)

    def of(self, job: dict[str, Any]) -> Backend:
        """The backend a claimed job was claimed for (a sweep: the tuner's)."""
        if self.tuner.owns(job):
            return self.tuner
        if self.chosen.owns(job):
            return self.chosen
        for kind in BACKENDS.values():
            other = kind(self.host)
            if other.owns(job):
                return other
        raise UpstreamError(
            f"no backend starts job {from_record(job).job_name}"
        )  # pragma: no cover


def _backends() -> dict[str, Callable[[Host], Backend]]:
    from ftl_trigger.backends.direct.backend import DirectBackend
    from ftl_trigger.backends.queue.backend import QueueBackend

    return {"direct": DirectBackend, "queue": QueueBackend}


# One entry per way of getting capacity: FTL_SCHEDULER's value -> the backend's class.
BACKENDS: dict[str, Callable[[Host], Backend]] = _backends()
