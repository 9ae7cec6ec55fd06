"""Batch service-job state -> ledger fields, and the rule that merges them with SageMaker's.

Standard library only. Two sources describe a queued job:

- AWS Batch: ``Batch Service Job State Change`` events (EventBridge, ``source`` ``aws.batch``;
  the detail is a DescribeServiceJob response without ``tags`` and ``serviceRequestPayload``)
  and DescribeServiceJob itself. :func:`from_service_job` maps either to a :class:`QueueUpdate`.
- SageMaker: ``SageMaker Training Job State Change`` events, handled by the job-events
  function as today (statuses InProgress/Completed/Failed/Stopping/Stopped).

Batch status -> ledger status:

=====================================  ===========================================
SUBMITTED, PENDING, RUNNABLE           ``Queued`` (with ``queue_reason``)
SCHEDULED                              ``Scheduled`` (handed to SageMaker)
STARTING, RUNNING                      ``InProgress``
SUCCEEDED                              ``Completed``
FAILED, after an attempt started       ``Failed`` (SageMaker's own event refines it)
FAILED, never started, ftl stop        ``Stopped`` (reason starts with :data:`STOP_REASON`)
FAILED, never started, anything else   ``FailedToStart`` (head-of-queue time limit,
                                       retries exhausted; ``failure_reason`` = reason)
=====================================  ===========================================

Precedence (:func:`merge`), so events may arrive in any order and any number of times:

1. Statuses are ranked Submitting < Queued < Scheduled < InProgress < Stopping < terminal.
   An update with a lower rank than the record's is ignored (a late RUNNABLE event cannot
   move a running job back into the queue).
2. A terminal status is final, with one exception: SageMaker's terminal status replaces a
   terminal status that came from Batch (Batch reports a stopped training job as FAILED;
   SageMaker says Stopped). Nothing replaces a SageMaker terminal status. At equal rank
   SageMaker's observation beats Batch's, and then the newer one wins.
3. ``queue_reason`` exists only while the job is ``Queued``: leaving the queue removes it
   (the wait itself stays as ``queued_ms``/``dequeued_ms``).
4. ``batch_status``/``batch_status_reason`` keep the furthest Batch state seen, whatever
   the ledger status. Identifiers (``batch_job_id``, ``training_job_name``/``arn``) and
   the queue times (``queued_ms``, ``dequeued_ms``) are set once and never changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..contract.statuses import TERMINAL_RANK, Status

__all__ = [
    "BATCH_HOLDING",
    "BATCH_STATUSES",
    "BATCH_WAITING",
    "HEAD_LIMIT_REASONS",
    "QUOTA_LIMIT_REASON",
    "STOP_REASON",
    "TIME_LIMIT_TERMINATED",
    "QueueUpdate",
    "classify_reason",
    "from_service_job",
    "ledger_job_name",
    "merge",
    "waited_seconds",
]

BATCH_STATUSES = (
    "SUBMITTED",
    "PENDING",
    "RUNNABLE",
    "SCHEDULED",
    "STARTING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
)
# Batch's states of a job waiting its turn, and of one holding its instances.
BATCH_WAITING = ("SUBMITTED", "PENDING", "RUNNABLE")
BATCH_HOLDING = ("SCHEDULED", "STARTING", "RUNNING")
STOP_REASON = "ftl stop:"  # TerminateServiceJob reasons written by the launcher's stop
EVENT_DETAIL_TYPE = "Batch Service Job State Change"
# The RUNNABLE reasons a SAGEMAKER_TRAINING queue's time limit (JobStateTimeLimitAction, whose
# only action there is TERMINATE) can act on: SageMaker found no capacity for the job, or the
# job needs more instances than the service environment's limit (or, with quota share, than
# its share may use). A job waiting while other jobs of the queue hold the capacity has none
# of these reasons and is never terminated by the limit (AWS Batch user guide, "Jobs stuck in
# RUNNABLE").
HEAD_LIMIT_REASONS = (
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
)
QUOTA_LIMIT_REASON = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
# Batch's statusReason of a job the time limit terminated, followed by the reason code.
TIME_LIMIT_TERMINATED = "Terminated by JobStateTimeLimit action due to reason: "
_QUEUED = {"SUBMITTED", "PENDING", "RUNNABLE"}
_SIMPLE = {"SCHEDULED": "Scheduled", "STARTING": "InProgress", "RUNNING": "InProgress"}
# Batch names the SageMaker job "AWSBatch" + job name + 32 hex characters.
_BATCH_TRAINING_NAME = re.compile(r"AWSBatch(?P<name>.+?)(?P<suffix>[0-9a-f]{32})")


@dataclass(frozen=True, kw_only=True)
class QueueUpdate:
    """What one Batch observation says about a job, in ledger terms."""

    status: str
    batch_job_id: str
    observed_ms: int
    source: str = "batch"
    batch_status: str | None = None
    queue_reason: str | None = None
    status_reason: str | None = None
    failure_reason: str | None = None
    training_job_arn: str | None = None
    training_job_name: str | None = None
    queued_ms: int | None = None  # when the job entered the queue (createdAt)
    # When it left the queue: scheduledAt, or stoppedAt for a job that ended unstarted.
    dequeued_ms: int | None = None

    @property
    def queued_seconds(self) -> float | None:
        """Time spent queued, once the job has left the queue."""
        return waited_seconds(self.queued_ms, self.dequeued_ms)

    def fields(self) -> dict[str, Any]:
        """The ledger attributes this update sets (``None`` values left out)."""
        out = {
            "status": self.status,
            "status_source": self.source,
            "status_observed_ms": self.observed_ms,
            "batch_job_id": self.batch_job_id,
            "batch_status": self.batch_status,
            "batch_observed_ms": self.observed_ms,
            "queue_reason": self.queue_reason,
            "batch_status_reason": self.status_reason,
            "failure_reason": self.failure_reason,
            "training_job_arn": self.training_job_arn,
            "training_job_name": self.training_job_name,
            "queued_ms": self.queued_ms,
            "dequeued_ms": self.dequeued_ms,
        }
        return {k: v for k, v in out.items() if v is not None}


def classify_reason(reason: str | None, position: int | None = None) -> str | None:
    """A short, stable queue reason for people: capacity, quota, too large, or behind N
    jobs."""
    if position is not None and position > 1:
        return f"behind {position - 1} job{'s' if position > 2 else ''}"
    if not reason:
        return "waiting to be scheduled" if position is None else "next to run"
    text = reason.lower()
    if "service_environment_max_resource" in text:
        return "larger than the queue's capacity"  # it can never start; the time limit ends it
    if "quota" in text or "limit" in text:
        return "over quota"
    if "capacity" in text:
        return "waiting for capacity"
    return reason[:256]


def from_service_job(detail: Mapping[str, Any], *, observed_ms: int | None = None) -> QueueUpdate:
    """Map a DescribeServiceJob response or a state-change event's ``detail``.

    Raises ``ValueError`` for a detail that is not a service job (no ``jobId`` or an unknown
    ``status``): the caller logs and drops it.
    """
    job_id = detail.get("jobId")
    status = detail.get("status")
    if not isinstance(job_id, str) or not job_id or status not in BATCH_STATUSES:
        raise ValueError(f"not a Batch service job: jobId={job_id!r} status={status!r}")
    reason = detail.get("statusReason") if isinstance(detail.get("statusReason"), str) else None
    arn = _training_arn(detail)
    created = _ms(detail.get("createdAt"))
    dequeued = _ms(detail.get("scheduledAt"))
    started_any = arn is not None or bool(detail.get("attempts"))
    failure = None
    if status in _QUEUED:
        ledger = "Queued"
    elif status in _SIMPLE:
        ledger = _SIMPLE[status]
    elif status == "SUCCEEDED":
        ledger = "Completed"
    elif started_any:
        ledger, failure = "Failed", reason
    elif reason and reason.startswith(STOP_REASON):
        ledger = "Stopped"
    else:
        ledger, failure = "FailedToStart", reason or "the queue cancelled the job"
    if dequeued is None and ledger in ("Stopped", "FailedToStart"):
        dequeued = _ms(detail.get("stoppedAt"))
    when = observed_ms if observed_ms is not None else _latest_ms(detail)
    return QueueUpdate(
        status=ledger,
        batch_job_id=job_id,
        observed_ms=when,
        batch_status=status,
        queue_reason=classify_reason(reason) if ledger == "Queued" else None,
        status_reason=reason[:1024] if reason else None,
        failure_reason=failure[:1024] if failure else None,
        training_job_arn=arn,
        training_job_name=arn.rsplit("/", 1)[-1] if arn else None,
        queued_ms=created,
        dequeued_ms=dequeued,
    )


def waited_seconds(
    queued_ms: int | None, dequeued_ms: int | None, *, now_ms: int | None = None
) -> float | None:
    """Seconds a ledger job waited in the queue, from its ``queued_ms`` to its
    ``dequeued_ms``; for a job still waiting (no ``dequeued_ms``) up to ``now_ms`` when given.
    None when unknown."""
    start, end = queued_ms, dequeued_ms
    if end is None:
        end = now_ms
    if start is None or end is None:
        return None
    return max(0, int(end) - int(start)) / 1000


def ledger_job_name(training_job_name: str) -> str:
    """The launcher's job name for a SageMaker job Batch created (``AWSBatch<name><hex32>``);
    any other name is returned unchanged."""
    match = _BATCH_TRAINING_NAME.fullmatch(training_job_name)
    return match.group("name") if match else training_job_name


def batch_created(training_job_name: str) -> bool:
    """Whether AWS Batch named this training job (``AWSBatch<name><hex32>``)."""
    return _BATCH_TRAINING_NAME.fullmatch(training_job_name) is not None


def merge(current: Mapping[str, Any] | None, update: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes to write for ``update`` on a record ``current`` (empty: nothing to do);
    a ``None`` value means "remove the attribute".

    Both are ledger attribute maps; ``update`` carries ``status``, ``status_source``
    (``batch``, ``sagemaker`` or ``launcher``) and ``status_observed_ms``. Three groups of
    attributes, each decided on its own so the result does not depend on arrival order:
    identifiers and queue times (set once), the status group (:func:`_wins`), and Batch's own
    view (``batch_status``/``batch_status_reason``, the furthest Batch state seen).
    """
    cur = dict(current or {})
    out: dict[str, Any] = {}
    for key in _SET_ONCE:
        if update.get(key) is not None and cur.get(key) is None:
            out[key] = update[key]
    if _wins(cur, update):
        for key in _STATUS_GROUP:
            out[key] = update.get(key)  # None removes a stale reason
        if update["status"] != "Queued":
            out["queue_reason"] = None  # a reason describes a waiting job only
    if update.get("batch_status") in BATCH_STATUSES and _batch_key(update) > _batch_key(cur):
        for key in ("batch_status", "batch_status_reason", "batch_observed_ms"):
            out[key] = update.get(key)
    return {k: v for k, v in out.items() if cur.get(k) != v}


_SET_ONCE = (
    "batch_job_id",
    "training_job_arn",
    "training_job_name",
    "queued_ms",
    "dequeued_ms",
)
_STATUS_GROUP = ("status", "status_source", "status_observed_ms", "queue_reason", "failure_reason")
_SOURCE_PREFERENCE = {"launcher": 0, "batch": 1, "sagemaker": 2}
_BATCH_RANK = {s: i for i, s in enumerate(BATCH_STATUSES)} | {"FAILED": 6}


def _rank(status: str | None) -> int:
    return Status.rank_of(status)


def _status_key(record: Mapping[str, Any]) -> tuple[int, int, int]:
    return (
        _rank(record.get("status")),
        _SOURCE_PREFERENCE.get(record.get("status_source") or "", 0),
        int(record.get("status_observed_ms") or 0),
    )


def _batch_key(record: Mapping[str, Any]) -> tuple[int, int]:
    return (
        _BATCH_RANK.get(record.get("batch_status") or "", -1),
        int(record.get("batch_observed_ms") or 0),
    )


def _wins(cur: Mapping[str, Any], update: Mapping[str, Any]) -> bool:
    """Statuses are totally ordered by (rank, source, observed time) and the greatest wins;
    a terminal status yields only to a terminal one from a more authoritative source
    (SageMaker over Batch), never to a later observation from the same source."""
    new, old = _status_key(update), _status_key(cur)
    if old[0] == TERMINAL_RANK:
        return new[0] == TERMINAL_RANK and new[1] > old[1]
    return new > old


def _training_arn(detail: Mapping[str, Any]) -> str | None:
    for holder in (detail.get("latestAttempt"), *(reversed(detail.get("attempts") or []))):
        if isinstance(holder, Mapping):
            rid = holder.get("serviceResourceId")
            if isinstance(rid, Mapping) and rid.get("name") == "TrainingJobArn":
                value = rid.get("value")
                if isinstance(value, str) and value:
                    return value
    return None


def _ms(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _latest_ms(detail: Mapping[str, Any]) -> int:
    stamps = [_ms(detail.get(k)) for k in ("stoppedAt", "startedAt", "scheduledAt", "createdAt")]
    return max((s for s in stamps if s is not None), default=0)
