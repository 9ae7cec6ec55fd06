"""A sweep request: ranges over a template's overridable hyperparameters, an objective, a
strategy and limits, validated like a submit (``ValidationError`` naming field and rule)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..contract.errors import ValidationError
from ..templates.spec import TemplateSpec

__all__ = [
    "SWEEP_FIELDS",
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
MAX_RANGES = 30  # ParameterRanges: at most 30 ranged hyperparameters in all
MAX_VALUES = 30  # CategoricalParameterRange.Values
MAX_VALUE_CHARS = 256  # ParameterValue
# The fields a sweep adds to a submit's (the rest of the payload is validated as a submit's).
SWEEP_FIELDS = (
    "ranges",
    "objective",
    "direction",
    "strategy",
    "max_trials",
    "max_parallel",
    "early_stopping",
    "cap_usd",
    "target",
)


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

    @property
    def combinations(self) -> int:
        """How many values a grid takes of it (categorical only)."""
        return len(self.values)


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
    target: float | None = None

    @property
    def ranged(self) -> frozenset[str]:
        return frozenset(r.name for r in self.ranges)


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
        if not isinstance(values, list) or not values or len(values) > MAX_VALUES:
            raise ValidationError(
                field, f"{field}.values must be a list of 1 to {MAX_VALUES} values"
            )
        if len({json.dumps(v) for v in values}) != len(values):
            raise ValidationError(field, f"{field}.values must be distinct")
        for value in values:
            if len(json.dumps(value)) > MAX_VALUE_CHARS:
                raise ValidationError(
                    field, f"each value must be at most {MAX_VALUE_CHARS} characters as JSON"
                )
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
    kind = "integer" if rule.type == "int" else "continuous"
    if scale == "Logarithmic" and low <= 0:
        raise ValidationError(field, "a Logarithmic scale needs min > 0")
    if scale == "ReverseLogarithmic" and (kind != "continuous" or low < 0 or high >= 1):
        raise ValidationError(
            field, "a ReverseLogarithmic scale needs a float range with 0 <= min and max < 1"
        )
    return ParameterRange(str(name), kind, low, high, scale)


def parse_sweep(spec: TemplateSpec, payload: Mapping[str, Any]) -> SweepRequest:
    """Validate ``payload`` against ``spec``; raise ``ValidationError`` on the first fault."""
    raw_ranges = payload.get("ranges")
    if not isinstance(raw_ranges, Mapping) or not raw_ranges:
        raise ValidationError("ranges", "ranges must be a non-empty object")
    if len(raw_ranges) > MAX_RANGES:
        raise ValidationError("ranges", f"ranges must name at most {MAX_RANGES} hyperparameters")
    ranges = tuple(_range(spec, k, v) for k, v in sorted(raw_ranges.items(), key=str))
    fixed = payload.get("hyperparameters")
    if isinstance(fixed, Mapping):
        both = sorted(set(fixed) & {r.name for r in ranges})
        if both:
            raise ValidationError(
                "hyperparameters", f"{', '.join(both)} is ranged: give it in ranges only"
            )
    strategy = _choice("strategy", payload.get("strategy", "Bayesian"), STRATEGIES)
    grid = 0
    if strategy == "Grid":
        if any(r.kind != "categorical" for r in ranges):
            raise ValidationError("strategy", "Grid takes only categorical ranges (values)")
        grid = math.prod(r.combinations for r in ranges)
        if grid > MAX_TRIALS:
            raise ValidationError("ranges", f"a grid of {grid} combinations exceeds {MAX_TRIALS}")
        if payload.get("max_trials", grid) != grid:
            raise ValidationError(
                "max_trials", f"Grid runs every combination: omit max_trials or give {grid}"
            )
    early = _choice("early_stopping", payload.get("early_stopping", "Off"), EARLY_STOPPING)
    if strategy == "Hyperband" and early != "Off":
        raise ValidationError("early_stopping", "Hyperband stops trials itself: use Off")
    trials = _int("max_trials", payload.get("max_trials", grid or None), 1, MAX_TRIALS)
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
    target = payload.get("target")
    if target is not None and (
        isinstance(target, bool)
        or not isinstance(target, (int, float))
        or not math.isfinite(target)
    ):
        raise ValidationError("target", "target must be a finite number")
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
        None if target is None else float(target),
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
