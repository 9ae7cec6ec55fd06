"""A job's end effects: what must happen once a job has ended, owed durably on its record.

Standard library only. The write that makes a job's status terminal (``record.plan``) also
writes the mark :data:`OWED`: a map from each end effect the job owes to its stable
deduplication id. An effect is done by whoever next holds the record (the job-events
function for any later event, the trigger's describe, stop, list, a replay of the token, or
the scheduled sweep): it performs the effect with the id, then removes that effect from the
mark with the one writer (:func:`done_change`). A failure between the two leaves the mark, so
the next holder does it again: at least once, and a receiver drops a repeat by the id, which
never changes for a job and an effect.

Adding an effect (the model registry, issue 27) is one entry in :data:`END_EFFECTS` and one
performer where the effects are run (``ftl_ledger.effects``); the mark, its ids and its
completion stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..contract import names
from ..contract.statuses import TERMINAL_STATUSES, Status
from . import notifications as N
from .job import PUBLIC_FIELDS as JOB_PUBLIC_FIELDS

__all__ = [
    "ANNOUNCE",
    "DEDUP_ATTRIBUTE",
    "EVALUATE",
    "REGISTER",
    "RESULTS",
    "END_EFFECTS",
    "OWED",
    "PUBLIC_FIELDS",
    "dedup_id",
    "done_change",
    "owed",
    "owed_at_end",
    "public_view",
]

OWED = "owed_effects"  # the job attribute: {effect name: dedup id}
ANNOUNCE = "announce"  # the SNS announcement of the job's end
# a Completed job's model as a version in the registry (jobmodel.after_training.registry)
REGISTER = "register"
# An evaluation job's end (``evaluation.results``, issue 36): its results read, the evaluated
# job's version gated and updated, the evaluated job's record given them.
RESULTS = "evaluation_results"
# A Completed job's evaluation job claimed and started (issue 36): owed only by a job whose
# record names an evaluation policy (set at its claim), and only when it Completed; after the
# registration, whose version then names the evaluation's metrics JSON. Performed by the
# trigger only (``ftl_trigger.evaluation_flow``); the job-events function leaves it owed.
EVALUATE = names.EVALUATE_EFFECT
# Every effect a job's end may owe, in the order they are done.
END_EFFECTS: tuple[str, ...] = (ANNOUNCE, REGISTER, EVALUATE, RESULTS)
# What a job's end owes, by the record's ``kind`` (a training job has none): an evaluation
# job's end owes only its results (it registers nothing; its verdict is the notice).
_OWED_BY_KIND: dict[str | None, tuple[str, ...]] = {
    None: (ANNOUNCE, REGISTER),
    names.EVALUATION_KIND: (RESULTS,),
}
# The SNS message attribute that carries the announcement's deduplication id (the message
# itself: ``jobmodel.jobs.notifications``, the ``ended`` notification).
DEDUP_ATTRIBUTE = "dedup_id"

# The ledger attributes the announcement and the job-events function's answer carry (marked
# ``public`` on ``job.Job``).
PUBLIC_FIELDS = JOB_PUBLIC_FIELDS


def dedup_id(job_name: str, effect: str) -> str:
    """The one id of ``effect`` for job ``job_name``: a job ends once, so it never changes."""
    return f"{job_name}/{effect}"


def owed_at_end(job: Mapping[str, Any], status: str | None = None) -> dict[str, str]:
    """The mark written with the write that ends ``job`` with ``status``: every end effect
    its kind owes, with its id (an evaluation's results: ``<evaluated job>/evaluated``; a
    Completed job that names an evaluation policy: its ``evaluate``)."""
    name = str(job["job_name"])
    kind = job.get(names.JOB_KIND)
    # An evaluation's results share the evaluated job's ``evaluated`` notice's id.
    subject = str(job.get(names.EVALUATION_OF) or name) if kind == names.EVALUATION_KIND else name
    effects = _OWED_BY_KIND.get(kind, _OWED_BY_KIND[None])
    if kind is None and status == Status.COMPLETED and job.get(names.EVALUATION_POLICY):
        effects = (*effects, EVALUATE)
    return {e: f"{subject}/evaluated" if e == RESULTS else dedup_id(name, e) for e in effects}


def owed(job: Mapping[str, Any]) -> dict[str, str]:
    """What ``job`` (as read) still owes: its job notices (``notifications``: started, a
    chain's next step) first, then, once it has ended, its end effects in
    :data:`END_EFFECTS` order."""
    mark = job.get(OWED)
    if not isinstance(mark, Mapping):
        return {}
    notices = sorted((k for k in mark if N.is_notice(k)), key=N.notice_order)
    out = {k: str(mark[k]) for k in notices if isinstance(mark[k], str)}
    if job.get("status") in TERMINAL_STATUSES:
        out.update({e: str(mark[e]) for e in END_EFFECTS if isinstance(mark.get(e), str)})
    return out


def done_change(job: Mapping[str, Any], effect: str) -> dict[str, Any]:
    """The attributes that record ``effect`` done on ``job`` as read now (the mark without
    it; ``None`` removes the mark once nothing is owed). Empty when it was already done."""
    mark = job.get(OWED)
    if not isinstance(mark, Mapping) or effect not in mark:
        return {}
    rest = {k: v for k, v in mark.items() if k != effect}
    return {OWED: rest or None}


def public_view(job: Mapping[str, Any]) -> dict[str, Any]:
    return {k: job[k] for k in PUBLIC_FIELDS if job.get(k) is not None}
