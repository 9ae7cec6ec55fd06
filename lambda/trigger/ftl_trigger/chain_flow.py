"""Capacity chains in the launcher (docs/API.md, "Capacity"): start a job's attempts one
after another through the backend, stop the chain (its steps are planned at admission,
``jobmodel.admission``).

A chained job's attempts are started only here, each through the backend the job was claimed
for (``ftl_trigger.backends``), so both schedulers run chains: in direct mode an attempt is a
``CreateTrainingJob``, in queue mode a new Batch service job (Batch's own retries of one
attempt stay). An attempt that could not get capacity, when it fails to start or when
SageMaker ends it for want of capacity (``jobmodel.jobs.attempts``), leaves the next one pending;
:meth:`ChainFlow.advance_pending` starts it: at once after a failed start, from describe and
status, and when the job-events function asks (the ``advance`` action, door ``chain``); a stop
stops the job between the two attempts instead. A failed start's move to the next step is
recorded by the backends' host (``backends.host.StartRecorder``).

:class:`ChainFlow` is given what rendering reads of the runtime (``settings``), the
records, the clock, the backends, and the queue flow (a queue-mode attempt is looked at as
describe does before the next one starts).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from ftl_ledger.job_codec import from_record
from ftl_trigger.attempt_request import record_attempt_request
from ftl_trigger.backends import Backends
from ftl_trigger.records import Clock, Records
from jobmodel.admission import RenderSettings
from jobmodel.capacity import chain as C
from jobmodel.contract.errors import CapacityError, Conflict, JobModelError
from jobmodel.jobs import attempts as A
from jobmodel.jobs.record import Change, JobRecord
from jobmodel.render import request_hash

LOG = logging.getLogger("ftl.trigger")
MAX_STARTS = C.MAX_ATTEMPTS  # starts of one request (each failed start moves one step on)


class ChainFlow:
    def __init__(
        self,
        *,
        settings: RenderSettings,
        records: Records,
        clock: Clock,
        backends: Backends,
    ) -> None:
        self.settings = settings
        self.records = records
        self.clock = clock
        self.backends = backends

    # ------------------------------------------------------------------- start
    def start_chained(self, job: dict[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
        """Start the job's current attempt; while starts fail for want of capacity and steps
        are left, start the next."""
        name = str(from_record(job).job_name)
        for _ in range(MAX_STARTS):
            try:
                return self.backends.of(job).start(job, rendered)
            except CapacityError:
                fresh = self.records.get(name)
                if fresh is None or not from_record(fresh).chain_pending:
                    raise
                job, rendered, won = self._claim_pending(fresh)
                if not won:
                    return job
        raise CapacityError(f"job {name}: no step of its chain had capacity")

    def _claim_pending(self, job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bool]:
        """Write the pending attempt's request as the job's (so a replay restarts it); the
        record, the request and whether this call claimed it (one caller starts it)."""
        attempt = from_record(job).attempt
        rendered = record_attempt_request(self.settings, job, int(attempt or 1))
        text = json.dumps(rendered, sort_keys=True)
        digest = request_hash(rendered)
        clock = self.clock

        def claim(record: JobRecord) -> Change:
            current = from_record(record)
            if not current.chain_pending or current.attempt != attempt:
                return Change()
            return A.start_change(current, text, digest, clock.ms())

        # A claim that loses to other writers on every try (concurrent looks at the job)
        # claims nothing and leaves the attempt to them, or to the next look.
        after, won = self.records.apply(job, claim)
        return after, rendered, won

    def advance_pending(self, job: dict[str, Any]) -> dict[str, Any]:
        """Start a job's pending attempt (no-op when none is pending or another caller
        claimed it first)."""
        typed = from_record(job)
        if not typed.chain_pending:
            return job
        claimed, rendered, won = self._claim_pending(job)
        if not won:
            return claimed
        try:
            return self.start_chained(claimed, rendered)
        except JobModelError as err:
            name = str(typed.job_name)
            LOG.warning("job %s: attempt %s did not start: %s", name, typed.attempt, err)
            return self.records.get(name) or claimed

    def advance(self, name: str) -> dict[str, Any]:
        """The ``advance`` action (the job-events function, door ``chain``): start the job's
        pending attempt, after the job's backend caught up on what its events may not have said
        (``backend.Backend.catch_up``: queue mode's held end of an attempt)."""
        job = self.records.get(name)
        if job is None:
            return {"job_name": name, "advanced": False}
        looked = self.backends.of(job).catch_up(job)
        after = self.advance_pending(looked)
        typed = from_record(after)
        return {
            "job_name": name,
            "advanced": after is not looked,
            "attempt": typed.attempt,
            "status": typed.status,
        }

    # -------------------------------------------------------------------- stop
    def stop_chained(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """Stop between two attempts (the job stops here), or mark the chain stopped before
        the current attempt's stop (None: the caller stops the training job)."""
        typed = from_record(job)
        if typed.chain_pending:
            return self.records.write(job, A.stop_pending_change(typed, self.clock.ms()))
        if A.starting(typed):
            # Claimed, its CreateTrainingJob not answered yet: there is nothing to stop until
            # it is (as a job still Submitting).
            raise Conflict(
                f"job {typed.job_name}: attempt {typed.attempt} is still starting; retry the "
                "stop in a few seconds",
                field="job_name",
            )
        self.records.write(job, Change(also={"stop_requested": True}))
        return None
