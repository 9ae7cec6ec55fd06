"""A sweep's progress: what the tuner says of it, as the change to its job record.

Standard library only. The tuner's word (:class:`TunerView`: ``DescribeHyperParameterTuningJob``,
its trials from ``ListTrainingJobsForHyperParameterTuningJob`` and the billable seconds of
each ended trial from ``DescribeTrainingJob``) becomes one :class:`~jobmodel.jobs.record.Change`
(:func:`sweep_change`), computed against the record as the writer reads it, so concurrent
refreshes charge each trial once:

* each trial's status, objective and, once it ended, its billable seconds and cost
  (``sweep_trials``); the cost of the trials this change charges is added to the team's month
  (``Change.spend``, or the settlement of the sweep's end) and to ``prior_cost_usd``;
* the counters, the best trial so far and the spend (``sweep``);
* the tuning job's status (``TUNER_STATUSES``). A tuning job that ended while one of its
  ended trials is not charged yet keeps the record live: the next refresh charges it first.
  A Completed sweep names its best trial as its training job and records the best trial's
  request as its ``rendered`` one (``render.trained_request``), so its model is registered
  and evaluated as a job's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract import names
from ..contract.statuses import TERMINAL_STATUSES, Status
from ..jobs.job import Job
from ..jobs.record import Change
from ..money.pricing import cost_usd
from .render import trained_request

__all__ = ["ENDED_TRIAL", "TUNER_STATUSES", "TunerView", "over_cap", "sweep_change"]

# HyperParameterTuningJobStatus -> the job's status (Deleting/DeleteFailed: not ours to read).
TUNER_STATUSES = {
    "InProgress": Status.IN_PROGRESS,
    "Completed": Status.COMPLETED,
    "Failed": Status.FAILED,
    "Stopping": Status.STOPPING,
    "Stopped": Status.STOPPED,
}
ENDED_TRIAL = frozenset({"Completed", "Failed", "Stopped"})
MAX_REASON = 1024


@dataclass(frozen=True)
class TunerView:
    """What the tuner says of a sweep at ``observed_ms``."""

    status: str
    observed_ms: int
    trials: Sequence[Mapping[str, Any]] = ()
    billable: Mapping[str, int] = field(default_factory=dict)
    best: Mapping[str, Any] | None = None
    failure_reason: str | None = None


def _objective(summary: Mapping[str, Any]) -> float | None:
    value = (summary.get("FinalHyperParameterTuningJobObjectiveMetric") or {}).get("Value")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _decoded(tuned: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in tuned.items():
        try:
            out[str(key)] = json.loads(raw)
        except (TypeError, ValueError):
            out[str(key)] = raw
    return out


def _trials(
    job: Job, seen: TunerView, price: float | None, count: int
) -> tuple[dict[str, Any], float]:
    """Each trial's entry, and the cost this change charges (trials newly ended and billed)."""
    trials = {k: dict(v) for k, v in (job.sweep_trials or {}).items()}
    stopping = bool(job.stop_requested) or job.status == str(Status.STOPPING)
    charged = 0.0
    for summary in seen.trials:
        name = str(summary["TrainingJobName"])
        entry = trials.setdefault(name, {})
        status = str(summary.get("TrainingJobStatus"))
        entry["status"] = status
        objective = _objective(summary)
        if objective is not None:
            entry["objective"] = objective
        if status == "Stopped" and "stopped_early" not in entry:
            entry["stopped_early"] = not stopping  # the tuner's early stop, not ours
        if status in ENDED_TRIAL and "cost_usd" not in entry and name in seen.billable:
            seconds = int(seen.billable[name])
            cost = cost_usd(price, count, seconds) or 0.0
            entry.update(billable_seconds=seconds, cost_usd=cost)
            charged += cost
    return trials, round(charged, 4)


def _counters(trials: Mapping[str, Mapping[str, Any]], sweep: Mapping[str, Any]) -> dict[str, int]:
    statuses = [t.get("status") for t in trials.values()]
    early = sum(
        1 for t in trials.values() if t.get("status") == "Stopped" and t.get("stopped_early")
    )
    return {
        "max": int(sweep.get("trials", {}).get("max") or 0),
        "parallel": int(sweep.get("trials", {}).get("parallel") or 0),
        "completed": statuses.count("Completed"),
        "running": statuses.count("InProgress"),
        "stopped_early": early,
        "stopped": statuses.count("Stopped") - early,
        "failed": statuses.count("Failed"),
    }


def _best(seen: TunerView) -> dict[str, Any] | None:
    best = seen.best
    if not best or _objective(best) is None:
        return None
    return {
        "trial": str(best["TrainingJobName"]),
        "objective": _objective(best),
        "hyperparameters": _decoded(best.get("TunedHyperParameters") or {}),
    }


def sweep_change(job: Job, seen: TunerView, *, price: float | None, trial_count: int) -> Change:
    """The change the tuner's word makes to the sweep's record ``job`` (as read): a
    :class:`~jobmodel.jobs.record.Change`."""
    trials, charged = _trials(job, seen, price, trial_count)
    sweep = dict(job.sweep or {})
    prior = round(float(job.prior_cost_usd or 0) + charged, 4)
    sweep["trials"] = _counters(trials, sweep)
    sweep["best"] = _best(seen)
    sweep["spend_usd"] = prior
    sweep["billable_seconds"] = sum(int(t.get("billable_seconds") or 0) for t in trials.values())
    status = TUNER_STATUSES.get(seen.status, Status.IN_PROGRESS)
    uncharged = any(t["status"] in ENDED_TRIAL and "cost_usd" not in t for t in trials.values())
    if status in TERMINAL_STATUSES and uncharged:
        status = Status.STOPPING if status == Status.STOPPED else Status.IN_PROGRESS
    also: dict[str, Any] = {names.SWEEP: sweep, names.SWEEP_TRIALS: trials, "prior_cost_usd": prior}
    observation: dict[str, Any] = {
        "status": str(status),
        "status_source": "sagemaker",
        "status_observed_ms": seen.observed_ms,
        "sagemaker_observed_ms": seen.observed_ms,
        "billable_seconds": sweep["billable_seconds"],  # its trials' (charged as each ends)
    }
    if status == Status.FAILED and seen.failure_reason:
        observation["failure_reason"] = seen.failure_reason[:MAX_REASON]
    elif status in (Status.STOPPING, Status.STOPPED) and job.failure_reason:
        # The tuner gives a stop no reason; the one recorded with the launcher's stop (the
        # cap) stays, instead of the tuner's word removing it.
        observation["failure_reason"] = job.failure_reason
    if status == Status.COMPLETED and sweep["best"] is not None:
        best = sweep["best"]["trial"]
        tuned = (seen.best or {}).get("TunedHyperParameters") or {}
        request = trained_request(json.loads(job.rendered or "{}"), best, tuned)
        also.update(
            training_job_name=best,
            rendered=json.dumps(request, sort_keys=True),
            final_metrics={sweep["objective"]["metric"]: sweep["best"]["objective"]},
        )
    return Change(observation=observation, also=also, spend=charged or None)


def over_cap(job: Job) -> bool:
    """Whether a live sweep's charged spend reached its cap (it is then stopped)."""
    sweep = job.sweep or {}
    live = job.status not in TERMINAL_STATUSES and job.status != str(Status.STOPPING)
    cap = sweep.get("cap_usd")
    return bool(live and cap is not None and float(sweep.get("spend_usd") or 0) >= float(cap))
