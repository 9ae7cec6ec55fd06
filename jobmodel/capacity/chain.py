"""Capacity chains (docs/API.md, "Capacity"): a job's steps and its attempts' names.

Standard library only. A template's chain is its ordered steps (``spot`` with a bounded wait,
``on-demand`` with an ordered instance-type preference list, ``training-plan``); a job runs one
step per attempt, each a new training job that resumes from the job's one checkpoint prefix.
:func:`plan_chain` chooses one job's steps (:func:`plain_step`: a job without a chain as a
chain of one step; ``jobmodel.render.render_attempt`` renders any step's attempt),
:func:`capacity_failure` says whether an attempt ended for want of capacity (the next step then
starts), :func:`worst_case_usd` is what the estimate and the team's limits use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..templates.spec import MAX_PREFERENCES
from .plans import ON_DEMAND, PLAN, SPOT, TrainingPlan

__all__ = [
    "ATTEMPT_SUFFIX_LEN",
    "EFA_VARIABLES",
    "MAX_ATTEMPTS",
    "MAX_PREFERENCES",
    "Step",
    "attempt_name",
    "capacity_failure",
    "ledger_job_of_attempt",
    "plain_step",
    "plan_chain",
    "preferences",
    "worst_case_usd",
]

MAX_ATTEMPTS = 9  # an attempt's training job is ``<job>-a<n>`` with one digit
ATTEMPT_SUFFIX_LEN = len("-a2")
_ATTEMPT_RE = re.compile(r"(.+-\d{8}-\d{4}-[0-9a-f]{4})-a([2-9])")
# What SageMaker says when a training job could not get its instances: the failure reasons of
# an insufficient-capacity end, and the secondary status of a spot job whose wait ran out.
_CAPACITY_REASONS = re.compile(
    r"insufficient\s*capacity|capacityerror|capacity\s+error|unable to provision|"
    r"insufficient.*instances|no capacity|out of capacity",
    re.IGNORECASE,
)
_CAPACITY_SECONDARY = frozenset({"MaxWaitTimeExceeded"})


@dataclass(frozen=True)
class Step:
    """One step of a job's chain: how its attempt gets capacity."""

    kind: str  # SPOT, ON_DEMAND or PLAN
    instance_types: tuple[str, ...]  # one, or the ordered preferences (on-demand)
    instance_count: int
    plan_arn: str | None = None
    plan_name: str | None = None
    wait_seconds: int | None = None  # spot: how long to wait for capacity
    # False: a plain job's one step (:func:`plain_step`), rendered with ``InstanceType``, an
    # explicit ``EnableManagedSpotTraining`` and no job-name tag. Not stored.
    chained: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "instance_types": list(self.instance_types),
            "instance_count": self.instance_count,
        }
        if self.plan_arn:
            out["plan_arn"] = self.plan_arn
            out["plan_name"] = self.plan_name
        if self.wait_seconds is not None:
            out["wait_seconds"] = self.wait_seconds
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        return cls(
            kind=str(d["kind"]),
            instance_types=tuple(d["instance_types"]),
            instance_count=int(d["instance_count"]),
            plan_arn=d.get("plan_arn"),
            plan_name=d.get("plan_name"),
            wait_seconds=d.get("wait_seconds"),
        )


def preferences(spec: Any, first: str) -> tuple[str, ...]:
    """The on-demand step's ordered types: the job's type, then the template's preferences."""
    ordered = [first, *(t for t in spec.instance_preferences if t != first)]
    return tuple(ordered[:MAX_PREFERENCES])


def plan_chain(
    spec: Any,
    *,
    instance_type: str,
    count: int,
    chosen: Sequence[str] | None,
    spot: bool,
    plan: TrainingPlan | None,
) -> tuple[list[Step], list[str]]:
    """A job's steps, in the template's order, and why any chosen step was left out.

    ``chosen``: the steps the caller asked for (None: the template's whole chain); the
    ``spot`` flag false drops the spot step; the plan step needs a usable ``plan``.
    """
    steps: list[Step] = []
    skipped: list[str] = []
    wanted = spec.capacity_chain if chosen is None else tuple(chosen)
    for kind in spec.capacity_chain:
        if kind not in wanted:
            continue
        if kind == SPOT:
            if not spot:
                skipped.append("spot: the request asks for on-demand (spot false)")
                continue
            steps.append(Step(SPOT, (instance_type,), count, wait_seconds=spec.spot_wait_seconds))
        elif kind == ON_DEMAND:
            steps.append(Step(ON_DEMAND, preferences(spec, instance_type), count))
        elif plan is None:
            skipped.append(
                "training-plan: no training plan open now serves this team, template and count"
            )
        else:
            steps.append(
                Step(PLAN, (plan.instance_type,), count, plan_arn=plan.arn, plan_name=plan.name)
            )
    return steps, skipped


def attempt_name(job_name: str, attempt: int) -> str:
    """The training job of attempt ``attempt`` (1-based): the job's own name first, then
    ``<job>-a<n>`` (job names of chained jobs leave room for the suffix)."""
    if attempt == 1:
        return job_name
    if not 2 <= attempt <= MAX_ATTEMPTS:
        raise ValueError(f"attempt must be 1 to {MAX_ATTEMPTS}, got {attempt}")
    return f"{job_name}-a{attempt}"


def ledger_job_of_attempt(training_job_name: str) -> tuple[str, int]:
    """The ledger job and attempt number a training job's name says (``(name, 1)`` when it
    names no later attempt)."""
    match = _ATTEMPT_RE.fullmatch(training_job_name)
    if match is None:
        return training_job_name, 1
    return match.group(1), int(match.group(2))


# The variables EFA's types set (``instances.efa_environment``): a chain's attempt takes them
# from its candidate types only (``jobmodel.render``).
EFA_VARIABLES = (
    "FI_PROVIDER",
    "NCCL_PROTO",
    "NCCL_SOCKET_IFNAME",
    "FI_EFA_USE_DEVICE_RDMA",
    "RDMAV_FORK_SAFE",
)


def plain_step(req: Any, spec: Any) -> Step:
    """A job without a chain as a chain of one step: the request's own type, count and
    capacity (spot with the request's wait, else on-demand). Not a chain's step: it renders
    as jobs did before chains (``Step.chained``)."""
    wait = None
    if req.spot:
        limit = req.max_wait_seconds
        if limit is None:
            limit = max(spec.max_wait_seconds, req.max_runtime_seconds)
        wait = limit - req.max_runtime_seconds
    kind = SPOT if req.spot else ON_DEMAND
    return Step(kind, (req.instance_type,), req.instance_count, wait_seconds=wait, chained=False)


def capacity_failure(update: Mapping[str, Any]) -> str | None:
    """Why an attempt's end (a SageMaker observation in ledger terms) was for want of
    capacity, or None when it ended for another reason (the chain then ends with it)."""
    if update.get("status") not in ("Failed", "Stopped"):
        return None
    if update.get("secondary_status") in _CAPACITY_SECONDARY:
        return f"no capacity within the wait ({update['secondary_status']})"
    reason = str(update.get("failure_reason") or "")
    if update.get("status") == "Failed" and _CAPACITY_REASONS.search(reason):
        return reason[:256]
    return None


def worst_case_usd(
    steps: Sequence[Step], price_of: Any, runtime_seconds: int
) -> tuple[float | None, str | None]:
    """The chain's worst case: every step runs to its maximum runtime on its dearest type.
    ``price_of(instance_type) -> (price, reason)``; None (with the reason) when a price is
    unknown."""
    total = 0.0
    for step in steps:
        dearest = 0.0
        for itype in step.instance_types:
            price, reason = price_of(itype)
            if price is None:
                return None, reason
            dearest = max(dearest, float(price))
        total += dearest * step.instance_count * runtime_seconds / 3600.0
    return round(total, 4), None
