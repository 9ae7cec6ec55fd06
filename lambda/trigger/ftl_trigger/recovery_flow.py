"""Nothing stuck, nothing unannounced: claimed jobs that never started, and owed end effects.

* A job still ``Submitting`` after the grace is looked for by name in its backend (SageMaker,
  or the Batch queue): found, its start is recorded; not found once the claim is
  ``jobmodel.jobs.claims.CLAIM_BOUND_S`` old, it is ended as ``FailedToStart`` (usage given back
  once and token freed, by the one writer). Describe, stop, list, a replay of the token and
  the sweep all look this way (:meth:`RecoveryFlow.recover_submitting`).
* A job that owes end effects (``jobmodel.jobs.effects``: the announcement, the model
  registry's version) or job notices (``jobmodel.jobs.notifications``: started, a chain's
  next step) has them done by whichever of those holds the record next (``records.Effects``);
  the trigger's own writes that end a job do them at once (``records.Records``).
* The ``sweep`` action (door ``sweep``: an EventBridge schedule) reads the ledger's sparse
  index of jobs that need either (``names.CARE_INDEX``) and does both.

:class:`RecoveryFlow` is given the ledger (its care index), the records, the end effects, the
backends (a claim is looked for in the one it was claimed for) and the clock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ftl_ledger.job_codec import from_record
from ftl_trigger.backends import Backends
from ftl_trigger.backends.host import RECORD_PENDING
from ftl_trigger.records import Clock, Effects, Records, ledger_call
from jobmodel.contract.errors import JobModelError, UpstreamError
from jobmodel.contract.statuses import Status
from jobmodel.jobs import claims as CL
from jobmodel.jobs import effects as E
from jobmodel.jobs.attempts import current_training_job
from jobmodel.jobs.record import Change

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger

LOG = logging.getLogger("ftl.trigger")
# Jobs one sweep looks at, oldest first (the next sweep takes the rest).
SWEEP_LIMIT = 200
SWEEP_PAGE = 50


class RecoveryFlow:
    def __init__(
        self,
        *,
        ledger: Ledger,
        records: Records,
        effects: Effects,
        backends: Backends,
        clock: Clock,
    ) -> None:
        self.ledger = ledger
        self.records = records
        self.effects = effects
        self.backends = backends
        self.clock = clock

    # -------------------------------------------------------- stuck claims
    def recover_submitting(self, job: dict[str, Any]) -> dict[str, Any]:
        """A job still ``Submitting``: after the grace ask its backend by name and record the
        start it finds; at the bound, end a claim the backend does not have as
        ``FailedToStart``. A look-up that fails raises (the contract's error): nothing is
        decided on a look that did not answer."""
        age = CL.claim_age_s(from_record(job), self.clock.now())
        if age < CL.SUBMIT_GRACE_S:
            return job
        try:
            backend = self.backends.of(job)
        except UpstreamError:  # claimed for a backend this platform no longer has
            return job
        found = backend.recover(job)
        if found.get(RECORD_PENDING) or from_record(found).status != Status.SUBMITTING:
            return found  # the backend has it (recorded, or being recorded)
        if age < CL.CLAIM_BOUND_S:
            return found
        what = "AWS Batch service" if backend.name == "queue" else "SageMaker training"
        typed = from_record(job)
        ended = Change.launcher(
            Status.FAILED_TO_START,
            self.clock.ms(),
            reason=CL.unstarted_reason(current_training_job(typed), what),
            also={"error_type": UpstreamError.type},
            free_token=True,
        )
        LOG.warning("job %s: claim ended at the bound, never started", typed.job_name)
        return self.records.write(found, ended)

    def look_after(self, job: dict[str, Any]) -> dict[str, Any]:
        """One job as a look leaves it: a stale claim resolved, owed effects done."""
        if from_record(job).status == Status.SUBMITTING:
            job = self.recover_submitting(job)
        return self.effects.complete(job)

    def look_after_quietly(self, job: dict[str, Any]) -> dict[str, Any]:
        """:meth:`look_after` for list and the sweep: a look-up that failed leaves the job
        as it was (logged), for the next look."""
        try:
            return self.look_after(job)
        except JobModelError as err:
            name = from_record(job).job_name
            LOG.warning("job %s: left for the next look: %s", name, err.message)
            return job

    # ---------------------------------------------------------------- sweep
    def sweep(self) -> dict[str, Any]:
        """The ``sweep`` action: every job in the ledger's care index (claimed, or owing end
        effects), oldest first, at most :data:`SWEEP_LIMIT`, looked after."""
        counts = {"looked": 0, "started": 0, "failed_to_start": 0, "effects_done": 0, "left": 0}
        start: dict[str, Any] | None = None
        while counts["looked"] < SWEEP_LIMIT:
            page, start = ledger_call(self.ledger.care_page, SWEEP_PAGE, start)
            for job in page:
                counts["looked"] += 1
                after = self.look_after_quietly(job)
                _count(counts, job, after)
            if not start:
                break
        return counts


def _count(counts: dict[str, int], before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    was, now = from_record(before), from_record(after)
    if was.status == Status.SUBMITTING and now.status != Status.SUBMITTING:
        key = "failed_to_start" if now.status == Status.FAILED_TO_START else "started"
        counts[key] += 1
    done = len(E.owed(was) if was.owed_effects else {}) - len(E.owed(now))
    counts["effects_done"] += max(done, 0)
    if CL.needs_care(now):
        counts["left"] += 1
