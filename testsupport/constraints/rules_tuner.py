"""A sweep's ``CreateHyperParameterTuningJob`` (issue 37): the tuner's documented cross-field
rules, each a check and a planted violation (``rules.RULES`` holds them), and the trial the
tuner starts from it, checked as the ``CreateTrainingJob`` it is (``check.ConstraintsCheck``).

botocore's model limits each field of the request (``model``); what it does not say per field:
a scaling type's domain, Hyperband's own early stopping, the range ends' order and types,
that a hyperparameter is either static or ranged, the parallel trials within the total, the
environment's 48 variables across definitions, and the objective among the metrics the
definition's algorithm emits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

Params = Mapping[str, Any]

# What the tuner adds to each trial's hyperparameters (the objective metric's name), and how it
# names a trial: ``<tuning job>-<NNN>-<8 hex>``.
OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"
MAX_ENVIRONMENT = 48


def _definitions(p: Params) -> list[Mapping[str, Any]]:
    one = p.get("TrainingJobDefinition")
    return [*([one] if one else []), *(p.get("TrainingJobDefinitions") or [])]


def _config(p: Params) -> Mapping[str, Any]:
    return p.get("HyperParameterTuningJobConfig") or {}


_KINDS = ("IntegerParameterRanges", "ContinuousParameterRanges", "CategoricalParameterRanges")


def _ranges_of(holder: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(kind, range) of one ``ParameterRanges``."""
    for kind in _KINDS:
        for r in holder.get(kind) or []:
            yield kind, r


def _ranges(p: Params) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(kind, range) of every range of the job's config and of each definition."""
    yield from _ranges_of(_config(p).get("ParameterRanges") or {})
    for d in _definitions(p):
        yield from _ranges_of(d.get("HyperParameterRanges") or {})


def _number(kind: str, text: Any) -> float | None:
    try:
        value = int(text) if kind == "IntegerParameterRanges" else float(text)
    except (TypeError, ValueError):
        return None
    return float(value) if math.isfinite(value) else None


# ----------------------------------------------------------------- scaling types
def scaling(p: Params) -> str | None:
    for kind, r in _ranges(p):
        if kind == "CategoricalParameterRanges":
            continue
        low, high = _number(kind, r.get("MinValue")), _number(kind, r.get("MaxValue"))
        scale = r.get("ScalingType", "Auto")
        if low is None or high is None:
            continue  # the range ends' rule says why
        if scale == "Logarithmic" and low <= 0:
            return f"{r['Name']}: Logarithmic scaling needs values greater than 0 (min {low})"
        if scale == "ReverseLogarithmic":
            if kind != "ContinuousParameterRanges":
                return f"{r['Name']}: ReverseLogarithmic is a continuous range's scale"
            if not (0 <= low and high < 1):
                return f"{r['Name']}: ReverseLogarithmic needs 0 <= x < 1 ({low}..{high})"
    return None


def plant_scaling(p: dict[str, Any]) -> None:
    ranges = p["HyperParameterTuningJobConfig"].setdefault("ParameterRanges", {})
    ranges.setdefault("ContinuousParameterRanges", []).append(
        {"Name": "planted", "MinValue": "0.0", "MaxValue": "1.5", "ScalingType": "Logarithmic"}
    )


# ----------------------------------------------------------------- early stopping
def early_stopping(p: Params) -> str | None:
    config = _config(p)
    stopping = config.get("TrainingJobEarlyStoppingType", "Off")
    if config.get("Strategy") == "Hyperband" and stopping != "Off":
        return f"Hyperband stops trials itself: TrainingJobEarlyStoppingType {stopping}, not Off"
    return None


def plant_early_stopping(p: dict[str, Any]) -> None:
    p["HyperParameterTuningJobConfig"].update(
        Strategy="Hyperband", TrainingJobEarlyStoppingType="Auto"
    )


# ----------------------------------------------------------------- ranges and limits
def ranges_and_limits(p: Params) -> str | None:
    seen: set[str] = set()
    for kind, r in _ranges(p):
        name = r.get("Name")
        if name in seen:
            return f"{name} is ranged twice"
        seen.add(name)
        if kind == "CategoricalParameterRanges":
            values = r.get("Values") or []
            if len(set(values)) != len(values):
                return f"{name}: categorical values repeat"
            continue
        low, high = _number(kind, r.get("MinValue")), _number(kind, r.get("MaxValue"))
        if low is None or high is None:
            return f"{name}: {kind} ends must be {kind[:-15].lower()} numbers"
        if low > high:
            return f"{name}: MinValue {low} above MaxValue {high}"
    for d in _definitions(p):
        both = sorted(seen & set(d.get("StaticHyperParameters") or {}))
        if both:
            return f"{', '.join(both)} both static and ranged"
    if _config(p).get("Strategy") == "Grid" and any(
        kind != "CategoricalParameterRanges" for kind, _ in _ranges(p)
    ):
        return "a Grid search takes categorical ranges only"
    limits = _config(p).get("ResourceLimits") or {}
    total, parallel = limits.get("MaxNumberOfTrainingJobs"), limits.get("MaxParallelTrainingJobs")
    if total is not None and parallel is not None and parallel > total:
        return f"MaxParallelTrainingJobs {parallel} above MaxNumberOfTrainingJobs {total}"
    env = sum(len(d.get("Environment") or {}) for d in _definitions(p))
    if env > MAX_ENVIRONMENT:
        return f"{env} environment variables across the definitions (max {MAX_ENVIRONMENT})"
    return None


def plant_ranges_and_limits(p: dict[str, Any]) -> None:
    limits = p["HyperParameterTuningJobConfig"]["ResourceLimits"]
    limits["MaxNumberOfTrainingJobs"] = 2
    limits["MaxParallelTrainingJobs"] = 3


# ----------------------------------------------------------------- the objective
def objective(p: Params) -> str | None:
    metric = (_config(p).get("HyperParameterTuningJobObjective") or {}).get("MetricName")
    for d in _definitions(p):
        algorithm = d.get("AlgorithmSpecification") or {}
        if "TrainingImage" not in algorithm:
            continue  # a built-in algorithm's metrics are its own
        own = (d.get("TuningObjective") or {}).get("MetricName") or metric
        names = [m.get("Name") for m in algorithm.get("MetricDefinitions") or []]
        if own not in names:
            return f"objective {own!r} is not among the definition's metrics {names}"
    return None


def plant_objective(p: dict[str, Any]) -> None:
    p["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]["MetricName"] = (
        "planted_metric"
    )


# ----------------------------------------------------------------- the trials
def _extreme(kind: str, r: Mapping[str, Any]) -> str:
    """A value the tuner may give a trial: the longest of the range's (its ends, each value)."""
    if kind == "CategoricalParameterRanges":
        return str(max(r.get("Values") or [""], key=len))
    return str(max(str(r.get("MinValue", "")), str(r.get("MaxValue", "")), key=len))


def trials(p: Params) -> list[dict[str, Any]]:
    """The ``CreateTrainingJob`` of each definition's first trial as the tuner starts it: the
    definition's training fields, its static hyperparameters with every ranged one (at its
    longest value) and the objective's name, the trial's name and the tuning job's tags."""
    name = str(p.get("HyperParameterTuningJobName", ""))
    metric = (_config(p).get("HyperParameterTuningJobObjective") or {}).get("MetricName", "")
    config_ranges = _config(p).get("ParameterRanges") or {}
    out = []
    for i, d in enumerate(_definitions(p), start=1):
        own = d.get("HyperParameterRanges") or config_ranges
        ranged = {r["Name"]: _extreme(kind, r) for kind, r in _ranges_of(own)}
        algorithm = {
            k: v
            for k, v in (d.get("AlgorithmSpecification") or {}).items()
            if k in ("TrainingImage", "AlgorithmName", "TrainingInputMode", "MetricDefinitions")
        }
        trial: dict[str, Any] = {
            "TrainingJobName": f"{name}-{i:03d}-0123abcd",
            "AlgorithmSpecification": algorithm,
            "HyperParameters": {
                **(d.get("StaticHyperParameters") or {}),
                **ranged,
                OBJECTIVE_HYPERPARAMETER: (d.get("TuningObjective") or {}).get("MetricName")
                or metric,
            },
            **{k: v for k, v in d.items() if k in _TRAINING_FIELDS},
        }
        if p.get("Tags"):
            trial["Tags"] = json.loads(json.dumps(p["Tags"]))
        out.append(trial)
    return out


# A job definition's fields that are a CreateTrainingJob's as they are.
_TRAINING_FIELDS = (
    "RoleArn",
    "InputDataConfig",
    "VpcConfig",
    "OutputDataConfig",
    "ResourceConfig",
    "StoppingCondition",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "RetryStrategy",
    "Environment",
)
