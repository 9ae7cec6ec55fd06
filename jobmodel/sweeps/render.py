"""A sweep's ``CreateHyperParameterTuningJob`` request, from its trial's training request.

A trial is the job a submit of the same template and fields would start: the request is
:func:`jobmodel.render.render_attempt`'s (a plain step), moved into the tuner's
``TrainingJobDefinition``. What the definition has no field for is either refused (the
template cannot be swept: ``ValidationError`` on ``template``, naming the setting and why) or
dropped and listed (:func:`not_carried`, shown by a dry run):

* refused: a capacity chain's instance preferences or training plan, the Debugger hook and
  the profiler (asked for by the template);
* dropped: the checkpoint location (every trial of a tuning job has the one definition, so
  they would share one checkpoint prefix and each new trial would resume from another's
  checkpoint: a spot trial that is interrupted starts again), and with it our PID-1 init
  (``ContainerEntrypoint``/``ContainerArguments``: the tuner's algorithm specification has no
  such fields; a trial's stop, early or by the sweep's stop, then ends it without the last
  checkpoint the init exists to let it write, which a trial has no use for); TensorBoard
  output, the infrastructure health check, SageMaker Metrics' time series and the explicit
  profiler switch-off.

Every ranged hyperparameter leaves the static ones; categorical values are JSON-encoded as
every other hyperparameter is (``render.encode_hyperparameters``), numbers as SageMaker
writes them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from ..contract.errors import ValidationError
from ..contract.names import JOB_NAME_TAG_KEY
from .request import ParameterRange, SweepRequest

__all__ = [
    "OBJECTIVE_HYPERPARAMETER",
    "not_carried",
    "render_tuning_job",
    "trained_request",
]

# What the tuner adds to each trial's hyperparameters: the objective's metric name.
OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"
# The training request's fields a TrainingJobDefinition carries as they are.
_CARRIED = (
    "RoleArn",
    "InputDataConfig",
    "VpcConfig",
    "OutputDataConfig",
    "ResourceConfig",
    "StoppingCondition",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "RetryStrategy",
    "Environment",
)
_DROPPED = {
    "CheckpointConfig": "checkpoints (the trials would share one checkpoint prefix)",
    "ContainerEntrypoint": "the PID-1 init that passes a stop to the script (the tuner has no "
    "ContainerEntrypoint; a stopped trial keeps nothing)",
    "TensorBoardOutputConfig": "TensorBoard output",
    "InfraCheckConfig": "the infrastructure health check",
    "EnableSageMakerMetricsTimeSeries": "SageMaker Metrics' time series",
    "ProfilerConfig": "the profiler switch-off (SageMaker's default applies)",
}
_REFUSED = {
    "InstancePreferences": "a capacity chain's instance preferences are not a tuner setting",
    "TrainingPlanArn": "a training plan is not a tuner setting",
    "DebugHookConfig": "the tuner cannot carry its Debugger hook (DebugHookConfig)",
    "ProfilerConfig": "the tuner cannot carry its profiler (ProfilerConfig)",
}


def _refused(attempt: Mapping[str, Any]) -> str | None:
    """Why a trial's request cannot be a tuner's definition (None: it can)."""
    algorithm = attempt.get("AlgorithmSpecification") or {}
    resources = attempt.get("ResourceConfig") or {}
    present = set(algorithm) | set(resources) | set(attempt)
    for key, why in _REFUSED.items():
        if key == "ProfilerConfig":
            if (attempt.get(key) or {}).get("S3OutputPath"):
                return why
        elif key in present:
            return why
    return None


def not_carried(attempt: Mapping[str, Any]) -> list[str]:
    """The template's settings a sweep's trials run without (a dry run shows them)."""
    algorithm = attempt.get("AlgorithmSpecification") or {}
    present = set(attempt) | set(algorithm)
    return [what for key, what in _DROPPED.items() if key in present]


def _value(value: float, kind: str) -> str:
    return str(int(value)) if kind == "integer" else repr(float(value))


def _ranges(ranges: tuple[ParameterRange, ...]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in ranges:
        if r.kind == "categorical":
            entry: dict[str, Any] = {"Name": r.name, "Values": [json.dumps(v) for v in r.values]}
            out.setdefault("CategoricalParameterRanges", []).append(entry)
            continue
        assert r.low is not None and r.high is not None
        entry = {
            "Name": r.name,
            "MinValue": _value(r.low, r.kind),
            "MaxValue": _value(r.high, r.kind),
            "ScalingType": r.scale,
        }
        key = "IntegerParameterRanges" if r.kind == "integer" else "ContinuousParameterRanges"
        out.setdefault(key, []).append(entry)
    return out


def render_tuning_job(
    sweep: SweepRequest, attempt: Mapping[str, Any], *, name: str
) -> dict[str, Any]:
    """The ``create_hyper_parameter_tuning_job`` kwargs of ``sweep`` whose trial is
    ``attempt`` (a plain step's ``render_attempt``); ``name``: the tuning job's (the sweep's
    job name). ``ValidationError`` on ``template`` when the template cannot be swept."""
    why = _refused(attempt)
    if why is not None:
        raise ValidationError("template", f"template {sweep.template} cannot be swept: {why}")
    algorithm = attempt["AlgorithmSpecification"]
    definition: dict[str, Any] = {
        "StaticHyperParameters": {
            k: v for k, v in attempt.get("HyperParameters", {}).items() if k not in sweep.ranged
        },
        "AlgorithmSpecification": {
            k: algorithm[k]
            for k in ("TrainingImage", "TrainingInputMode", "MetricDefinitions")
            if k in algorithm
        },
    }
    definition.update({k: attempt[k] for k in _CARRIED if k in attempt})
    limits: dict[str, Any] = {"MaxParallelTrainingJobs": sweep.max_parallel}
    if sweep.strategy != "Grid":  # a grid runs each combination once
        limits["MaxNumberOfTrainingJobs"] = sweep.max_trials
    config: dict[str, Any] = {
        "Strategy": sweep.strategy,
        "HyperParameterTuningJobObjective": {
            "Type": sweep.direction,
            "MetricName": sweep.objective,
        },
        "ResourceLimits": limits,
        "ParameterRanges": _ranges(sweep.ranges),
        "TrainingJobEarlyStoppingType": sweep.early_stopping,
    }
    if sweep.target is not None:
        config["TuningJobCompletionCriteria"] = {"TargetObjectiveMetricValue": sweep.target}
    tags = [t for t in attempt.get("Tags", []) if t["Key"] != JOB_NAME_TAG_KEY]
    # The tuner gives its tags to every trial: the trials' events name their sweep by it.
    tags.append({"Key": JOB_NAME_TAG_KEY, "Value": name})
    return {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobConfig": config,
        "TrainingJobDefinition": definition,
        "Tags": tags,
    }


def trained_request(
    trial_request: Mapping[str, Any], trial: str, tuned: Mapping[str, str]
) -> dict[str, Any]:
    """The training request the trial ``trial`` ran with: the sweep's trial request (what a
    submit would have started, the sweep record's ``rendered``) with the tuned hyperparameters
    (``tuned``, as the tuner reports them) and the trial's name. A Completed sweep's record
    holds it, so its best model is registered and evaluated as a job's is."""
    out = copy.deepcopy(dict(trial_request))
    out["TrainingJobName"] = trial
    hps = dict(out.get("HyperParameters") or {})
    hps.update({k: v for k, v in tuned.items() if k != OBJECTIVE_HYPERPARAMETER})
    out["HyperParameters"] = hps
    return out
