"""A sweep request: ranges over a template's overridable hyperparameters, an objective, a
strategy and limits, validated like a submit (``ValidationError`` naming field and rule)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..contract.errors import ValidationError
from ..templates.spec import TemplateSpec

__all__ = [
    "ParameterRange",
    "SweepRequest",
    "check_worst_case",
    "parse_sweep",
    "worst_case_usd",
]

STRATEGIES = ("Bayesian", "Random", "Hyperband", "Grid")
SCALES = ("Auto", "Linear", "Logarithmic", "ReverseLogarithmic")
DIRECTIONS = ("Maximize", "Minimize")
EARLY_STOPPING = ("Off", "Auto")
MAX_TRIALS = 750  # CreateHyperParameterTuningJob: MaxNumberOfTrainingJobs
MAX_PARALLEL = 100  # MaxParallelTrainingJobs


@dataclass(frozen=True)
class ParameterRange:
    """One ranged hyperparameter: ``kind`` continuous/integer (min, max, scale) or
    categorical (values)."""

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    scale: str = "Auto"
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class SweepRequest:
    """A validated sweep."""

    template: str
    ranges: tuple[ParameterRange, ...]
    objective: str
    direction: str
    strategy: str
    max_trials: int
    max_parallel: int
    early_stopping: str
    cap_usd: float
    instance_type: str
    instance_count: int


def _int(field: str, value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValidationError(field, f"{field} must be an integer from {low} to {high}")
    return value


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValidationError(field, f"{field} must be one of {', '.join(allowed)}")
    return str(value)


def _range(spec: TemplateSpec, name: Any, raw: Any) -> ParameterRange:
    field = f"ranges.{name}"
    rule = spec.overridable.get(name) if isinstance(name, str) else None
    if rule is None:
        raise ValidationError(field, f"{name!r} is not an overridable hyperparameter")
    if not isinstance(raw, Mapping):
        raise ValidationError(field, f"{field} must be an object")
    if "values" in raw:
        values = raw["values"]
        if not isinstance(values, list) or not values:
            raise ValidationError(field, f"{field}.values must be a non-empty list")
        for value in values:
            violation = rule.violation(value)
            if violation is not None:
                raise ValidationError(field, f"value {value!r} {violation}")
        return ParameterRange(str(name), "categorical", values=tuple(values))
    if rule.type not in ("int", "float"):
        raise ValidationError(field, f"{name} is a {rule.type}: give values, not min/max")
    ends: tuple[Any, Any] = (raw.get("min"), raw.get("max"))
    for end in ends:
        if isinstance(end, bool) or not isinstance(end, (int, float)):
            raise ValidationError(field, f"{field} needs numeric min and max")
        violation = rule.violation(end)
        if violation is not None:
            raise ValidationError(field, f"range end {end!r} {violation}")
    low, high = float(ends[0]), float(ends[1])
    if low >= high:
        raise ValidationError(field, f"{field}.min must be below max")
    scale = _choice(f"{field}.scale", raw.get("scale", "Auto"), SCALES)
    if scale != "Linear" and scale != "Auto" and low <= 0:
        raise ValidationError(field, f"a {scale} scale needs min > 0")
    kind = "integer" if rule.type == "int" else "continuous"
    return ParameterRange(str(name), kind, low, high, scale)


def parse_sweep(spec: TemplateSpec, payload: Mapping[str, Any]) -> SweepRequest:
    """Validate ``payload`` against ``spec``; raise ``ValidationError`` on the first fault."""
    raw_ranges = payload.get("ranges")
    if not isinstance(raw_ranges, Mapping) or not raw_ranges:
        raise ValidationError("ranges", "ranges must be a non-empty object")
    ranges = tuple(_range(spec, k, v) for k, v in sorted(raw_ranges.items(), key=str))
    strategy = _choice("strategy", payload.get("strategy", "Bayesian"), STRATEGIES)
    if strategy == "Grid" and any(r.kind == "continuous" for r in ranges):
        raise ValidationError("strategy", "Grid takes no continuous range")
    early = _choice("early_stopping", payload.get("early_stopping", "Off"), EARLY_STOPPING)
    if strategy == "Hyperband" and early != "Off":
        raise ValidationError("early_stopping", "Hyperband stops trials itself: use Off")
    trials = _int("max_trials", payload.get("max_trials"), 1, MAX_TRIALS)
    parallel = _int("max_parallel", payload.get("max_parallel", 1), 1, MAX_PARALLEL)
    if parallel > trials:
        raise ValidationError("max_parallel", "max_parallel must not exceed max_trials")
    cap = payload.get("cap_usd")
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap <= 0:
        raise ValidationError("cap_usd", "cap_usd must be a positive number")
    itype = payload.get("instance_type", spec.default_instance_type)
    if itype not in spec.instance_types:
        raise ValidationError("instance_type", "instance_type must be one the template allows")
    count = _int(
        "instance_count",
        payload.get("instance_count", spec.default_instance_count),
        1,
        spec.max_instance_count,
    )
    objective = payload.get("objective")
    if objective not in spec.metrics:
        raise ValidationError("objective", "objective must name one of the template's metrics")
    direction = _choice("direction", payload.get("direction", "Minimize"), DIRECTIONS)
    return SweepRequest(
        spec.name,
        ranges,
        objective,
        direction,
        strategy,
        trials,
        parallel,
        early,
        float(cap),
        str(itype),
        count,
    )


def worst_case_usd(request: SweepRequest, hourly: float, max_runtime_seconds: int) -> float:
    """Every trial running to its max runtime at the on-demand hourly price (spot bills no
    more), so the bound holds whatever the tuner does."""
    per_trial = request.instance_count * hourly * max_runtime_seconds / 3600
    return round(request.max_trials * per_trial, 4)


def check_worst_case(
    request: SweepRequest,
    worst_usd: float,
    *,
    per_job_cap_usd: float | None,
    month_left_usd: float | None,
) -> None:
    """Refuse (``ValidationError`` on ``cap_usd``) a sweep whose worst case exceeds its own
    cap, the team's per-job cap or what is left of the team's month."""
    limits = (
        ("the sweep's cap_usd", request.cap_usd),
        ("the team's per-job cap", per_job_cap_usd),
        ("the team's budget left this month", month_left_usd),
    )
    for what, limit in limits:
        if limit is not None and worst_usd > limit:
            raise ValidationError(
                "cap_usd", f"worst case {worst_usd:.2f} USD exceeds {what} ({limit:.2f} USD)"
            )
