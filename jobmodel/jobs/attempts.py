"""A chained job's attempts in the ledger: how observations of them change the one job record.

Standard library only. A job whose template has a capacity chain (``jobmodel.capacity.chain``)
keeps, besides the contract's fields, ``chain`` (its steps, with each candidate type's price),
``attempt`` (the current one, 1-based), ``attempts`` (one entry per attempt: training job,
capacity kind, instance type and count, start, end, status, reason, billable seconds, cost)
and ``prior_cost_usd`` (what the ended attempts cost, each charged to the team's month as it
ended). The top-level fields (``instance_type``, ``price_usd_per_hour``, ``training_job_name``,
SageMaker's view) are the current attempt's.

:func:`change_for` turns an observation into the :class:`~jobmodel.jobs.record.Change` the one
writer applies: an older attempt's late word updates only its entry; the current attempt's end for
want of capacity, with a step left and no stop asked, closes the attempt and marks the next
one pending (``chain_pending``) instead of ending the job; any other observation is merged as
for every job, and its entry follows.

The functions read the typed record (:class:`~jobmodel.jobs.job.Job`, its
:class:`~jobmodel.jobs.job.Attempt` entries); the ``attempts`` they write are plain entries, each
without its unset fields, as the ledger's codec writes an attempt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..capacity.chain import attempt_name, capacity_failure, ledger_job_of_attempt
from ..contract.statuses import TERMINAL_STATUSES, Status
from ..money.pricing import cost_usd
from .batch_end_hold import after_held_end, hold, unexplained_batch_end
from .job import Attempt, Job
from .queue_state import batch_created
from .record import Change
from .training_state import SAGEMAKER_GROUP
from .view import current_training_job

__all__ = [
    "ATTEMPT_HINT",
    "NEXT_ATTEMPT",
    "chained",
    "change_for",
    "current_training_job",
    "failed_start_change",
    "first_attempt",
    "next_attempt",
    "start_change",
    "starting",
    "stop_pending_change",
]

# An observation's key (never written): the attempt it is about, when its reader knows.
ATTEMPT_HINT = "attempt"
NEXT_ATTEMPT = "NextAttempt"  # secondary status while the next attempt is about to start


def chained(job: Job) -> bool:
    return bool(job.chain)


def _price(step_dict: Mapping[str, Any], itype: str) -> float | None:
    price = (step_dict.get("prices") or {}).get(itype)
    return None if price is None else float(price)


def first_attempt(step: Mapping[str, Any], job_name: str) -> dict[str, Any]:
    """Attempt 1's entry, as the claim writes it."""
    return _plain(_entry(step, 1, job_name))


def _entry(step: Mapping[str, Any], attempt: int, job_name: str) -> Attempt:
    return dataclasses.replace(
        Attempt.first(step, job_name),
        attempt=attempt,
        training_job_name=attempt_name(job_name, attempt),
    )


def _plain(entry: Attempt) -> dict[str, Any]:
    """An attempt as the record keeps it: its set fields (the codec's form)."""
    out = {f.name: getattr(entry, f.name) for f in dataclasses.fields(entry)}
    out["instance_types"] = list(entry.instance_types)
    return {k: v for k, v in out.items() if v is not None}


def _written(entries: Sequence[Attempt]) -> list[dict[str, Any]]:
    return [_plain(e) for e in entries]


def _find(entries: Sequence[Attempt], attempt: int | None) -> Attempt | None:
    return next((e for e in entries if e.attempt == attempt), None)


def _replace(entries: Sequence[Attempt], attempt: int, **values: Any) -> list[Attempt]:
    changes = {k: v for k, v in values.items() if v is not None}
    return [dataclasses.replace(e, **changes) if e.attempt == attempt else e for e in entries]


def _ended(update: Mapping[str, Any], entry: Attempt, price: float | None) -> dict[str, Any]:
    billable = update.get("billable_seconds")
    out: dict[str, Any] = {
        "status": update.get("status"),
        "ended_ms": update.get("status_observed_ms"),
        "billable_seconds": billable,
        "cost_usd": cost_usd(price, int(entry.instance_count), billable),
    }
    if update.get("failure_reason"):
        out["reason"] = str(update["failure_reason"])[:256]
    return out


def change_for(job: Job, update: Mapping[str, Any], *, hold_batch_end: bool = False) -> Change:
    """The change an observation (SageMaker's or Batch's, in ledger terms) makes to a chained
    job (module docstring); a plain observation for an unchained one. ``hold_batch_end``
    (the job-events function): Batch's end of an attempt that nothing yet says why is held
    (``jobmodel.jobs.batch_end_hold``), not taken as the job's end."""
    if not job.chain:
        return Change(observation=update)
    chain = job.chain
    attempt = int(job.attempt or 1)
    entries = list(job.attempts or ())
    seen = _attempt_of(update)
    if seen is not None and seen != attempt:
        return _late(job, entries, seen, update)
    if job.chain_pending:
        return Change()  # between attempts: the next one's start writes what comes next
    current = _find(entries, attempt)
    step = chain[attempt - 1]
    selected = update.get("selected_instance_type")
    itype = selected or (current.instance_type if current else None) or job.instance_type
    price = _price(step, str(itype))
    also: dict[str, Any] = {}
    if selected and selected != job.instance_type:
        also.update(instance_type=selected, price_usd_per_hour=price)
        entries = _replace(entries, attempt, instance_type=selected)
    update = after_held_end(job, update)
    status = update.get("status")
    if status in TERMINAL_STATUSES and current is not None:
        update = _with_sagemakers_view(job, update)
        why = capacity_failure(update) or capacity_failure(_recorded_view(job, update))
        stopping = job.stop_requested or job.status == str(Status.STOPPING)
        steps_left = attempt < len(chain) and not stopping
        if why and steps_left:
            return next_attempt(job, entries, update, price, why)
        if hold_batch_end and steps_left and unexplained_batch_end(job, update):
            return hold(update)
        entries = _replace(entries, attempt, **_ended(update, current, price))
    elif status == str(Status.IN_PROGRESS) and current and current.status != "InProgress":
        # SageMaker's first word that it runs; the claim's time stays for an attempt never
        # seen running.
        started = update.get("status_observed_ms") or current.started_ms
        entries = _replace(entries, attempt, status="InProgress", started_ms=started)
    if entries != list(job.attempts or ()):
        also["attempts"] = _written(entries)
    return Change(observation=update, also=also)


def _with_sagemakers_view(job: Job, update: Mapping[str, Any]) -> dict[str, Any]:
    """Batch's word on an attempt's end (queue mode) carries no billable time: the record's,
    from SageMaker's events of this attempt's training job, is the attempt's (the ended
    attempt's view is cleared when the next one is marked)."""
    out = dict(update)
    if out.get("billable_seconds") is None and update.get("status_source") == "batch":
        out["billable_seconds"] = job.billable_seconds
    return out


def _recorded_view(job: Job, update: Mapping[str, Any]) -> dict[str, Any]:
    """Batch's end with what SageMaker's earlier events of the attempt said (a spot wait that
    ran out, an insufficient-capacity failure Batch reported without its reason); Batch's end
    alone when the update is not Batch's."""
    if update.get("status_source") != "batch":
        return dict(update)
    view = {"secondary_status": job.secondary_status, "failure_reason": job.failure_reason}
    return {**update, **{k: v for k, v in view.items() if v}}


def _attempt_of(update: Mapping[str, Any]) -> int | None:
    """The attempt an observation is about: the ``attempt`` its reader found (queue mode: the
    service job's name or the training job's ``ftl:job-name`` tag, as Batch names its
    training jobs ``AWSBatch<name><hex>``, cut to fit), else the training job's name; None
    when neither says."""
    hint = update.get(ATTEMPT_HINT)
    if isinstance(hint, int) and not isinstance(hint, bool):
        return hint
    named = update.get("training_job_name")
    if not named or batch_created(str(named)):
        return None
    return ledger_job_of_attempt(str(named))[1]


def _late(job: Job, entries: list[Attempt], seen: int, update: Mapping[str, Any]) -> Change:
    """An older attempt's word (an event that arrived after the chain moved on): its entry
    takes the billable time when it had none; the job's status is not touched."""
    entry = _find(entries, seen)
    if entry is None or update.get("status") not in TERMINAL_STATUSES:
        return Change()
    if entry.billable_seconds is not None or update.get("billable_seconds") is None:
        return Change()
    price = _price((job.chain or ())[seen - 1], str(entry.instance_type))
    ended = _ended(update, entry, price)
    ended.pop("status")
    cost = ended.get("cost_usd") or 0.0
    return Change(
        also={
            "attempts": _written(_replace(entries, seen, **ended)),
            "prior_cost_usd": round(float(job.prior_cost_usd or 0) + cost, 4),
        },
        spend=cost or None,
    )


def next_attempt(
    job: Job,
    entries: list[Attempt],
    update: Mapping[str, Any],
    price: float | None,
    reason: str,
) -> Change:
    """Close the current attempt (for want of capacity) and mark the next one pending: the
    job stays in progress, SageMaker's view of the old attempt is cleared, its cost is
    charged to the team's month with this write."""
    attempt = int(job.attempt or 1)
    current = next(e for e in entries if e.attempt == attempt)
    ended = _ended(update, current, price)
    ended["reason"] = reason
    entries = _replace(entries, attempt, **ended)
    step = (job.chain or ())[attempt]
    nxt = _entry(step, attempt + 1, str(job.job_name))
    entries.append(nxt)
    cost = ended.get("cost_usd") or 0.0
    also: dict[str, Any] = {
        "attempts": _written(entries),
        "attempt": attempt + 1,
        "chain_pending": True,
        "prior_cost_usd": round(float(job.prior_cost_usd or 0) + cost, 4),
        "instance_type": nxt.instance_type,
        "price_usd_per_hour": _price(step, nxt.instance_type),
        "training_job_name": nxt.training_job_name,
        "training_job_arn": None,
        "job_arn": None,
        "secondary_status": NEXT_ATTEMPT,
        "failure_reason": None,
        "batch_job_id": None,
        "batch_job_arn": None,
        "batch_status": None,
        "batch_status_reason": None,
    }
    for key in SAGEMAKER_GROUP:
        if key != "secondary_status":
            also[key] = None
    also["sagemaker_observed_ms"] = None
    return Change(also=also, spend=cost or None)


def start_change(job: Job, rendered_json: str, rendered_hash: str, now_ms: int) -> Change:
    """Claim the pending attempt's start (written before the backend is asked): the
    attempt's request becomes the job's ``rendered`` (a replay restarts this attempt); the
    attempt starts now (an attempt that ends before anyone sees it run keeps this start)."""
    attempt = int(job.attempt or 1)
    entries = _replace(job.attempts or (), attempt, status="Starting", started_ms=now_ms)
    return Change(
        also={
            "chain_pending": None,
            "rendered": rendered_json,
            "rendered_hash": rendered_hash,
            "attempts": _written(entries),
        }
    )


def starting(job: Job) -> bool:
    """The current attempt's start is claimed and not yet recorded (no training job, and in
    queue mode no service job, known)."""
    entry = _find(job.attempts or (), job.attempt)
    started = entry is not None and entry.status == "Starting"
    return started and not job.job_arn and not job.batch_job_id


def stop_pending_change(job: Job, now_ms: int) -> Change:
    """A stop between two attempts: no training job runs, so the job is stopped here and the
    pending attempt never starts."""
    attempt = int(job.attempt or 1)
    entries = _replace(job.attempts or (), attempt, status="Stopped", reason="stopped")
    return Change.launcher(
        Status.STOPPED,
        now_ms,
        also={
            "attempts": _written(entries),
            "chain_pending": None,
            "stop_requested": True,
            "cost_usd": job.prior_cost_usd,
        },
    )


def failed_start_change(job: Job, reason: str, now_ms: int) -> Change | None:
    """The pending attempt could not start for want of capacity: close it and move on when a
    step is left (None: the job's start failed as any start does)."""
    attempt = int(job.attempt or 1)
    if attempt >= len(job.chain or ()) or job.stop_requested:
        return None
    update = {"status": "Failed", "status_observed_ms": now_ms, "failure_reason": reason}
    return next_attempt(job, list(job.attempts or ()), update, None, reason)
