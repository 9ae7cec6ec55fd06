"""A tuning job's search space for the tuner stand-in (``sandbox/tuner.py``): its ranges, the
values each trial gets, Grid's combinations, and the default objective of the stand-in.

Values are strings, as the API carries them: integers as ``"5"``, floats as Python's ``repr``
(``"0.000123"``). Sampling (Random, Bayesian and Hyperband alike) draws from one seeded
``random.Random`` per tuning job, in trial order, so a tuning job's trials are the same every
run:

* ``Linear`` and ``Auto``: uniform in [MinValue, MaxValue] (an integer range: every integer
  equally likely);
* ``Logarithmic``: log-uniform (``exp`` of a uniform draw between the logs of the bounds;
  an integer range rounds it and stays within the bounds);
* ``ReverseLogarithmic`` (continuous, within [0, 1)): ``1 - x`` with ``x`` log-uniform in
  [1 - MaxValue, 1 - MinValue], so draws crowd towards MaxValue, the end near 1, as the
  SageMaker documentation describes the scale;
* a categorical range: one of its ``Values``, each equally likely.

Grid takes categorical ranges only and tries every combination once, in the order
``itertools.product`` gives over the ranges as listed.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Range", "default_objective", "grid", "ranges_of", "sample", "value_text"]

KINDS = (
    ("IntegerParameterRanges", "Integer"),
    ("ContinuousParameterRanges", "Continuous"),
    ("CategoricalParameterRanges", "Categorical"),
)


@dataclass(frozen=True)
class Range:
    """One ranged hyperparameter (checked by ``sandbox/tuner_checks.py`` before it is made)."""

    name: str
    kind: str  # Integer | Continuous | Categorical
    low: float = 0.0
    high: float = 0.0
    scale: str = "Linear"
    values: tuple[str, ...] = ()


def ranges_of(parameter_ranges: Mapping[str, Any] | None) -> list[Range]:
    """The ranges of a ``ParameterRanges`` structure, integer, continuous, categorical."""
    out: list[Range] = []
    for field, kind in KINDS:
        for raw in (parameter_ranges or {}).get(field, []):
            if kind == "Categorical":
                out.append(Range(raw["Name"], kind, values=tuple(raw["Values"])))
                continue
            scale = raw.get("ScalingType", "Auto")
            out.append(
                Range(
                    raw["Name"],
                    kind,
                    low=float(raw["MinValue"]),
                    high=float(raw["MaxValue"]),
                    scale="Linear" if scale == "Auto" else scale,
                )
            )
    return out


def value_text(value: float, kind: str) -> str:
    """A value as the API writes it: ``"5"`` for an integer range, ``repr`` of a float."""
    return str(int(value)) if kind == "Integer" else repr(float(value))


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def sample(r: Range, rng: random.Random) -> str:
    """One value of ``r`` drawn with ``rng`` on the range's scale."""
    if r.kind == "Categorical":
        return rng.choice(r.values)
    if r.scale == "Logarithmic":
        x = _log_uniform(rng, r.low, r.high)
    elif r.scale == "ReverseLogarithmic":
        x = 1.0 - _log_uniform(rng, 1.0 - r.high, 1.0 - r.low)
    elif r.kind == "Integer":
        return value_text(rng.randint(int(r.low), int(r.high)), r.kind)
    else:
        x = rng.uniform(r.low, r.high)
    if r.kind == "Integer":
        x = round(x)
    return value_text(min(max(x, r.low), r.high), r.kind)


def grid(ranges: Sequence[Range]) -> list[dict[str, str]]:
    """Every combination of the (categorical) ranges' values, once each."""
    names = [r.name for r in ranges]
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(r.values for r in ranges))
    ]


def position(r: Range, value: str) -> float:
    """Where ``value`` lies in ``r``, 0 to 1, on the range's own scale (categorical: by index)."""
    if r.kind == "Categorical":
        return r.values.index(value) / (len(r.values) - 1) if len(r.values) > 1 else 0.0
    x = float(value)
    if r.scale == "Logarithmic":
        low, high, x = math.log(r.low), math.log(r.high), math.log(x)
    elif r.scale == "ReverseLogarithmic":
        low, high, x = -math.log(1 - r.low), -math.log(1 - r.high), -math.log(1 - x)
    else:
        low, high = r.low, r.high
    return 0.0 if high == low else (x - low) / (high - low)


def default_objective(ranges: Sequence[Range], tuned: Mapping[str, str], maximize: bool) -> float:
    """The stand-in's objective when a test gives none: a loss, the mean squared distance of
    each tuned value from 30% of the way along its range (0 is best); ``1 - loss`` for an
    objective to maximize. Deterministic in the tuned values."""
    spots = [position(r, tuned[r.name]) for r in ranges if r.name in tuned]
    loss = sum((u - 0.3) ** 2 for u in spots) / len(spots) if spots else 0.5
    return round(1.0 - loss if maximize else loss, 6)
