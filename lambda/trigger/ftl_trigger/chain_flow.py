"""Capacity chains in the launcher (docs/API.md, "Capacity"): plan a job's steps at submit,
start its attempts one after another through the backend, stop the chain.

A chained job's attempts are started only here, each through the backend the job was claimed
for (``ftl_trigger.backend``), so both schedulers run chains: in direct mode an attempt is a
``CreateTrainingJob``, in queue mode a new Batch service job (Batch's own retries of one
attempt stay). An attempt that could not get capacity, when it fails to start or when
SageMaker ends it for want of capacity (``jobmodel.jobs.attempts``), leaves the next one pending;
:meth:`ChainFlow._advance` starts it: at once after a failed start, from describe and status,
and when the job-events function asks (the ``advance`` action, door ``chain``); a stop stops
the job between the two attempts instead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ftl_trigger.backend_queue import is_queued_job
from jobmodel import TERMINAL_STATUSES
from jobmodel.capacity import chain as C
from jobmodel.contract.errors import CapacityError, Conflict, JobModelError, ValidationError
from jobmodel.jobs import attempts as A
from jobmodel.jobs.record import Change, ChangeFor, JobRecord
from jobmodel.render import request_hash
from jobmodel.requests.submit import SubmitRequest
from jobmodel.templates.spec import TemplateSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_trigger.backend import Backend
    from ftl_trigger.dependencies import Runtime

LOG = logging.getLogger("ftl.trigger")
MAX_STARTS = C.MAX_ATTEMPTS  # starts of one request (each failed start moves one step on)


class ChainFlow:
    """Mixed into ``actions.Launcher``."""

    rt: Runtime
    ledger: Ledger
    backend: Backend

    if TYPE_CHECKING:  # pragma: no cover - provided by actions.Launcher

        def _write(self, job: dict[str, Any], change: ChangeFor) -> dict[str, Any]: ...

        def _apply(self, job: dict[str, Any], change: ChangeFor) -> tuple[dict[str, Any], bool]: ...

        def _backend_of(self, job: dict[str, Any]) -> Backend: ...

        def _ledger_call(self, fn: Any, *args: Any, **kwargs: Any) -> Any: ...

        def _now_ms(self) -> int: ...

        def _refresh_queued(self, job: dict[str, Any]) -> tuple[dict[str, Any], Any]: ...

    # ------------------------------------------------------------------ submit
    def _plan_steps(
        self, req: SubmitRequest, spec: TemplateSpec, team: str | None
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """The job's steps (each with its candidate types' prices) and why chosen steps were
        left out; ``ValidationError`` on ``capacity`` when no step is left."""
        plan = self.rt.capacity.usable(
            team=team, template=spec.name, count=req.instance_count, now=self.rt.now()
        )
        steps, skipped = C.plan_chain(
            spec,
            instance_type=req.instance_type,
            count=req.instance_count,
            chosen=req.capacity,
            spot=req.spot,
            plan=plan,
        )
        if not steps:
            raise ValidationError(
                "capacity", "no step of the capacity chain can run this job: " + "; ".join(skipped)
            )
        out = []
        for step in steps:
            entry = step.to_dict()
            entry["prices"] = {
                t: self.rt.prices.hourly(self.rt.platform.region, t)[0] for t in step.instance_types
            }
            out.append(entry)
        return out, skipped

    def _worst_case(
        self, steps: list[dict[str, Any]], req: SubmitRequest
    ) -> tuple[float | None, str | None]:
        """The chain's worst case: every step to its maximum runtime on its dearest type."""
        region = self.rt.platform.region
        return C.worst_case_usd(
            [C.Step.from_dict(s) for s in steps],
            lambda t: self.rt.prices.hourly(region, t),
            req.max_runtime_seconds,
        )

    def _attempt_request(self, job: Mapping[str, Any], attempt: int) -> dict[str, Any]:
        """Attempt ``attempt``'s ``CreateTrainingJob`` request, from the job's base request."""
        spec = self.rt.catalog[job["template"]]
        request = json.loads(job["request"])
        return C.render_step(
            json.loads(job["base_rendered"]),
            C.Step.from_dict(job["chain"][attempt - 1]),
            job_name=job["job_name"],
            attempt=attempt,
            runtime_seconds=int(request["max_runtime_seconds"]),
            kms_key_arn=self.rt.platform.kms_key_arn,
            keep_alive_seconds=spec.keep_alive_seconds,
            infra_check=spec.infra_check_on,
        )

    # ------------------------------------------------------------------- start
    def _start_chained(self, job: dict[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
        """Start the job's current attempt; while starts fail for want of capacity and steps
        are left, start the next."""
        for _ in range(MAX_STARTS):
            try:
                return self._backend_of(job).start(job, rendered)
            except CapacityError:
                fresh = self._ledger_call(self.ledger.get_job, job["job_name"])
                if fresh is None or not fresh.get("chain_pending"):
                    raise
                job, rendered, won = self._claim_pending(fresh)
                if not won:
                    return job
        raise CapacityError(f"job {job['job_name']}: no step of its chain had capacity")

    def _claim_pending(self, job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bool]:
        """Write the pending attempt's request as the job's (so a replay restarts it); the
        record, the request and whether this call claimed it (one caller starts it)."""
        rendered = self._attempt_request(job, int(job["attempt"]))
        text = json.dumps(rendered, sort_keys=True)
        digest = request_hash(rendered)

        def claim(current: JobRecord) -> Change:
            if not current.get("chain_pending") or current.get("attempt") != job["attempt"]:
                return Change()
            return A.start_change(current, text, digest, self._now_ms())

        # A claim that loses to other writers on every try (concurrent looks at the job)
        # claims nothing and leaves the attempt to them, or to the next look.
        after, won = self._apply(job, claim)
        return after, rendered, won

    def _advance(self, job: dict[str, Any]) -> dict[str, Any]:
        """Start a job's pending attempt (no-op when none is pending or another caller
        claimed it first)."""
        if not job.get("chain_pending"):
            return job
        claimed, rendered, won = self._claim_pending(job)
        if not won:
            return claimed
        try:
            return self._start_chained(claimed, rendered)
        except JobModelError as err:
            LOG.warning(
                "job %s: attempt %s did not start: %s", job["job_name"], job["attempt"], err
            )
            return self._ledger_call(self.ledger.get_job, job["job_name"]) or claimed

    def advance(self, name: str) -> dict[str, Any]:
        """The ``advance`` action (the job-events function, door ``chain``): start the job's
        pending attempt. A queue-mode chained job with none pending is first brought up to
        date as describe does: Batch's end of its attempt may be held (``jobmodel.jobs.held_end``),
        and DescribeServiceJob and DescribeTrainingJob say whether it was for want of
        capacity (the next attempt then starts) or ends the job."""
        job = self._ledger_call(self.ledger.get_job, name)
        if job is None:
            return {"job_name": name, "advanced": False}
        looked = job
        live = job["status"] not in TERMINAL_STATUSES
        if live and A.chained(job) and is_queued_job(job) and not job.get("chain_pending"):
            looked, _ = self._refresh_queued(job)
        after = self._advance(looked)
        return {
            "job_name": name,
            "advanced": after is not looked,
            "attempt": after.get("attempt"),
            "status": after.get("status"),
        }

    def _record_failed_chained(self, job: dict[str, Any], error: JobModelError) -> bool:
        """A chained attempt's failed start for want of capacity: close it and leave the
        next one pending (True), so the start moves on; False when no step is left."""
        if not A.chained(job) or not isinstance(error, CapacityError):
            return False
        change = A.failed_start_change(job, error.message, self._now_ms())
        if change is None:
            return False
        self._write(job, change)
        return True

    # -------------------------------------------------------------------- stop
    def _stop_chained(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """Stop between two attempts (the job stops here), or mark the chain stopped before
        the current attempt's stop (None: the caller stops the training job)."""
        if job.get("chain_pending"):
            return self._write(job, A.stop_pending_change(job, self._now_ms()))
        if A.starting(job):
            # Claimed, its CreateTrainingJob not answered yet: there is nothing to stop until
            # it is (as a job still Submitting).
            raise Conflict(
                f"job {job['job_name']}: attempt {job['attempt']} is still starting; retry the "
                "stop in a few seconds",
                field="job_name",
            )
        self._write(job, Change(also={"stop_requested": True}))
        return None
