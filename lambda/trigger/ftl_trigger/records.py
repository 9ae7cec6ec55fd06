"""The services every flow shares: the clock, the ledger's calls, and the one way to change a
job record (through the one writer, ``ftl_ledger.writer``, with the end effects a write that
ended the job owes done at once).

None of these is a flow: they hold no state of a flow and answer no action. ``actions.Launcher``
builds one of each per container and hands each flow the ones it uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ftl_ledger.effects import EndEffects, Performer
from ftl_ledger.job_codec import from_record
from ftl_ledger.ledger import Ledger
from ftl_ledger.writer import Contended, JobWriter
from ftl_trigger.remote import map_aws_error
from jobmodel.contract.errors import Conflict
from jobmodel.jobs import effects as E
from jobmodel.jobs.record import ChangeFor

__all__ = ["Clock", "Effects", "Records", "ledger_call"]

LOG = logging.getLogger("ftl.trigger")
R = TypeVar("R")


def same_request(token: Mapping[str, Any], fingerprint: str) -> None:
    """A client token replays only the request it was first used for: ``Conflict`` on
    ``client_token`` naming that job otherwise."""
    if token["fingerprint"] != fingerprint:
        raise Conflict(
            f"client_token {token['client_token']} was already used for a different request "
            f"(job {token['job_name']})",
            field="client_token",
        )


def ledger_call(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Call the ledger; an AWS failure is the contract's error naming the call."""
    try:
        return fn(*args, **kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise map_aws_error(exc, "DynamoDB " + getattr(fn, "__name__", "call")) from None


class Clock:
    """The container's time, read on every call (tests and the sandbox move the runtime's
    clock under a warm launcher)."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now()

    def ms(self) -> int:
        return int(self._now().timestamp() * 1000)


class Announcing(Protocol):
    """The runtime's notifications (``sns`` None: left to the sweep) and its runner of a job's
    consequences (``ftl_ledger.runtime.FunctionRuntime``)."""

    sns: Any

    def consequences(self, writer: JobWriter, *, evaluate: Performer | None) -> EndEffects: ...


class Effects:
    """What a job owes (``jobmodel.jobs.effects``: its notices, the announcement of its end,
    the model registry's version, an evaluation's results), done now."""

    def __init__(self, *, settings: Announcing, writer: JobWriter) -> None:
        self.settings = settings
        self.writer = writer
        # The ``evaluate`` effect's performer (``evaluation_flow.EvaluationFlow.perform``),
        # given once the flows are composed (``actions.Launcher``).
        self.evaluate: Performer | None = None

    def complete(self, job: dict[str, Any]) -> dict[str, Any]:
        """Do what ``job`` still owes (a failure is logged: the mark stays for the job's
        next event, look or the sweep); the record as it then is."""
        settings = self.settings
        typed = from_record(job)
        if not E.owed(typed) or settings.sns is None:
            return job
        effects = settings.consequences(self.writer, evaluate=self.evaluate)
        try:
            return effects.complete(job)
        except Exception as err:  # noqa: BLE001 - owed effects stay marked on the record
            LOG.warning("job %s: end effects left owed: %s", typed.job_name, err)
            return job


class Records:
    """Job records read and changed: every change through the one writer."""

    def __init__(self, *, ledger: Ledger, writer: JobWriter, effects: Effects) -> None:
        self.ledger = ledger
        self.writer = writer
        self.effects = effects

    def get(self, name: str) -> dict[str, Any] | None:
        job: dict[str, Any] | None = ledger_call(self.ledger.get_job, name)
        return job

    def write(self, job: dict[str, Any], change: ChangeFor) -> dict[str, Any]:
        """Apply ``change`` through the one writer; the record as the ledger now has it (as
        another writer left it when the job kept changing)."""
        return self.apply(job, change)[0]

    def apply(self, job: dict[str, Any], change: ChangeFor) -> tuple[dict[str, Any], bool]:
        """:meth:`write`, and whether this change was written (False when it was not
        needed, or the job kept changing under other writers)."""
        try:
            done = ledger_call(self.writer.apply, job, change)
        except Contended:
            name = str(from_record(job).job_name)
            LOG.warning("job %s kept changing; left as another writer left it", name)
            fresh = self.get(name)
            return (fresh if fresh is not None else job), False
        # A write that ended the job owes its end effects: done now (or left owed, logged).
        return self.effects.complete(dict(done.after)), done.applied
