"""Doing a job's owed end effects (``jobmodel.jobs.effects``): both functions run them the same way.

:class:`EndEffects` holds one performer per effect (the announcement: SNS ``Publish`` with the
effect's deduplication id; the registration: ``ftl_ledger.registry``), and one for every job
notice owed the same way (:data:`NOTICE`: started, a capacity chain's next step;
``ftl_ledger.notify``). A performer may answer attributes to record on the job: they are
written with the effect's done mark (a map merged into the one the record holds then).
:meth:`EndEffects.complete` does every effect the record still owes, in order, and records
each one done through the one writer as soon as it succeeded, so a failure leaves exactly the
effects not yet done owed, for the next holder of the record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ftl_ledger.job_codec import from_record
from ftl_ledger.writer import JobWriter
from jobmodel.jobs import effects as E
from jobmodel.jobs.record import REVISION, Change, JobRecord

__all__ = ["NOTICE", "EndEffects", "Performer"]

LOG = logging.getLogger("ftl.ledger")

# Performs one effect for a job as read, given the effect's deduplication id; raises on failure.
# What it answers (a mapping, or None) is recorded on the job with the effect's done mark.
Performer = Callable[[Mapping[str, Any], str], Mapping[str, Any] | None]
# A function that cannot perform an effect names it with None: it is left owed for the holder
# that can (the ``evaluate`` effect: the trigger only; the job-events function asks it).
# The performers' key of every owed job notice (``ftl_ledger.notify``).
NOTICE = E.NOTICE


class EndEffects:
    """Performers by the names the table gives them (``jobmodel.jobs.effects.CONSEQUENCES``:
    ``ftl_ledger.consequences.performers`` builds them); a row whose performer is missing is
    refused here, so a new row cannot be forgotten by either function."""

    def __init__(self, writer: JobWriter, performers: Mapping[str, Performer | None]) -> None:
        names = [c.performer for c in E.CONSEQUENCES if c.family in (E.END, E.NOTICE)]
        missing = [n for n in names if n not in performers]
        if missing:
            raise ValueError(f"no performer {missing[0]!r} for a consequence of the table")
        self.writer = writer
        self.performers = dict(performers)

    def complete(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """Do every effect ``job`` still owes; the record as it is after them. The first
        failure (a performer's, or the ledger's when recording one done) is raised, with that
        effect and the ones after it still owed."""
        current: dict[str, Any] = dict(job)
        typed = from_record(current)
        for effect, dedup in E.owed(typed).items():
            # Its row's performer (every job notice's is NOTICE).
            performer = self.performers[E.performer_of(effect)]
            if performer is None:  # another holder's: left owed, the later ones still done
                continue
            learned = dict(performer(current, dedup) or {})

            def done(record: JobRecord, effect: str = effect, learned: Any = learned) -> Change:
                mark = E.done_change(from_record(record), effect)
                return Change(also={**_onto(record, learned), **mark})

            applied = self.writer.apply(current, done)  # type: ignore[arg-type]
            current = dict(applied.after)
            if applied.applied:  # the write added one: the next effect's write expects it
                current[REVISION] = int(from_record(applied.before).revision or 0) + 1
            LOG.info(
                "job %s: end effect %s done (%s)", from_record(current).job_name, effect, dedup
            )
        return current


def _onto(record: Mapping[str, Any], learned: Mapping[str, Any]) -> dict[str, Any]:
    """What a performer learned, laid onto the record as the writer reads it: a map (an
    evaluated job's ``evaluation``) keeps the entries another writer added since the performer
    read the job (the evaluation's verdict, when its results came in before ``evaluate`` was
    marked done again after a failed write)."""
    out = dict(learned)
    for key, value in learned.items():
        current = record.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = {**current, **value}
    return out
