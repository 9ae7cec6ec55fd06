"""SageMaker training-job state -> ledger fields, and how they merge with the ledger's record.

Standard library only. The one copy of how a ``SageMaker Training Job State Change`` event's
detail (or a DescribeTrainingJob response, which has the same fields) becomes ledger
attributes, used by the job-events function; the ``ftl`` client counts spot interruptions
with :func:`count_interruptions` too.

Fields (:func:`from_training_job`):

==========================  ===================================================================
``status``                  ``TrainingJobStatus`` (one of SageMaker's five)
``secondary_status``        ``SecondaryStatus`` (at most 64 characters)
``failure_reason``          ``FailureReason``, cut to 1024 characters
``billable_seconds``,       ``BillableTimeInSeconds``, ``TrainingTimeInSeconds``: whole numbers
``training_seconds``        from 0 to 100,000,000 (numeric strings and integral floats accepted)
``spot_savings_percent``    (1 - billable / training) x 100, one decimal, for managed spot jobs
``final_metrics``           ``{name: value}`` from ``FinalMetricDataList`` (non-finite values
                            are left out: DynamoDB cannot store them)
``spot_interruptions``      how many times ``SecondaryStatusTransitions`` entered
                            ``Interrupted`` (:func:`count_interruptions`)
``training_job_name``,      the SageMaker job's name and ARN (``job_arn`` too: the contract's
``training_job_arn``        job ARN is the training job's)
``status_source``,          ``sagemaker`` and when SageMaker observed this state
``status_observed_ms``,     (``LastModifiedTime``, else the event's time), for
``sagemaker_observed_ms``   :func:`merge`
==========================  ===================================================================

Merge (:func:`merge`): the status group, identifiers and Batch's view follow
``queue_state.merge`` (SageMaker's spelling of ``training_job_name`` replaces the lower-case
one Batch's ARN gives); SageMaker's own view (:data:`SAGEMAKER_GROUP`) is replaced as a whole by
a newer SageMaker observation, and never changes once the job ended with a status SageMaker
reported. So events from both sources give the same record in any order, any number of times.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .. import _rules as R
from ..contract.statuses import SAGEMAKER_STATUSES, TERMINAL_STATUSES
from . import queue_state

__all__ = [
    "EVENT_DETAIL_TYPE",
    "INTERRUPTED",
    "SAGEMAKER_GROUP",
    "SOURCE",
    "count_interruptions",
    "epoch_ms",
    "final_metrics",
    "from_training_job",
    "merge",
    "spot_interruptions",
]

EVENT_DETAIL_TYPE = "SageMaker Training Job State Change"  # EventBridge, source aws.sagemaker
SOURCE = "sagemaker"  # the ledger's ``status_source`` for SageMaker's observations
INTERRUPTED = "Interrupted"  # the secondary status of a spot job that lost its capacity
MAX_SECONDS = 100_000_000  # ~3 years; SageMaker's own limit is 28 days of runtime
MAX_REASON = 1024  # SageMaker's own limit for FailureReason
MAX_SECONDARY = 64
MAX_METRICS = 100  # SageMaker allows 40 metric definitions per job
MAX_METRIC_NAME = 255
_INSTANCE_TYPE_RE = re.compile(r"ml\.[a-z0-9-]{2,20}\.[a-z0-9]{4,12}")
# SageMaker's view of a job, replaced as a whole by a newer SageMaker observation.
SAGEMAKER_GROUP = (
    "secondary_status",
    "billable_seconds",
    "training_seconds",
    "spot_savings_percent",
    "final_metrics",
    "spot_interruptions",
    "sagemaker_observed_ms",
)


def count_interruptions(statuses: Iterable[str | None]) -> int:
    """How many times a sequence of secondary statuses entered ``Interrupted``."""
    count, previous = 0, None
    for status in statuses:
        if status == INTERRUPTED and previous != INTERRUPTED:
            count += 1
        previous = status
    return count


def spot_interruptions(transitions: Any) -> int:
    """Interruptions in a ``SecondaryStatusTransitions`` list (``ValueError`` if malformed)."""
    if not isinstance(transitions, list):
        raise ValueError("SecondaryStatusTransitions is not a list")
    statuses = []
    for entry in transitions:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("Status"), str):
            raise ValueError("SecondaryStatusTransitions entries need a Status string")
        statuses.append(entry["Status"])
    return count_interruptions(statuses)


def final_metrics(metric_list: Any) -> dict[str, float]:
    """``FinalMetricDataList`` as ``{name: value}`` (``ValueError`` if malformed)."""
    if not isinstance(metric_list, list) or len(metric_list) > MAX_METRICS:
        raise ValueError(f"FinalMetricDataList is not a list of at most {MAX_METRICS} metrics")
    out: dict[str, float] = {}
    for entry in metric_list:
        name = entry.get("MetricName") if isinstance(entry, Mapping) else None
        value = entry.get("Value") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_METRIC_NAME:
            raise ValueError("FinalMetricDataList entries need a MetricName of 1-255 characters")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"FinalMetricDataList value of {name[:64]!r} is not a number")
        if math.isfinite(value):
            out[name] = float(value)
    return out


def seconds(detail: Mapping[str, Any], key: str) -> int | None:
    """A whole number of seconds from 0 to :data:`MAX_SECONDS` (``ValueError`` otherwise)."""
    value = detail.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} is not a number")
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{key} must be a whole number of seconds from 0 to {MAX_SECONDS}")
    return value


def from_training_job(
    detail: Mapping[str, Any], *, fallback_ms: int | None = None
) -> dict[str, Any]:
    """The ledger fields of an event detail or DescribeTrainingJob response.

    ``fallback_ms`` is when the state was observed if the detail has no ``LastModifiedTime``
    (the event's ``time``). Raises ``ValueError`` naming the first malformed field.
    """
    name = detail.get("TrainingJobName")
    if not isinstance(name, str) or not R.JOB_NAME_RE.fullmatch(name):
        raise ValueError("TrainingJobName is not a training job name")
    status = detail.get("TrainingJobStatus")
    if status not in SAGEMAKER_STATUSES:
        raise ValueError(f"TrainingJobStatus must be one of {', '.join(SAGEMAKER_STATUSES)}")
    observed = epoch_ms(detail.get("LastModifiedTime"))
    observed = observed if observed is not None else int(fallback_ms or 0)
    fields: dict[str, Any] = {
        "status": status,
        "status_source": SOURCE,
        "status_observed_ms": observed,
        "sagemaker_observed_ms": observed,
        "training_job_name": name,
    }
    arn = detail.get("TrainingJobArn")
    if isinstance(arn, str) and arn.startswith("arn:") and len(arn) <= 256:
        fields["training_job_arn"] = fields["job_arn"] = arn
    secondary = detail.get("SecondaryStatus")
    if secondary is not None:
        if not isinstance(secondary, str) or len(secondary) > MAX_SECONDARY:
            raise ValueError("SecondaryStatus is not a short string")
        fields["secondary_status"] = secondary
    if detail.get("FailureReason"):
        fields["failure_reason"] = str(detail["FailureReason"])[:MAX_REASON]
    fields.update(_times(detail))
    resources = detail.get("ResourceConfig")
    if isinstance(resources, Mapping):
        # Instance preferences: the type and count SageMaker chose (billed for these).
        selected = resources.get("SelectedInstanceType")
        if isinstance(selected, str) and _INSTANCE_TYPE_RE.fullmatch(selected):
            fields["selected_instance_type"] = selected
        count = resources.get("SelectedInstanceCount")
        if type(count) is int and 0 < count <= 1000:
            fields["selected_instance_count"] = count
    if detail.get("FinalMetricDataList") is not None:
        metrics = final_metrics(detail["FinalMetricDataList"])
        if metrics:
            fields["final_metrics"] = metrics
    if detail.get("SecondaryStatusTransitions") is not None:
        fields["spot_interruptions"] = spot_interruptions(detail["SecondaryStatusTransitions"])
    return fields


def _times(detail: Mapping[str, Any]) -> dict[str, Any]:
    billable = seconds(detail, "BillableTimeInSeconds")
    training = seconds(detail, "TrainingTimeInSeconds")
    out: dict[str, Any] = {}
    if billable is not None:
        out["billable_seconds"] = billable
    if training is not None:
        out["training_seconds"] = training
    if billable is not None and training and detail.get("EnableManagedSpotTraining") is True:
        out["spot_savings_percent"] = round((1 - billable / training) * 100, 1)
    return out


def merge(current: Mapping[str, Any] | None, update: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes to write for ``update`` (a Batch or SageMaker observation in ledger
    terms) on the record ``current``; empty when there is nothing to do, ``None`` values
    mean "remove the attribute". Order-independent and idempotent (module docstring)."""
    cur = dict(current or {})
    out = queue_state.merge(cur, update)
    if update.get("job_arn") is not None and cur.get("job_arn") is None:
        out["job_arn"] = update["job_arn"]
    name, known = update.get("training_job_name"), cur.get("training_job_name")
    if update.get("status_source") == SOURCE and name and known and known.lower() == name.lower():
        # Set once, but SageMaker's spelling beats the lower-case one read from an ARN.
        out["training_job_name"] = name
    if update.get("status_source") == SOURCE and _newer(cur, update) and not _settled(cur):
        for key in SAGEMAKER_GROUP:
            out[key] = update.get(key)
    return {k: v for k, v in out.items() if cur.get(k) != v}


def _newer(cur: Mapping[str, Any], update: Mapping[str, Any]) -> bool:
    seen = cur.get("sagemaker_observed_ms")
    return int(update.get("sagemaker_observed_ms") or 0) > (-1 if seen is None else int(seen))


def _settled(cur: Mapping[str, Any]) -> bool:
    """The job ended with a status SageMaker reported: its view of the job is final."""
    return cur.get("status") in TERMINAL_STATUSES and cur.get("status_source") == SOURCE


def epoch_ms(value: Any) -> int | None:
    """Epoch milliseconds from an event's number (or ISO 8601 text) or a DescribeTrainingJob
    datetime; None for anything else."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000) if value.tzinfo else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value) if value >= 0 else None
