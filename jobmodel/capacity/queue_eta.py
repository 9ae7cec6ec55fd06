"""When a queued job will have started at the latest, and what would start it sooner.

Standard library only (the trigger gathers the facts from AWS Batch and the ledger:
``ftl_trigger/backends/queue/places.py``). The model (docs/API.md, "Queue mode"; docs/DECISIONS.md):

- The queue's capacity is one number of instances of any type (the service environment's
  capacity limit in ``NUM_INSTANCES``, ``ftl:queueCapacityInstances``).
- A running job (Batch ``SCHEDULED``, ``STARTING``, ``RUNNING``) holds its instances from
  Batch's ``scheduledAt`` for at most its *limit* plus :data:`HANDOVER_ALLOWANCE_S`: the
  limit is ``MaxWaitTimeInSeconds`` for a managed spot job (SageMaker counts the spot wait
  and the run in it) and ``MaxRuntimeInSeconds`` otherwise (SageMaker's retries included);
  the allowance covers what neither limit counts for certain (provisioning before the run,
  the 120 s stop and the upload after). A job whose limit is not known holds its instances
  for ever, as far as the bound can tell.
- Waiting jobs start in the order of Batch's queue snapshot (``GetJobQueueSnapshot``, the
  order fair share and priorities give now), each when it fits in the free capacity, never
  before the job ahead of it (no backfill, as the sandbox's stand-in models Batch).

Under this model every job's start is monotone in every other job's run time (a shorter
run never starts a later job later), so computing with each job's longest hold gives an
upper bound: :func:`start_bound`. It holds while the order holds: a job queued later with a
higher priority, or from a team with less recent use, may go ahead, and a service job that
Batch retries goes back into the queue. Unknown is said with a reason, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..contract.errors import ValidationError
from ..contract.names import timestamp
from ..requests.submit_parts import instances as check_instances

__all__ = [
    "HANDOVER_ALLOWANCE_S",
    "Holder",
    "QueuedJob",
    "StartBound",
    "hold_limit",
    "sooner_options",
    "start_bound",
]

# Seconds a job may hold its instances beyond its limit: SageMaker's provisioning before the
# limit's clock starts, the stop (120 s) and the upload after it. An assumption of this
# platform, not a figure AWS documents; docs/DECISIONS.md.
HANDOVER_ALLOWANCE_S = 900
# Batch's reason for a job at the head that SageMaker has no capacity of its type for.
NO_TYPE_CAPACITY = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"

UNKNOWN_CAPACITY = "the queue's capacity is not known to this launcher (FTL_QUEUE_CAPACITY)"
UNKNOWN_RUNNING = (
    "a running job of the queue has no known maximum runtime (it was not started by this "
    "platform, or its record could not be read), so when its instances free is unknown"
)
OVERDUE_RUNNING = (
    "a running job of the queue has held its instances longer than its maximum runtime and "
    "the allowance, so when they free is unknown"
)
UNKNOWN_AHEAD = "a job ahead of it has no known maximum runtime, so when it ends is unknown"
TOO_BIG_AHEAD = (
    "a job ahead of it needs more instances than the queue's capacity and holds the head "
    "until the queue's time limit ends it"
)


class QueuedJob(Protocol):
    """What the options read of a queued job (``jobmodel.jobs.job.Job``, whose layer is above
    this one): its instance type and count, and whether it is spot."""

    @property
    def instance_type(self) -> str: ...

    @property
    def instance_count(self) -> int: ...

    @property
    def spot(self) -> bool: ...


@dataclass(frozen=True)
class Holder:
    """A job that holds, or will hold, ``instances`` of the queue's capacity for at most
    ``limit_s`` seconds (None: unknown) from ``started_s`` (epoch seconds; running jobs)."""

    instances: int
    limit_s: float | None
    started_s: float | None = None


@dataclass(frozen=True)
class StartBound:
    """The latest time (epoch seconds) the job will have started, or None and why."""

    at_s: float | None
    reason: str | None = None

    @property
    def iso(self) -> str | None:
        """``at_s`` as the contract's timestamp (ISO 8601, UTC), or None."""
        if self.at_s is None:
            return None
        return timestamp(datetime.fromtimestamp(self.at_s, UTC))


def hold_limit(rendered: Mapping[str, Any]) -> float | None:
    """The longest a job of this CreateTrainingJob request holds its instances, without the
    allowance: ``MaxWaitTimeInSeconds`` for managed spot, else ``MaxRuntimeInSeconds``;
    None when the request does not say."""
    stopping = rendered.get("StoppingCondition") or {}
    runtime = _seconds(stopping.get("MaxRuntimeInSeconds"))
    if rendered.get("EnableManagedSpotTraining"):
        wait = _seconds(stopping.get("MaxWaitTimeInSeconds"))
        return None if wait is None else max(wait, runtime or 0)
    return runtime


def start_bound(
    *,
    capacity: int | None,
    now_s: float,
    running: Sequence[Holder],
    ahead: Sequence[Holder],
    instances: int,
    allowance_s: float = HANDOVER_ALLOWANCE_S,
) -> StartBound:
    """The latest time a job of ``instances`` behind ``ahead`` (in start order) will have
    started, with ``running`` holding their instances; never before ``now_s``."""
    if capacity is None:
        return StartBound(None, UNKNOWN_CAPACITY)
    if instances > capacity:
        return StartBound(
            None,
            f"the job needs {instances} instances and the queue's capacity is {capacity}: "
            "it can never start",
        )
    held: list[tuple[float, int, str]] = []  # (end, instances, why it may never end)
    for job in running:
        if job.limit_s is None or job.started_s is None:
            held.append((math.inf, job.instances, UNKNOWN_RUNNING))
            continue
        end = job.started_s + job.limit_s + allowance_s
        held.append(
            (end, job.instances, "") if end >= now_s else (math.inf, job.instances, OVERDUE_RUNNING)
        )
    at = float(now_s)
    for job in (*ahead, Holder(instances, 0)):
        if job.instances > capacity:
            return StartBound(None, TOO_BIG_AHEAD)
        start, why = _earliest(held, at, job.instances, capacity)
        if start is None:
            return StartBound(None, why)
        at = start
        if job.limit_s is None:
            held.append((math.inf, job.instances, UNKNOWN_AHEAD))
        else:
            held.append((start + job.limit_s + allowance_s, job.instances, ""))
    return StartBound(at)


def _earliest(
    held: list[tuple[float, int, str]], at: float, need: int, capacity: int
) -> tuple[float | None, str]:
    """The first moment from ``at`` with ``need`` instances free, or None and why."""
    for moment in (at, *sorted(end for end, _, _ in held if at < end < math.inf)):
        busy = sum(count for end, count, _ in held if end > moment)
        if capacity - busy >= need:
            return moment, ""
    return None, next(why for end, _, why in held if end == math.inf)


def sooner_options(
    *,
    job: QueuedJob,
    spec: Any,
    current: StartBound,
    capacity: int | None,
    now_s: float,
    running: Sequence[Holder],
    others: Sequence[Holder] | None,
    batch_reason: str | None,
    allowance_s: float = HANDOVER_ALLOWANCE_S,
) -> list[dict[str, Any]]:
    """What would start the queued ``job`` (its typed record) sooner, as the submit fields
    to change (``request``): a new job of fewer instances, placed behind ``others`` (every
    job waiting now but this one, in order; None when Batch did not list them all), another
    instance type (only when SageMaker has no capacity of the job's type: the queue's own
    capacity counts instances of any type), or on-demand for a spot job. ``spec``: the
    job's template (None: no option that needs it)."""
    out: list[dict[str, Any]] = []
    count = int(job.instance_count)
    itype = str(job.instance_type)
    if others is not None and spec is not None:
        out += _fewer(job, spec, current, capacity, now_s, running, others, allowance_s)
    reason = (batch_reason or "").upper()
    if spec is not None and NO_TYPE_CAPACITY in reason:
        types = [t for t in spec.instance_types if t != itype and _valid(spec, t, count)]
        if types:
            out.append(
                {
                    "option": "other_instance_type",
                    "request": {"instance_type": types[0]},
                    "instance_types": types,
                    "estimated_start_by": None,
                    "detail": (
                        f"SageMaker has no {itype} capacity for the job now; "
                        "the queue counts instances of any type, so another type the "
                        "template allows waits the same in the queue but not for "
                        f"{itype}"
                    ),
                }
            )
    if job.spot:
        out.append(
            {
                "option": "on_demand",
                "request": {"spot": False},
                "estimated_start_by": None,
                "detail": (
                    "the queue hands a spot job to SageMaker no sooner, but SageMaker then "
                    "waits for spot capacity (up to the job's max_wait_seconds); an "
                    "on-demand job starts training when handed over and holds the queue's "
                    "instances for at most its max_runtime_seconds"
                ),
            }
        )
    return out


def _fewer(
    job: QueuedJob,
    spec: Any,
    current: StartBound,
    capacity: int | None,
    now_s: float,
    running: Sequence[Holder],
    others: Sequence[Holder],
    allowance_s: float,
) -> list[dict[str, Any]]:
    """The largest instance count a new job would start earlier with, and (when that one
    does not start now) the largest that starts now."""
    out: list[dict[str, Any]] = []
    found_earlier = False
    for n in range(int(job.instance_count) - 1, 0, -1):
        if not _valid(spec, str(job.instance_type), n):
            continue
        bound = start_bound(
            capacity=capacity,
            now_s=now_s,
            running=running,
            ahead=others,
            instances=n,
            allowance_s=allowance_s,
        )
        if bound.at_s is None:
            continue
        earlier = current.at_s is None or bound.at_s < current.at_s
        starts_now = bound.at_s <= now_s
        if (earlier and not found_earlier) or (starts_now and found_earlier):
            out.append(
                {
                    "option": "fewer_instances",
                    "request": {"instance_count": n},
                    "estimated_start_by": bound.iso,
                    "detail": (
                        f"a new job of {n} instance{'s' if n > 1 else ''}, queued behind "
                        "every job waiting now, "
                        + ("would start now" if starts_now else "would have started by then")
                    ),
                }
            )
            if starts_now or found_earlier:
                break
            found_earlier = True
    return out


def _valid(spec: Any, instance_type: str, count: int) -> bool:
    try:
        check_instances({"instance_type": instance_type, "instance_count": count}, spec)
    except ValidationError:
        return False
    return count <= int(spec.max_instance_count)


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)
