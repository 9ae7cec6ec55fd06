"""What follows a change to a job: one table of consequences, owed durably on its record.

Standard library only. :data:`CONSEQUENCES` is the one list: each row is a key, when it is
owed, its deduplication id, its order (the table's) and the name of its performer (the
factory in ``ftl_ledger.consequences`` maps each name to the code that does it, for both
functions). Three families:

* **end effects**: the write that makes a job's status terminal (``record.plan``) writes the
  mark :data:`OWED`, a map from each end effect the row's condition owes to its stable id;
* **job notices** (``notifications.NOTICE_KEYS``): started, a chain's next step, an
  evaluation's verdict, owed under the same mark by the write that causes them;
* **budget thresholds**: owed on the team's month (its usage item), sent by the one writer's
  spend hook (``ftl_ledger.notify.BudgetWatch``).

An effect is done by whoever next holds the record (the job-events function for any later
event, the trigger's describe, stop, list, a replay of the token, or the scheduled sweep): it
performs the effect with the id, then removes it from the mark with the one writer
(:func:`done_change`). A failure between the two leaves the mark, so the next holder does it
again: at least once, and a receiver drops a repeat by the id, which never changes for a job
and an effect. A performer named ``None`` in a function is left owed there for the holder
that can (``evaluate``: the trigger's).

Adding a consequence is one row here, one performer in ``ftl_ledger.consequences`` and its
permission in the construct of the function that does it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..contract import names
from ..contract.statuses import TERMINAL_STATUSES, Status
from . import notifications as N
from .job import PUBLIC_FIELDS as JOB_PUBLIC_FIELDS
from .job import Job

__all__ = [
    "ANNOUNCE",
    "CONSEQUENCES",
    "Consequence",
    "END",
    "MONTH",
    "NOTICE",
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
    "performer_of",
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
END = "end"  # owed by the write that ends the job (``owed_at_end``)
NOTICE = "notice"  # owed by the write that causes it (``notifications.owed_notices``)
MONTH = "team month"  # owed on the team's usage item (``notifications.thresholds_due``)


@dataclass(frozen=True, slots=True)
class Consequence:
    """One row: ``key`` (the mark's key, or its pattern), ``family``, when it is ``owed`` (in
    words, as docs/API.md says it), its ``dedup`` id's shape, its ``performer``'s name, and
    for an end effect the record ``kinds`` that owe it (None: a training job) and ``when``
    (the job as the ending write leaves it, and its new status -> owed)."""

    key: str
    family: str
    owed: str
    dedup: str
    performer: str
    kinds: tuple[str | None, ...] = (None,)
    when: Callable[[Job, str | None], bool] = lambda _job, _status: True


def _completed_with_policy(job: Job, status: str | None) -> bool:
    return status == Status.COMPLETED and bool(job.evaluation_policy)


# The records whose end is a job's: a training job (no kind) and a sweep (issue 37: one
# announcement, version and evaluation for the whole sweep, none per trial).
_JOBS = (None, names.SWEEP_KIND)
# Every consequence, in the order each family's are done.
CONSEQUENCES: tuple[Consequence, ...] = (
    Consequence(
        N.STARTED, NOTICE, "the write that starts the job", "<job>/started", "notice"
    ),
    Consequence(
        N.CHAIN_STEP, NOTICE, "the write that moves a chain to attempt n",
        "<job>/chain-step-<n>", "notice",
    ),
    Consequence(
        N.EVALUATED, NOTICE, "the write that gives the job's evaluation its verdict",
        "<job>/evaluated", "notice",
    ),
    Consequence(
        ANNOUNCE, END, "the write that ends the job", "<job>/announce", "announce", kinds=_JOBS,
    ),
    Consequence(
        REGISTER, END, "the write that ends the job (a version only when Completed; a "
        "sweep's: its best trial's)", "<job>/register", "register", kinds=_JOBS,
    ),
    Consequence(
        EVALUATE, END, "the write that ends the job Completed, with an evaluation policy",
        "<job>/evaluate", "evaluate", kinds=_JOBS, when=_completed_with_policy,
    ),
    Consequence(
        RESULTS, END, "the write that ends an evaluation job", "<evaluated job>/evaluated",
        "evaluation_results", kinds=(names.EVALUATION_KIND,),
    ),
    Consequence(
        N.BUDGET, MONTH, "a write that takes the team's month spend to 80% or 100% of its "
        "monthly_budget_usd", "<team>/budget-<YYYY-MM>-<p>", "budget",
    ),
)  # fmt: skip
# Every effect a job's end may owe, in the order they are done.
END_EFFECTS: tuple[str, ...] = tuple(c.key for c in CONSEQUENCES if c.family == END)
# The SNS message attribute that carries the announcement's deduplication id (the message
# itself: ``jobmodel.jobs.notifications``, the ``ended`` notification).
DEDUP_ATTRIBUTE = "dedup_id"

# The ledger attributes the announcement and the job-events function's answer carry (marked
# ``public`` on ``job.Job``).
PUBLIC_FIELDS = JOB_PUBLIC_FIELDS


def dedup_id(job_name: str, effect: str) -> str:
    """The one id of ``effect`` for job ``job_name``: a job ends once, so it never changes."""
    return f"{job_name}/{effect}"


def owed_at_end(job: Job, status: str | None = None) -> dict[str, str]:
    """The mark written with the write that ends ``job`` with ``status``: every end effect
    its kind owes, with its id (an evaluation's results: ``<evaluated job>/evaluated``; a
    Completed job that names an evaluation policy: its ``evaluate``)."""
    name = str(job.job_name)
    kind = job.kind
    # An evaluation's results share the evaluated job's ``evaluated`` notice's id.
    subject = str(job.evaluation_of or name) if kind == names.EVALUATION_KIND else name
    rows = [c for c in CONSEQUENCES if c.family == END and kind in c.kinds and c.when(job, status)]
    return {
        c.key: f"{subject}/{N.EVALUATED}" if c.key == RESULTS else dedup_id(name, c.key)
        for c in rows
    }


def performer_of(key: str) -> str:
    """The performer's name of what is owed under ``key`` (a job notice's key, or an end
    effect's); ``KeyError`` for a key no row has."""
    if N.is_notice(key):
        return NOTICE
    for row in CONSEQUENCES:
        if row.family == END and row.key == key:
            return row.performer
    raise KeyError(key)


def owed(job: Job) -> dict[str, str]:
    """What ``job`` (as read) still owes: its job notices (``notifications``: started, a
    chain's next step) first, then, once it has ended, its end effects in
    :data:`END_EFFECTS` order."""
    mark = job.owed_effects
    if not isinstance(mark, Mapping):
        return {}
    notices = sorted((k for k in mark if N.is_notice(k)), key=N.notice_order)
    out = {k: str(mark[k]) for k in notices if isinstance(mark[k], str)}
    if job.status in TERMINAL_STATUSES:
        out.update({e: str(mark[e]) for e in END_EFFECTS if isinstance(mark.get(e), str)})
    return out


def done_change(job: Job, effect: str) -> dict[str, Any]:
    """The attributes that record ``effect`` done on ``job`` as read now (the mark without
    it; ``None`` removes the mark once nothing is owed). Empty when it was already done."""
    mark = job.owed_effects
    if not isinstance(mark, Mapping) or effect not in mark:
        return {}
    rest = {k: v for k, v in mark.items() if k != effect}
    return {OWED: rest or None}


def public_view(job: Job) -> dict[str, Any]:
    """The announcement's and the job-events function's answer's attributes of ``job``."""
    values = {k: getattr(job, k) for k in PUBLIC_FIELDS}
    return {k: v for k, v in values.items() if v is not None}
