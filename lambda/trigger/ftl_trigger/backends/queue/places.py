"""One look at the job queue per request: positions, and for queued jobs the estimated start.

The estimate (``jobmodel.capacity.queue_eta``) needs the queue's order (one GetJobQueueSnapshot, the
call positions already make), the jobs that hold instances and the jobs waiting (one
ListServiceJobs per status: ``SCHEDULED``, ``STARTING``, ``RUNNING``, ``RUNNABLE``), and each
of those jobs' limits from the ledger (one BatchGetItem per 100 jobs). They are gathered once
per request, and only when the request shows a ``Queued`` job, so ``list`` makes the same
calls for a page of one queued job as for a page of a hundred. A failure of any of them
leaves the estimate unknown with the reason; it never fails the request.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

# Aliased: the trimmed-model test reads ``batch.<call>(...)`` as a call on a Batch client.
from ftl_ledger.job_codec import from_record
from ftl_trigger.backends.queue import service_jobs
from jobmodel.capacity.chain import ledger_job_of_attempt
from jobmodel.capacity.queue_eta import Holder, StartBound, hold_limit, sooner_options, start_bound
from jobmodel.contract.errors import JobModelError
from jobmodel.contract.statuses import Status
from jobmodel.jobs.job import Job

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from jobmodel.capacity.scheduler import SchedulerConfig
    from jobmodel.templates.spec import TemplateSpec

# The ledger attributes an estimate reads of every job in the queue.
LEDGER_FACTS = ("job_name", "rendered", "instance_count")
SNAPSHOT_SIZE = 100  # GetJobQueueSnapshot lists at most this many jobs
NO_SNAPSHOT = "AWS Batch did not answer GetJobQueueSnapshot, so the job's place is unknown"
NOT_LISTED = (
    "AWS Batch's queue snapshot does not list the job (it lists the first 100 jobs ready to "
    "run, in the order they start), so its place is unknown"
)


class QueueSettings(Protocol):
    """What a look reads of the runtime (``trigger_runtime.Runtime``): the Batch client, the
    queue's configuration, the templates and the clock."""

    batch: Any
    scheduler: SchedulerConfig
    catalog: Mapping[str, TemplateSpec]

    @property
    def now(self) -> Callable[[], datetime]: ...


class QueueSpot:
    """A queued job's place: its position, and (``Queued`` jobs) the estimate's fields,
    worked out the first time they are read (a stop reads only the position)."""

    def __init__(
        self, position: int | None, compute: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        self.position = position
        self._compute = compute
        self._estimate: dict[str, Any] | None = None

    @property
    def estimate(self) -> dict[str, Any]:
        if self._estimate is None:
            self._estimate = self._compute() if self._compute is not None else {}
        return self._estimate


@dataclass
class _Facts:
    running: list[Holder]
    waiting: dict[str, Holder]  # by Batch job ARN
    error: str | None = None


class QueueLook:
    """The queue as one request sees it (``rt.batch`` must be set)."""

    def __init__(self, rt: QueueSettings, ledger: Ledger) -> None:
        self.rt = rt
        self.ledger = ledger
        self.queue = str(rt.scheduler.job_queue_arn)
        self.order = service_jobs.queue_order(rt.batch, self.queue)
        self.positions = service_jobs.positions_of(self.order or [])
        self._facts: _Facts | None = None

    def spot(self, job: Job) -> QueueSpot:
        """The place of ``job`` (its typed record), with the estimate when it is ``Queued``."""
        position = self.positions.get(str(job.batch_job_arn or ""))
        if job.status != Status.QUEUED:
            return QueueSpot(position)
        return QueueSpot(position, lambda: self.estimate(job, position))

    def estimate(self, job: Job, position: int | None) -> dict[str, Any]:
        """``estimated_start_by`` (or null and ``estimated_start_unknown_reason``) and
        ``sooner`` of a ``Queued`` job at ``position``."""
        if self.order is None:
            return _unknown(NO_SNAPSHOT)
        if position is None:
            return _unknown(NOT_LISTED)
        facts = self.facts()
        if facts.error is not None:
            return _unknown(facts.error)
        arn = str(job.batch_job_arn)
        capacity = self.rt.scheduler.capacity_instances
        worst = Holder(capacity or 1, None)  # a job Batch did not describe: the worst case
        ahead = [facts.waiting.get(a, worst) for a in self.order[: position - 1]]
        others = [facts.waiting.get(a, worst) for a in self.order if a != arn]
        now_s = self.rt.now().timestamp()
        instances = _instances(job)
        common: dict[str, Any] = {"capacity": capacity, "now_s": now_s, "running": facts.running}
        bound = start_bound(ahead=ahead, instances=instances, **common)
        sooner = sooner_options(
            job=dataclasses.replace(job, instance_count=instances),
            spec=self.rt.catalog.get(str(job.template)),
            current=bound,
            others=others if len(self.order) < SNAPSHOT_SIZE else None,
            batch_reason=job.batch_status_reason,
            **common,
        )
        return _estimate(bound, sooner)

    def facts(self) -> _Facts:
        """The running and waiting jobs' sizes and limits, gathered once."""
        if self._facts is None:
            try:
                self._facts = self._gather()
            except JobModelError as err:
                self._facts = _Facts([], {}, f"the queue could not be read: {err.message}")
        return self._facts

    def _gather(self) -> _Facts:
        client, capacity = self.rt.batch, self.rt.scheduler.capacity_instances
        holding: dict[str, dict[str, Any]] = {}
        for status in service_jobs.HOLDING:
            for summary in service_jobs.jobs_in(client, self.queue, status):
                holding.setdefault(str(summary.get("jobArn")), summary)
        listed = set(self.order or [])
        waiting = [
            s
            for s in service_jobs.jobs_in(client, self.queue, service_jobs.READY)
            if s.get("jobArn") in listed
        ]
        summaries = [*holding.values(), *waiting]
        names = {n for s in summaries for n in _names(s)}
        read = self.ledger.get_jobs(sorted(names), LEDGER_FACTS)
        records = {name: from_record(record) for name, record in read.items()}
        running = [_holder(s, records, capacity, running=True) for s in holding.values()]
        by_arn = {str(s["jobArn"]): _holder(s, records, capacity) for s in waiting}
        return _Facts(running, by_arn)


def _names(summary: Mapping[str, Any]) -> tuple[str, ...]:
    """The ledger names a Batch job may be: its own, and the job of a later attempt."""
    name = str(summary.get("jobName") or "")
    return (name, ledger_job_of_attempt(name)[0])


def _holder(
    summary: Mapping[str, Any],
    records: Mapping[str, Job],
    capacity: int | None,
    *,
    running: bool = False,
) -> Holder:
    """A Batch job as the estimate sees it: its instances (Batch's capacity usage, else the
    ledger's, else the whole queue) and its limit from the ledger's request (else unknown)."""
    record = next((records[n] for n in _names(summary) if n in records), None)
    limit = None
    if record is not None:
        limit = hold_limit(_rendered(record))
    count = _usage(summary)
    if count is None:
        count = _instances(record) if record is not None else (capacity or 1)
    started = summary.get("scheduledAt") or summary.get("startedAt")
    started_s = float(started) / 1000 if running and isinstance(started, int | float) else None
    return Holder(count, limit, started_s)


def _usage(summary: Mapping[str, Any]) -> int | None:
    for usage in summary.get("capacityUsage") or []:
        if usage.get("capacityUnit") == "NUM_INSTANCES" and usage.get("quantity") is not None:
            return max(1, math.ceil(float(usage["quantity"])))
    return None


def _rendered(job: Job) -> dict[str, Any]:
    try:
        rendered = json.loads(str(job.rendered or "{}"))
    except ValueError:
        return {}
    return rendered if isinstance(rendered, dict) else {}


def _instances(job: Job) -> int:
    """The instances the job's (current attempt's) request asks for."""
    config = _rendered(job).get("ResourceConfig") or {}
    count = config.get("InstanceCount")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count
    return int(job.instance_count or 1)


def _estimate(bound: StartBound, sooner: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"estimated_start_by": bound.iso}
    if bound.reason is not None:
        out["estimated_start_unknown_reason"] = bound.reason
    out["sooner"] = sooner
    return out


def _unknown(reason: str) -> dict[str, Any]:
    return {"estimated_start_by": None, "estimated_start_unknown_reason": reason, "sooner": []}
