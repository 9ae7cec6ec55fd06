"""How long a claimed job may stay ``Submitting``, and which jobs the sweep looks after.

Standard library only; the trigger (describe, stop, list, a replay, the sweep), the stacks
(the sweep's schedule) and docs/API.md ("Job statuses") use these numbers.

A submit claims its job in the ledger (``Submitting``) and then starts it. When the trigger
cannot tell whether the start happened (the answer was lost and the look-up failed too), it
keeps the claim. From then on:

* within :data:`SUBMIT_GRACE_S` of the claim the job is left to its submit;
* after it, every look (describe, stop, list, a replay of the token, the sweep) asks the
  backend by the job's name and records the start when the backend has the job;
* a replay of the token may start the job itself only until :data:`REPLAY_START_S`, so no
  start of the job can be in flight after ``REPLAY_START_S`` plus the trigger's timeout;
* at :data:`CLAIM_BOUND_S` a look that finds no such job ends the claim as ``FailedToStart``
  (usage given back once, token freed). The sweep looks every :data:`SWEEP_MINUTES`, so a
  claim ends within ``CLAIM_BOUND_S + 60 * SWEEP_MINUTES`` seconds once the look-up answers.

A job "needs care" (:func:`needs_care`) while it is ``Submitting`` or owes end effects
(``effects``): only then does it carry :data:`CARE` = :data:`CARE_VALUE`, the key of the
ledger's sparse index the sweep reads (``contract.names.CARE_INDEX``).
"""

from __future__ import annotations

from datetime import datetime

from ..contract.statuses import Status
from . import effects as E
from .job import CARE_VALUE as JOB_CARE_VALUE
from .job import Job

__all__ = [
    "CARE",
    "CARE_VALUE",
    "CLAIM_BOUND_S",
    "REPLAY_START_S",
    "SUBMIT_GRACE_S",
    "SWEEP_MINUTES",
    "TRIGGER_TIMEOUT_S",
    "claim_age_s",
    "needs_care",
    "unstarted_reason",
]

# How long after its claim a job still Submitting is taken for one whose submit may have
# started it without recording that: a look then asks the backend by the job's name.
SUBMIT_GRACE_S = 10.0
# A replay of the token may start a claimed job only this long after the claim.
REPLAY_START_S = 120.0
# The trigger function's timeout: no call of an invocation is in flight after it.
TRIGGER_TIMEOUT_S = 30
# After this long, a claimed job its backend does not have is ended as FailedToStart.
CLAIM_BOUND_S = 300.0
# The sweep's schedule.
SWEEP_MINUTES = 1
# The job attribute that puts a job in the sweep's index, and its one value.
CARE = "care"
CARE_VALUE = JOB_CARE_VALUE

assert REPLAY_START_S + TRIGGER_TIMEOUT_S < CLAIM_BOUND_S  # no start in flight at the bound


def claim_age_s(job: Job, now: datetime) -> float:
    """Seconds since ``job`` was claimed (its ``created_at``)."""
    created = datetime.fromisoformat(str(job.created_at).replace("Z", "+00:00"))
    return (now - created).total_seconds()


def needs_care(job: Job) -> bool:
    """Whether the sweep must look at ``job``: still claimed, or owing end effects."""
    return job.status == Status.SUBMITTING or bool(E.owed(job))


def unstarted_reason(name: str, backend: str) -> str:
    """``failure_reason`` of a claim ended at the bound (``backend``: what was asked)."""
    return (
        f"no {backend} job named {name} was found {int(CLAIM_BOUND_S)} seconds after the "
        "claim: the start's answer was lost and no retry finished it"
    )
