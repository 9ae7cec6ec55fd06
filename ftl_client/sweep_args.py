"""``ftl sweep``'s argument types (issue 37): a range in each of its forms, a strategy in any
case, and the action that gathers the ranges; ``ftl_client.args`` builds the command."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from jobmodel.sweeps.request import SCALES, STRATEGIES

__all__ = ["RANGE_FORMS", "Ranges", "number_of", "parse_value", "strategy", "sweep_range"]


def parse_value(text: str) -> Any:
    """A ``--set`` value: JSON when it parses (``3e-5``, ``true``, ``8``), else the string.

    ``NaN`` and ``Infinity`` stay strings: they are not JSON the launcher could accept.
    """

    def reject(constant: str) -> Any:
        raise ValueError(constant)

    try:
        return json.loads(text, parse_constant=reject)
    except ValueError:
        return text


def number_of(text: str) -> int | float | None:
    """A finite number (an int when it is written as one), or None."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def strategy(text: str) -> str:
    """A sweep strategy in any case, as the API spells it (``bayesian`` -> ``Bayesian``)."""
    for name in STRATEGIES:
        if text.strip().lower() == name.lower():
            return name
    raise argparse.ArgumentTypeError(
        f"expected one of {', '.join(s.lower() for s in STRATEGIES)}, got {text!r}"
    )


# ``--range``'s scales (any case) as the API names them; the API's own names work too.
SCALE_NAMES: dict[str, str] = {
    "linear": "Linear",
    "log": "Logarithmic",
    "reverse-log": "ReverseLogarithmic",
    "auto": "Auto",
    **{name.lower(): name for name in SCALES},
}
assert set(SCALE_NAMES.values()) == set(SCALES)
RANGE_FORMS = "NAME=MIN:MAX[:SCALE] or NAME=V1,V2,..."
_SCALAR = (str, int, float, bool)


def sweep_range(text: str) -> tuple[str, dict[str, Any]]:
    """One ``--range``: ``NAME=MIN:MAX[:SCALE]`` (numbers; SCALE linear, log, reverse-log or
    auto, the default) or ``NAME=V1,V2,...`` (categorical: two or more values, each JSON when
    it parses, else a string). A comma makes it categorical, so a value may hold a colon; a
    JSON list (``NAME=["a,b", "c"]``) gives values that hold commas."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected {RANGE_FORMS}, got {text!r}")
    if spec.lstrip().startswith("["):
        return name, {"values": _json_values(name, spec)}
    if "," in spec:
        return name, {"values": _categorical(name, spec)}
    parts = spec.split(":")
    if len(parts) == 1:
        raise argparse.ArgumentTypeError(
            f"{name}: expected MIN:MAX[:SCALE] or two or more values V1,V2,..., got {spec!r} "
            f"(to fix one value, use --set {name}=VALUE)"
        )
    if len(parts) > 3:
        raise argparse.ArgumentTypeError(f"{name}: expected MIN:MAX[:SCALE], got {spec!r}")
    low, high = number_of(parts[0]), number_of(parts[1])
    if low is None:
        raise argparse.ArgumentTypeError(f"{name}: MIN must be a number, got {parts[0]!r}")
    if high is None:
        raise argparse.ArgumentTypeError(f"{name}: MAX must be a number, got {parts[1]!r}")
    if low >= high:
        raise argparse.ArgumentTypeError(f"{name}: MIN must be below MAX, got {spec!r}")
    scale = "Auto"
    if len(parts) == 3:
        found = SCALE_NAMES.get(parts[2].strip().lower())
        if found is None:
            raise argparse.ArgumentTypeError(
                f"{name}: SCALE must be one of linear, log, reverse-log, auto, got {parts[2]!r}"
            )
        scale = found
    return name, {"min": low, "max": high, "scale": scale}


def _categorical(name: str, spec: str) -> list[Any]:
    values: list[Any] = []
    for item in spec.split(","):
        if not item.strip():
            raise argparse.ArgumentTypeError(f"{name}: an empty value in {spec!r}")
        values.append(parse_value(item.strip()))
    return _once_each(name, values)


def _json_values(name: str, spec: str) -> list[Any]:
    """``NAME=[...]``: a JSON list of two or more scalars (strings may hold commas)."""
    values = parse_value(spec.strip())
    if (
        not isinstance(values, list)
        or len(values) < 2
        or not all(isinstance(v, _SCALAR) for v in values)
    ):
        raise argparse.ArgumentTypeError(
            f"{name}: expected a JSON list of two or more strings, numbers or booleans, "
            f"got {spec!r}"
        )
    return _once_each(name, values)


def _once_each(name: str, values: list[Any]) -> list[Any]:
    seen: set[str] = set()
    for value in values:
        key = json.dumps(value)
        if key in seen:
            raise argparse.ArgumentTypeError(f"{name}: value {key} is given twice")
        seen.add(key)
    return values


class Ranges(argparse.Action):
    """``--range`` repeated: a dict of name -> range; one range per hyperparameter."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        name, spec = values
        ranges = dict(getattr(namespace, self.dest) or {})
        if name in ranges:
            raise argparse.ArgumentError(self, f"{name} has a range already; give it one --range")
        ranges[name] = spec
        setattr(namespace, self.dest, ranges)


# ---------------------------------------------------------------------- the parser
