"""What the tuner stand-in (``sandbox/tuner.py``) holds, and how the API shows it.

:class:`Tuning` is a tuning job and :class:`Trial` one of its training jobs. The views answer
in botocore's output shapes: :func:`describe_tuning` (DescribeHyperParameterTuningJob),
:func:`summary` (a ``HyperParameterTrainingJobSummary``: BestTrainingJob and
ListTrainingJobsForHyperParameterTuningJob), :func:`describe_trial` (DescribeTrainingJob)
and :func:`state_event` (the EventBridge event of a tuning job's state change). Times are
``datetime`` here; the WSGI layer writes them as the JSON protocol's epoch seconds.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sandbox.tuner_checks import error
from sandbox.tuner_space import Range

__all__ = [
    "Trial",
    "Tuning",
    "describe_trial",
    "describe_tuning",
    "page",
    "state_event",
    "summary",
]

ENDED = ("Completed", "Failed", "Stopped")
DETAIL_TYPE = "SageMaker HyperParameter Tuning Job State Change"
# DescribeTrainingJob echoes these members of the training-job definition when given.
_ECHOED = (
    "InputDataConfig",
    "VpcConfig",
    "CheckpointConfig",
    "Environment",
    "EnableManagedSpotTraining",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "RetryStrategy",
)


@dataclass
class Trial:
    """One training job a tuning job launched."""

    name: str
    arn: str
    index: int
    tuned: dict[str, str]
    created: datetime
    modified: datetime
    status: str = "InProgress"
    secondary: str = "Starting"
    started: datetime | None = None
    ended: datetime | None = None
    objective: float | None = None
    objective_status: str = "Pending"  # Pending | Succeeded | Failed
    billable: int | None = None
    reason: str | None = None

    @property
    def running(self) -> bool:
        return self.status == "InProgress"


@dataclass
class Tuning:
    """One tuning job: its request as given, its search space and its trials."""

    name: str
    arn: str
    request: dict[str, Any]
    created: datetime
    modified: datetime
    ranges: list[Range]
    rng: random.Random
    grid: list[dict[str, str]] | None  # Grid: the combinations, one per trial
    limit: int  # how many trials it may start
    status: str = "InProgress"
    ended: datetime | None = None
    reason: str | None = None
    halted: str | None = None  # the completion criterion met: no trial starts any more
    trials: list[Trial] = field(default_factory=list)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.request["HyperParameterTuningJobConfig"])

    @property
    def definition(self) -> dict[str, Any]:
        return dict(self.request["TrainingJobDefinition"])

    @property
    def metric(self) -> str:
        return str(self.config["HyperParameterTuningJobObjective"]["MetricName"])

    @property
    def maximize(self) -> bool:
        return bool(self.config["HyperParameterTuningJobObjective"]["Type"] == "Maximize")

    def better(self, a: float, b: float) -> bool:
        """Whether objective ``a`` is strictly better than ``b``."""
        return a > b if self.maximize else a < b

    def running(self) -> list[Trial]:
        return [t for t in self.trials if t.running]

    def succeeded(self) -> list[Trial]:
        """Trials with an objective, in the order they ended."""
        done = [t for t in self.trials if t.objective_status == "Succeeded"]
        return sorted(done, key=lambda t: (t.ended or t.created, t.index))

    def best(self) -> Trial | None:
        best: Trial | None = None
        for t in self.succeeded():
            if best is None or self.better(_value(t), _value(best)):
                best = t
        return best

    def not_improving(self) -> int:
        """Trials with an objective that ended since the best objective last improved."""
        best: float | None = None
        since = 0
        for t in self.succeeded():
            if best is None or self.better(_value(t), best):
                best, since = _value(t), 0
            else:
                since += 1
        return since


def _value(trial: Trial) -> float:
    return float(trial.objective if trial.objective is not None else 0.0)


def summary(job: Tuning, trial: Trial) -> dict[str, Any]:
    """The trial as a HyperParameterTrainingJobSummary."""
    out: dict[str, Any] = {
        "TrainingJobName": trial.name,
        "TrainingJobArn": trial.arn,
        "TuningJobName": job.name,
        "CreationTime": trial.created,
        "TrainingJobStatus": trial.status,
        "TunedHyperParameters": dict(trial.tuned),
        "ObjectiveStatus": trial.objective_status,
    }
    if trial.started is not None:
        out["TrainingStartTime"] = trial.started
    if trial.ended is not None:
        out["TrainingEndTime"] = trial.ended
    if trial.reason:
        out["FailureReason"] = trial.reason
    if trial.objective_status == "Succeeded":
        out["FinalHyperParameterTuningJobObjectiveMetric"] = {
            "MetricName": job.metric,
            "Value": _value(trial),
        }
    return out


_SORT_KEYS: dict[str, Callable[[Trial], Any]] = {
    "Name": lambda t: t.name,
    "CreationTime": lambda t: (t.created, t.index),
    "Status": lambda t: (t.status, t.name),
    "FinalObjectiveMetricValue": lambda t: (t.objective, t.name),
}
_LIST = "ListTrainingJobsForHyperParameterTuningJob"


def page(job: Tuning, params: dict[str, Any]) -> dict[str, Any]:
    """ListTrainingJobsForHyperParameterTuningJob's answer: the trials with ``StatusEquals``,
    sorted by ``SortBy`` (default Name; FinalObjectiveMetricValue lists only trials with an
    objective) in ``SortOrder`` (default Ascending), ``MaxResults`` (default 10) a page."""
    trials = list(job.trials)
    if "StatusEquals" in params:
        trials = [t for t in trials if t.status == params["StatusEquals"]]
    sort_by = params.get("SortBy", "Name")
    if sort_by == "FinalObjectiveMetricValue":
        trials = [t for t in trials if t.objective_status == "Succeeded"]
    trials.sort(key=_SORT_KEYS[sort_by], reverse=params.get("SortOrder") == "Descending")
    start = _offset(params.get("NextToken"), job.name)
    end = start + int(params.get("MaxResults", 10))
    out: dict[str, Any] = {"TrainingJobSummaries": [summary(job, t) for t in trials[start:end]]}
    if end < len(trials):
        out["NextToken"] = base64.urlsafe_b64encode(json.dumps([job.name, end]).encode()).decode()
    return out


def _offset(token: str | None, tuning: str) -> int:
    if not token:
        return 0
    try:
        name, offset = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError):
        name, offset = None, 0
    if name != tuning or not isinstance(offset, int) or offset < 0:
        raise error("ValidationException", "Invalid pagination token (NextToken)", _LIST)
    return offset


def describe_tuning(job: Tuning, now: datetime) -> dict[str, Any]:
    """DescribeHyperParameterTuningJob's answer for ``job`` at ``now``."""
    statuses = [t.status for t in job.trials]
    objectives = [t.objective_status for t in job.trials]
    out: dict[str, Any] = {
        "HyperParameterTuningJobName": job.name,
        "HyperParameterTuningJobArn": job.arn,
        "HyperParameterTuningJobConfig": job.config,
        "TrainingJobDefinition": job.definition,
        "HyperParameterTuningJobStatus": job.status,
        "CreationTime": job.created,
        "LastModifiedTime": job.modified,
        "TrainingJobStatusCounters": {
            "Completed": statuses.count("Completed"),
            "InProgress": statuses.count("InProgress") + statuses.count("Stopping"),
            "RetryableError": 0,
            "NonRetryableError": statuses.count("Failed"),
            "Stopped": statuses.count("Stopped"),
        },
        "ObjectiveStatusCounters": {
            "Succeeded": objectives.count("Succeeded"),
            "Pending": objectives.count("Pending"),
            "Failed": objectives.count("Failed"),
        },
        "ConsumedResources": {
            "RuntimeInSeconds": int(((job.ended or now) - job.created).total_seconds())
        },
    }
    if job.ended is not None:
        out["HyperParameterTuningEndTime"] = job.ended
    best = job.best()
    if best is not None:
        out["BestTrainingJob"] = summary(job, best)
    if "WarmStartConfig" in job.request:
        out["WarmStartConfig"] = job.request["WarmStartConfig"]
    if job.reason:
        out["FailureReason"] = job.reason
    criteria = job.config.get("TuningJobCompletionCriteria") or {}
    if "BestObjectiveNotImproving" in criteria:
        out["TuningJobCompletionDetails"] = {
            "NumberOfTrainingJobsObjectiveNotImproving": job.not_improving()
        }
    return copy.deepcopy(out)  # nothing the caller changes reaches the stand-in


def _resource_config(definition: dict[str, Any]) -> dict[str, Any]:
    """The trial's ResourceConfig: the definition's, or the first instance configuration of
    its HyperParameterTuningResourceConfig (the stand-in always uses the first)."""
    if "ResourceConfig" in definition:
        return dict(definition["ResourceConfig"])
    tuning = definition["HyperParameterTuningResourceConfig"]
    first = (tuning.get("InstanceConfigs") or [tuning])[0]
    keys = ("InstanceType", "InstanceCount", "VolumeSizeInGB")
    out = {k: first[k] for k in keys if k in first}
    if "VolumeKmsKeyId" in tuning:
        out["VolumeKmsKeyId"] = tuning["VolumeKmsKeyId"]
    return out


def describe_trial(job: Tuning, trial: Trial) -> dict[str, Any]:
    """DescribeTrainingJob's answer for one of the tuning job's trials."""
    definition = job.definition
    hyperparameters = dict(definition.get("StaticHyperParameters") or {})
    hyperparameters.update(trial.tuned)
    hyperparameters["_tuning_objective_metric"] = job.metric
    out: dict[str, Any] = {
        "TrainingJobName": trial.name,
        "TrainingJobArn": trial.arn,
        "TuningJobArn": job.arn,
        "TrainingJobStatus": trial.status,
        "SecondaryStatus": trial.secondary,
        "HyperParameters": hyperparameters,
        "AlgorithmSpecification": definition["AlgorithmSpecification"],
        "RoleArn": definition["RoleArn"],
        "OutputDataConfig": definition["OutputDataConfig"],
        "ResourceConfig": _resource_config(definition),
        "StoppingCondition": definition["StoppingCondition"],
        "CreationTime": trial.created,
        "LastModifiedTime": trial.modified,
    }
    out.update({k: definition[k] for k in _ECHOED if k in definition})
    if trial.status == "Completed":
        path = str(definition["OutputDataConfig"]["S3OutputPath"]).rstrip("/")
        out["ModelArtifacts"] = {"S3ModelArtifacts": f"{path}/{trial.name}/output/model.tar.gz"}
    if trial.started is not None:
        out["TrainingStartTime"] = trial.started
    if trial.ended is not None:
        out["TrainingEndTime"] = trial.ended
        out["TrainingTimeInSeconds"] = out["BillableTimeInSeconds"] = trial.billable or 0
    if trial.objective_status == "Succeeded":
        out["FinalMetricDataList"] = [
            {"MetricName": job.metric, "Value": _value(trial), "Timestamp": trial.ended}
        ]
    if trial.reason:
        out["FailureReason"] = trial.reason
    return copy.deepcopy(out)


def _epoch_ms(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, dict):
        return {k: _epoch_ms(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_epoch_ms(v) for v in value]
    return value


def state_event(job: Tuning, now: datetime, account: str, region: str) -> dict[str, Any]:
    """The EventBridge event SageMaker sends when a tuning job's status changes: the detail
    is its description, times in epoch milliseconds."""
    return {
        "version": "0",
        "id": f"{job.name}-{job.status}",
        "detail-type": DETAIL_TYPE,
        "source": "aws.sagemaker",
        "account": account,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [job.arn],
        "detail": _epoch_ms(describe_tuning(job, now)),
    }
