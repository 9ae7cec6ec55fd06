"""The job record and the one rule for changing it.

Standard library only. :class:`JobRecord` is the ledger's job item as both functions read
it (``ftl_ledger.items`` decodes DynamoDB into it). :func:`plan` is the pure half of the one
function that changes a job (``ftl_ledger.writer.JobWriter.apply``): a :class:`Change`
(an observation of the job plus attributes it sets) becomes the attributes to write, merged
by the order rules (``training_state.merge``, which applies ``queue_state.merge``), with the
cost and the team's usage settled once (``jobs.settlement.settle``) and the conditions the write
needs (the revision and the status read). Every writer (submit's start and failed start, describe's
refresh, stop, the queue transitions, the job events) describes its change this way, so the
rules are written once and a transition is applied, settled and published once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict

from ..contract.statuses import TERMINAL_STATUSES, Status
from . import claims as CL
from . import effects as E
from . import notifications as N
from .job import Job
from .settlement import settle
from .training_state import merge

__all__ = [
    "BOOKKEEPING",
    "LAUNCHER",
    "REVISION",
    "Change",
    "JobRecord",
    "Plan",
    "overlay",
    "plan",
]

REVISION: Final = "revision"  # the job item's write counter: every write adds one
LAUNCHER = "launcher"  # ``status_source`` of what the launcher itself observed or decided
# Attributes that only say when and by whom a state was seen: a change in these alone is not
# written (every describe is a new observation of the same state).
BOOKKEEPING = frozenset({"status_source", "status_observed_ms", "batch_observed_ms"})


class JobRecord(TypedDict, total=False):
    """A ledger job item (``pk = "job#<job_name>"``); absent keys were never written."""

    # the claim (submit)
    job_name: str
    template: str
    status: str  # a :class:`Status`
    instance_type: str
    instance_count: int
    spot: bool
    checkpoint_s3_uri: str
    output_s3_uri: str
    requested_by: str
    team: str | None
    created_at: str
    updated_at: str
    client_token: str | None
    request: str
    request_fingerprint: str
    rendered: str
    rendered_hash: str
    price_usd_per_hour: float | None
    estimated_max_cost_usd: float | None
    price_unknown_reason: str | None
    priority: int | None
    # what the backend and the launcher learned since
    job_arn: str
    error_type: str
    failure_reason: str
    secondary_status: str
    billable_seconds: int
    training_seconds: int
    spot_savings_percent: float
    final_metrics: dict[str, float]
    spot_interruptions: int
    training_job_name: str
    training_job_arn: str
    # queue mode
    batch_job_id: str
    batch_job_arn: str
    batch_status: str
    batch_status_reason: str
    queue_reason: str
    queued_ms: int
    dequeued_ms: int
    queued_at: str
    # capacity chains (``jobmodel.jobs.attempts``)
    chain: list[dict[str, Any]]
    attempt: int
    attempts: list[dict[str, Any]]
    chain_pending: bool
    stop_requested: bool
    prior_cost_usd: float
    # settlement (``jobs.settlement.settle``)
    cost_usd: float
    usage_released: bool
    usage_spend_usd: float
    # end effects still owed (``effects``): effect name -> deduplication id
    owed_effects: dict[str, str]
    care: str  # in the sweep's index (``claims``)
    # bookkeeping
    revision: int
    status_source: str
    status_observed_ms: int
    sagemaker_observed_ms: int
    batch_observed_ms: int


@dataclass(frozen=True)
class Change:
    """One writer's change to a job.

    ``observation``: a status observation in ledger terms (``status``, ``status_source``,
    ``status_observed_ms`` and what the source reports), merged by the order rules, so it
    applies only if it is the newest, most authoritative word on the job. ``once``:
    attributes set only where the record has none. ``also``: attributes written as given,
    only with an observation that applied. ``free_token``: the write frees the job's
    client token (a failed start, so the same request can be retried).
    """

    observation: Mapping[str, Any] = field(default_factory=dict)
    once: Mapping[str, Any] = field(default_factory=dict)
    also: Mapping[str, Any] = field(default_factory=dict)
    free_token: bool = False
    # A closed attempt's cost (a capacity chain, ``jobmodel.jobs.attempts``): added to the team's
    # month spend with this write, as the attempt ends (the job's own end settles the rest).
    spend: float | None = None

    @classmethod
    def launcher(
        cls,
        status: Status,
        observed_ms: int,
        *,
        once: Mapping[str, Any] | None = None,
        also: Mapping[str, Any] | None = None,
        free_token: bool = False,
        reason: str | None = None,
    ) -> Change:
        """A status the launcher itself decided (a start, a stop, a failed start, queued);
        ``reason``: its ``failure_reason``."""
        observation: dict[str, Any] = {
            "status": str(status),
            "status_source": LAUNCHER,
            "status_observed_ms": observed_ms,
        }
        if reason is not None:
            observation["failure_reason"] = reason
        return cls(observation, once or {}, also or {}, free_token)


ChangeFor = Change | Callable[[JobRecord], Change]


@dataclass(frozen=True)
class Plan:
    """What applying a change to a record read at ``revision`` writes (:func:`plan`)."""

    changes: dict[str, Any]  # attributes to write (``None`` removes one)
    expect: dict[str, Any]  # the conditions: the status and the revision read
    after: JobRecord  # the record as written
    release: bool = False  # give the team's usage back, with ``cost``
    add_spend: float | None = None  # a cost learned after the release, to add to the spend
    cost: float | None = None
    late_cost: bool = False  # the cost of a job that had already ended became known
    free_token: bool = False


def overlay(job: Mapping[str, Any], changes: Mapping[str, Any]) -> JobRecord:
    """The record after ``changes`` (``None`` removes an attribute)."""
    out = {**job, **changes}
    return {k: v for k, v in out.items() if v is not None}  # type: ignore[return-value]


def plan(
    job: JobRecord, change: Change, *, stamp: str, read: Callable[[Mapping[str, Any]], Job]
) -> Plan | None:
    """The write that applies ``change`` to ``job`` (as read), or ``None`` when there is
    nothing to write: a replay, an older or less authoritative observation, or one that
    differs from the record only in bookkeeping. ``stamp``: the write's ``updated_at``;
    ``read``: the ledger's codec (``ftl_ledger.job_codec.from_record``), which types the
    record before and after the write for what the rules decide from it (the record itself
    is what the merge and the conditional write work on)."""
    changes = merge(job, change.observation) if change.observation else {}
    # ``also`` rides on an observation that was taken: a new status, or a newer SageMaker
    # view under the same status (a capacity chain's selected type and attempt start).
    applied = "status" in changes or "sagemaker_observed_ms" in changes or not change.observation
    changes.update({k: v for k, v in change.once.items() if v is not None and job.get(k) is None})
    if applied:
        # Against the record as this write leaves it: ``also`` may clear what the observation
        # or ``once`` just set (a chain's next attempt clears the ended one's training job).
        changes.update({k: v for k, v in change.also.items() if changes.get(k, job.get(k)) != v})
    if changes.keys() <= BOOKKEEPING:
        return None
    before = read(job)
    settlement = settle(before, read(overlay(job, changes)))
    changes.update(settlement.changes)
    # The write that starts the job, or moves its capacity chain on, owes the notice of it;
    # the write that ends the job owes its end effects: durably, in the same write.
    owe = N.owed_notices(before, read(overlay(job, changes)))
    if before.status not in TERMINAL_STATUSES and changes.get("status") in TERMINAL_STATUSES:
        owe.update(E.owed_at_end(before, changes["status"]))
    if owe:
        changes[E.OWED] = {**(changes.get(E.OWED, before.owed_effects) or {}), **owe}
    # In the sweep's sparse index only while the job is claimed or owes end effects.
    care = CL.CARE_VALUE if CL.needs_care(read(overlay(job, changes))) else None
    if before.care != care:
        changes[CL.CARE] = care
    changes["updated_at"] = stamp
    free = change.free_token and bool(before.client_token) and "status" in changes
    add_spend = settlement.add_spend
    if add_spend is None and change.spend and before.team:
        add_spend = change.spend
    return Plan(
        changes=changes,
        expect={"status": before.status, REVISION: before.revision},
        after=overlay(job, changes),
        release=settlement.release,
        add_spend=add_spend,
        cost=settlement.cost,
        late_cost=settlement.late_cost,
        free_token=free,
    )
