"""The checks of a ``CreateHyperParameterTuningJob`` request in the tuner stand-in
(``sandbox/tuner.py``), in the order SageMaker's would meet them:

1. botocore's own validation (``validate_parameters``: types, required members, minimums);
2. the model's constraints botocore leaves to the service (:func:`model_errors`, a walk over
   the input shape): each string's ``max`` length, ``pattern`` (matched whole) and enum, each
   number's ``max``, each list's and map's ``max`` length. Refusals read as SageMaker's do:
   ``1 validation error detected: Value '...' at 'hyperParameterTuningJobName' failed to
   satisfy constraint: Member must have length less than or equal to 32``;
3. the tuner's documented rules (:func:`tuner_errors`), each message naming its field.

A failure in 1 raises botocore's ``ParamValidationError`` (what a boto3 client raises before
sending); 2 and 3 raise ``ClientError`` ``ValidationException`` (HTTP 400).
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Mapping
from typing import Any

import botocore.session
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters

from sandbox.tuner_space import KINDS

_patterns: Any = re
try:  # the model's patterns use \p{L}-style classes, which only the regex package knows
    _patterns = importlib.import_module("regex")
except ImportError:  # pragma: no cover - regex is in requirements-dev.txt
    pass

__all__ = [
    "MAX_PARALLEL",
    "MAX_RANGES",
    "MAX_TRIALS",
    "check_create",
    "check_request",
    "error",
    "model_errors",
]

MODEL = botocore.session.get_session().get_service_model("sagemaker")
# SageMaker's limits per tuning job (its documented quotas; not in the API model).
MAX_TRIALS = 750  # MaxNumberOfTrainingJobs
MAX_PARALLEL = 100  # MaxParallelTrainingJobs
MAX_RANGES = 30  # hyperparameters searched, all range kinds together
_COMPILED: dict[str, Any] = {}


def error(code: str, message: str, operation: str) -> ClientError:
    """A ``ClientError`` as botocore raises it for SageMaker's JSON error ``code``."""
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        operation,
    )


def check_request(operation: str, params: dict[str, Any]) -> None:
    """Checks 1 and 2 (module docstring) of a request to SageMaker's ``operation``."""
    shape = MODEL.operation_model(operation).input_shape
    validate_parameters(params, shape)
    problems = model_errors(params, shape)
    if problems:
        count = f"{len(problems)} validation error{'s' if len(problems) > 1 else ''}"
        raise error("ValidationException", f"{count} detected: {'; '.join(problems)}", operation)


def check_create(params: dict[str, Any]) -> None:
    """Every check of a CreateHyperParameterTuningJob request (module docstring)."""
    check_request("CreateHyperParameterTuningJob", params)
    problem = tuner_errors(params)
    if problem:
        raise error("ValidationException", problem, "CreateHyperParameterTuningJob")


# ---------------------------------------------------------------- the model's constraints
def _pattern(text: str) -> Any:
    if text not in _COMPILED:
        try:
            _COMPILED[text] = _patterns.compile(text)
        except Exception:  # a pattern neither engine reads: not checked
            _COMPILED[text] = None
    return _COMPILED[text]


def _at(path: str, key: str) -> str:
    name = key[:1].lower() + key[1:]  # SageMaker names members in lower camel case
    return f"{path}.{name}" if path else name


def model_errors(value: Any, shape: Any, path: str = "") -> list[str]:
    """The constraints of ``shape`` that ``value`` breaks and botocore does not check."""
    out: list[str] = []
    meta, kind = shape.metadata, shape.type_name
    if kind == "structure" and isinstance(value, Mapping):
        for key, member in shape.members.items():
            if key in value:
                out += model_errors(value[key], member, _at(path, key))
        return out
    if kind in ("list", "map") and isinstance(value, list | Mapping):
        if "max" in meta and len(value) > meta["max"]:
            out.append(_broken(value, path, f"have length less than or equal to {meta['max']}"))
        if kind == "list" and isinstance(value, list):
            for i, item in enumerate(value, 1):
                out += model_errors(item, shape.member, f"{path}.{i}.member")
        elif kind == "map" and isinstance(value, Mapping):
            for key, item in value.items():
                out += model_errors(key, shape.key, f"{path}.key")
                out += model_errors(item, shape.value, f"{path}.value")
        return out
    if kind == "string" and isinstance(value, str):
        if "max" in meta and len(value) > meta["max"]:
            out.append(_broken(value, path, f"have length less than or equal to {meta['max']}"))
        compiled = _pattern(meta["pattern"]) if "pattern" in meta else None
        if compiled is not None and compiled.fullmatch(value) is None:
            out.append(
                _broken(value, path, f"satisfy regular expression pattern: {meta['pattern']}")
            )
        if shape.enum and value not in shape.enum:
            out.append(_broken(value, path, f"satisfy enum value set: [{', '.join(shape.enum)}]"))
        return out
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind in ("integer", "long", "float", "double") and number and "max" in meta:
        if value > meta["max"]:
            out.append(_broken(value, path, f"have value less than or equal to {meta['max']}"))
    return out


def _broken(value: Any, path: str, rule: str) -> str:
    return f"Value '{value}' at '{path}' failed to satisfy constraint: Member must {rule}"


# ---------------------------------------------------------------- the tuner's rules
def tuner_errors(params: Mapping[str, Any]) -> str | None:
    """The first of the tuner's documented rules the request breaks, or None."""
    if "TrainingJobDefinitions" in params:
        if "TrainingJobDefinition" in params:
            return "TrainingJobDefinition and TrainingJobDefinitions cannot both be given"
        return (
            "TrainingJobDefinitions: the sandbox's tuner stand-in takes one definition, "
            "in TrainingJobDefinition"
        )
    if "TrainingJobDefinition" not in params:
        return "TrainingJobDefinition is required"
    if "Autotune" in params:
        return "Autotune: the sandbox's tuner stand-in does not choose a configuration itself"
    config, definition = params["HyperParameterTuningJobConfig"], params["TrainingJobDefinition"]
    for check in (_objective, _limits, _resources):
        problem = check(config, definition)
        if problem:
            return problem
    return _ranges(config, definition)


def _objective(config: Mapping[str, Any], definition: Mapping[str, Any]) -> str | None:
    field = "HyperParameterTuningJobConfig.HyperParameterTuningJobObjective"
    objective = config.get("HyperParameterTuningJobObjective")
    if objective is None:
        return f"{field} is required with TrainingJobDefinition"
    metrics = definition["AlgorithmSpecification"].get("MetricDefinitions", [])
    names = [m["Name"] for m in metrics]
    if objective["MetricName"] not in names:
        return (
            f"{field}.MetricName: {objective['MetricName']!r} is not one of the metrics in "
            f"TrainingJobDefinition.AlgorithmSpecification.MetricDefinitions "
            f"({', '.join(names) or 'none defined'})"
        )
    return None


def _limits(config: Mapping[str, Any], definition: Mapping[str, Any]) -> str | None:
    field = "HyperParameterTuningJobConfig.ResourceLimits"
    limits, strategy = config["ResourceLimits"], config["Strategy"]
    trials = limits.get("MaxNumberOfTrainingJobs")
    if trials is None and strategy != "Grid":
        return f"{field}.MaxNumberOfTrainingJobs is required with the {strategy} strategy"
    if trials is not None and trials > MAX_TRIALS:
        return f"{field}.MaxNumberOfTrainingJobs must be at most {MAX_TRIALS}, got {trials}"
    if limits["MaxParallelTrainingJobs"] > MAX_PARALLEL:
        return f"{field}.MaxParallelTrainingJobs must be at most {MAX_PARALLEL}"
    stopping = config.get("TrainingJobEarlyStoppingType", "Off")
    if strategy == "Hyperband" and stopping != "Off":
        return (
            "HyperParameterTuningJobConfig.TrainingJobEarlyStoppingType must be Off with the "
            "Hyperband strategy (Hyperband stops trials early itself)"
        )
    hyperband = (config.get("StrategyConfig") or {}).get("HyperbandStrategyConfig")
    if hyperband is not None and strategy != "Hyperband":
        return "HyperParameterTuningJobConfig.StrategyConfig is for the Hyperband strategy only"
    if hyperband and hyperband.get("MinResource", 1) > hyperband.get("MaxResource", math.inf):
        return "HyperbandStrategyConfig.MinResource must not exceed MaxResource"
    return None


def _resources(config: Mapping[str, Any], definition: Mapping[str, Any]) -> str | None:
    given = [k for k in ("ResourceConfig", "HyperParameterTuningResourceConfig") if k in definition]
    if len(given) != 1:
        return (
            "TrainingJobDefinition takes exactly one of ResourceConfig and "
            "HyperParameterTuningResourceConfig"
        )
    return None


def _ranges(config: Mapping[str, Any], definition: Mapping[str, Any]) -> str | None:
    where = "HyperParameterTuningJobConfig.ParameterRanges"
    ranges = config.get("ParameterRanges") or {}
    if ranges.get("AutoParameters"):
        return f"{where}.AutoParameters are for Autotune only"
    named = [(field, r) for field, _ in KINDS for r in ranges.get(field, [])]
    if len(named) > MAX_RANGES:
        return f"{where}: at most {MAX_RANGES} hyperparameters can be ranged, got {len(named)}"
    static = definition.get("StaticHyperParameters") or {}
    seen: set[str] = set()
    for field, r in named:
        if r["Name"] in seen:
            return f"{where}.{field}: {r['Name']!r} is ranged more than once"
        seen.add(r["Name"])
        if r["Name"] in static:
            return (
                f"{where}.{field}: {r['Name']!r} is also in "
                "TrainingJobDefinition.StaticHyperParameters"
            )
        if field != "CategoricalParameterRanges":
            problem = _bounds(f"{where}.{field}", r, integer=field.startswith("Integer"))
            if problem:
                return problem
    if config["Strategy"] == "Grid":
        if any(f != "CategoricalParameterRanges" for f, _ in named) or not named:
            return f"{where}: the Grid strategy takes categorical ranges only (at least one)"
        combinations = math.prod(len(r["Values"]) for _, r in named)
        if combinations > MAX_TRIALS:
            return f"{where}: Grid makes {combinations} combinations, at most {MAX_TRIALS}"
    return None


def _bounds(field: str, r: Mapping[str, Any], *, integer: bool) -> str | None:
    name, scale = r["Name"], r.get("ScalingType", "Auto")
    try:
        low, high = (int(r[k]) if integer else float(r[k]) for k in ("MinValue", "MaxValue"))
    except ValueError:
        kind = "integers" if integer else "numbers"
        return f"{field}: MinValue and MaxValue of {name!r} must be {kind}"
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        return f"{field}: MinValue of {name!r} must be less than its MaxValue"
    if scale == "Logarithmic" and low <= 0:
        return f"{field}: ScalingType Logarithmic of {name!r} needs MinValue greater than 0"
    if scale == "ReverseLogarithmic":
        if integer:
            return f"{field}: ScalingType ReverseLogarithmic of {name!r} is for continuous ranges"
        if low < 0 or high >= 1:
            return (
                f"{field}: ScalingType ReverseLogarithmic of {name!r} needs the range within "
                "[0, 1) (MinValue >= 0, MaxValue < 1)"
            )
    return None
