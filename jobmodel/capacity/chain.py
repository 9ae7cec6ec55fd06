"""Capacity chains (docs/API.md, "Capacity"): a job's steps and each attempt's request.

Standard library only. A template's chain is its ordered steps (``spot`` with a bounded wait,
``on-demand`` with an ordered instance-type preference list, ``training-plan``); a job runs one
step per attempt, each a new training job that resumes from the job's one checkpoint prefix.
:func:`plan_chain` chooses one job's steps, :func:`render_step` turns the job's rendered request
into one attempt's ``CreateTrainingJob`` request, :func:`capacity_failure` says whether an
attempt ended for want of capacity (the next step then starts), :func:`worst_case_usd` is
what the estimate and the team's limits use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..after_training.tracking_job import attempt_environment
from ..contract.names import JOB_NAME_TAG_KEY
from ..instances import INSTANCE_TYPES, efa_environment
from ..templates.spec import MAX_PREFERENCES
from .plans import ON_DEMAND, PLAN, SPOT, TrainingPlan

__all__ = [
    "ATTEMPT_SUFFIX_LEN",
    "MAX_ATTEMPTS",
    "MAX_PREFERENCES",
    "Step",
    "attempt_name",
    "capacity_failure",
    "ledger_job_of_attempt",
    "plan_chain",
    "preferences",
    "render_step",
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


_EFA_VARIABLES = (
    "FI_PROVIDER",
    "NCCL_PROTO",
    "NCCL_SOCKET_IFNAME",
    "FI_EFA_USE_DEVICE_RDMA",
    "RDMAV_FORK_SAFE",
)


def _step_environment(environment: Mapping[str, str], types: list[Any]) -> dict[str, str]:
    """The job's environment with EFA variables only where every candidate type has them (the
    training toolkit's runners set them again from the host's own type,
    SM_CURRENT_INSTANCE_TYPE)."""
    env = {k: v for k, v in environment.items() if k not in _EFA_VARIABLES}
    common = [efa_environment(t) for t in types]
    shared = {k: v for k, v in common[0].items() if all(c.get(k) == v for c in common)}
    return {**shared, **env}


def render_step(
    rendered: Mapping[str, Any],
    step: Step,
    *,
    job_name: str,
    attempt: int,
    runtime_seconds: int,
    kms_key_arn: str | None,
    keep_alive_seconds: int = 0,
    infra_check: bool = False,
) -> dict[str, Any]:
    """One attempt's ``CreateTrainingJob`` request: the job's rendered request with the
    step's capacity. The checkpoint prefix stays the job's."""
    out: dict[str, Any] = json.loads(json.dumps(rendered))
    name = attempt_name(job_name, attempt)
    out["TrainingJobName"] = name
    types = [INSTANCE_TYPES[t] for t in step.instance_types]
    rc: dict[str, Any] = {
        k: v
        for k, v in out["ResourceConfig"].items()
        if k not in ("InstanceType", "VolumeKmsKeyId", "KeepAlivePeriodInSeconds")
    }
    rc["InstanceCount"] = step.instance_count
    if step.kind == ON_DEMAND:
        rc["InstancePreferences"] = [{"InstanceType": t} for t in step.instance_types]
    else:
        rc["InstanceType"] = step.instance_types[0]
    if step.kind == PLAN:
        rc["TrainingPlanArn"] = step.plan_arn
    if kms_key_arn and not any(t.local_nvme for t in types):
        rc["VolumeKmsKeyId"] = kms_key_arn
    if keep_alive_seconds > 0 and step.kind != SPOT:
        rc["KeepAlivePeriodInSeconds"] = keep_alive_seconds
    out["ResourceConfig"] = rc
    spot = step.kind == SPOT
    # Only a spot attempt carries the flag: SageMaker documents InstancePreferences (the
    # on-demand step) as mutually exclusive with EnableManagedSpotTraining, even false.
    if spot:
        out["EnableManagedSpotTraining"] = True
    else:
        out.pop("EnableManagedSpotTraining", None)
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": runtime_seconds}
    if spot:
        stopping["MaxWaitTimeInSeconds"] = runtime_seconds + int(step.wait_seconds or 0)
    out["StoppingCondition"] = stopping
    env = _step_environment(out.get("Environment", {}), types)
    env = attempt_environment(env, attempt=attempt, instance_types=list(step.instance_types))
    if env:
        out["Environment"] = env
    else:
        out.pop("Environment", None)
    hp = dict(out.get("HyperParameters", {}))
    if "sagemaker_instance_type" in hp:
        if len(step.instance_types) == 1:
            hp["sagemaker_instance_type"] = json.dumps(step.instance_types[0])
        else:
            # Unknown until SageMaker picks: the toolkit's smddp runner, the one reader, then
            # takes the host's own type (current_instance_type) for its EFA flags.
            del hp["sagemaker_instance_type"]
    out["HyperParameters"] = hp
    if infra_check:
        out["InfraCheckConfig"] = {"EnableInfraCheck": True}
    tags = [t for t in out.get("Tags", []) if t["Key"] != JOB_NAME_TAG_KEY]
    tags.append({"Key": JOB_NAME_TAG_KEY, "Value": job_name})
    out["Tags"] = tags
    return out


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
