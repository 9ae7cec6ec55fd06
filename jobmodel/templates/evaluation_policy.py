"""The evaluation policy (issue 36): what runs after a Completed job, where, and the gate.

A template's ``evaluation`` key holds it (docs/API.md, "Evaluation policy"). Parsing checks
each value's shape and raises ``TemplateError(template, "evaluation", "<key>: <rule>")``
naming the key; the rules that need the rest of the template (channels, task, instance
types) are ``evaluation_rules``'. A team's additions (``ftl:evaluation``) are
``jobmodel.evaluation.additions``', the gate ``jobmodel.evaluation.gate``'s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _rules as R
from ..contract.errors import TemplateError

__all__ = [
    "DEFAULT_RUNTIME",
    "GOLDEN_KEY_RE",
    "MIN_RUNTIME",
    "POLICY_KEYS",
    "TASK_METRICS",
    "EvaluationPolicy",
    "GatedMetric",
    "GoldenSet",
    "LmEval",
    "PolicyError",
    "lower_is_better",
    "parse_gate",
    "parse_golden_sets",
]

POLICY_KEYS = (
    "task_metrics",
    "lm_eval",
    "golden_sets",
    "image_uri",
    "instance_type",
    "spot",
    "max_runtime_seconds",
    "gate",
    "approve_on_pass",
)
GATE_KEYS = ("metric", "min", "max", "max_regression", "higher_is_better")
MIN_RUNTIME = 60
DEFAULT_RUNTIME = 3600
MAX_TASKS = 10
MAX_GOLDEN_SETS = 5
MAX_GATED = 20
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")  # a task's or golden set's name in metric names
# A key prefix inside the team's prefix of the data bucket: S3's safe characters, no "..".
GOLDEN_KEY_RE = re.compile(r"[A-Za-z0-9!_.*'()\-][A-Za-z0-9!_.*'()/\-]{0,499}")


class PolicyError(ValueError):
    """One bad value: ``key`` is its path inside the policy (``gate[0].min``)."""

    def __init__(self, key: str, rule: str, got: Any = None) -> None:
        shown = "" if got is None else f", got {got!r}"
        super().__init__(f"{key}: {rule}{shown}")
        self.key = key
        self.rule = rule
        self.got = got


def lower_is_better(metric: str) -> bool:
    """Loss and perplexity fall as a model gets better; every other metric rises."""
    return "loss" in metric or "perplexity" in metric


@dataclass(frozen=True, kw_only=True)
class GatedMetric:
    """One gated metric: an absolute floor (``min``) and/or ceiling (``max``), and/or at most
    ``max_regression`` worse (in the metric's units) than the group's latest Approved
    version. ``higher_is_better`` says which way "worse" is."""

    metric: str
    min: float | None = None
    max: float | None = None
    max_regression: float | None = None
    higher_is_better: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric, "higher_is_better": self.higher_is_better}
        for name in ("min", "max", "max_regression"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True, kw_only=True)
class GoldenSet:
    """A team's golden set: JSON Lines of ``{"prompt", "completion"}`` under ``prefix`` in the
    team's prefix of the data bucket; scored as ``golden_<name>_exact_match``."""

    name: str
    prefix: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "prefix": self.prefix}


@dataclass(frozen=True, kw_only=True)
class LmEval:
    """lm-evaluation-harness tasks, defined by YAML files in the input channel ``task_channel``
    (with their data: nothing is downloaded), run with ``num_fewshot`` examples and at most
    ``limit`` documents per task (None: all)."""

    tasks: tuple[str, ...]
    task_channel: str | None = None
    num_fewshot: int = 0
    limit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": list(self.tasks),
            "task_channel": self.task_channel,
            "num_fewshot": self.num_fewshot,
            "limit": self.limit,
        }


@dataclass(frozen=True, kw_only=True)
class EvaluationPolicy:
    """What the evaluation job of a template's Completed job runs, and how its result gates
    the registered version (``evaluation.gate.verdict``)."""

    task_metrics_channel: str | None = None
    lm_eval: LmEval | None = None
    golden_sets: tuple[GoldenSet, ...] = ()
    image_uri: str | None = None
    instance_type: str | None = None
    spot: bool = True
    max_runtime_seconds: int = DEFAULT_RUNTIME
    gate: tuple[GatedMetric, ...] = ()
    approve_on_pass: bool = False

    @property
    def runs_something(self) -> bool:
        """Whether there is anything to run: task metrics, lm-eval tasks or a golden set. A
        template's policy may leave that to its teams' golden sets (``ftl:evaluation``); a
        job whose policy runs nothing is not evaluated."""
        return bool(self.task_metrics_channel or self.lm_eval or self.golden_sets)

    def to_dict(self) -> dict[str, Any]:
        """The template's ``evaluation`` value; ``from_dict(to_dict())`` gives it back."""
        return {
            "task_metrics": None
            if self.task_metrics_channel is None
            else {"channel": self.task_metrics_channel},
            "lm_eval": None if self.lm_eval is None else self.lm_eval.to_dict(),
            "golden_sets": [g.to_dict() for g in self.golden_sets],
            "image_uri": self.image_uri,
            "instance_type": self.instance_type,
            "spot": self.spot,
            "max_runtime_seconds": self.max_runtime_seconds,
            "gate": [g.to_dict() for g in self.gate],
            "approve_on_pass": self.approve_on_pass,
        }

    @classmethod
    def from_dict(cls, data: Any, *, template: str = "?") -> EvaluationPolicy:
        """Parse a template's ``evaluation`` value; a bad one raises ``TemplateError`` (rule
        ``evaluation``) whose message starts with the key (``evaluation.gate[0].min``)."""
        try:
            return _parse(data)
        except PolicyError as exc:
            raise TemplateError(template, "evaluation", f"evaluation.{exc}") from None

    def metric_names(self, task: str | None) -> tuple[frozenset[str], tuple[str, ...]]:
        """The metrics this policy produces for a template of ``task``: exact names, and the
        prefixes of lm-eval tasks' metrics (their names come from the task files)."""
        exact: set[str] = set()
        if self.task_metrics_channel is not None and task is not None and task in TASK_METRICS:
            exact.update(TASK_METRICS[task])
        exact.update(f"golden_{g.name}_exact_match" for g in self.golden_sets)
        prefixes = tuple(f"lmeval_{t}_" for t in (self.lm_eval.tasks if self.lm_eval else ()))
        return frozenset(exact), prefixes


# What task metrics each template task has on a held-out channel (training/ftl_eval).
TASK_METRICS: Mapping[str, tuple[str, ...]] = {
    "qa": ("eval_exact_match", "eval_f1"),
    "classification": ("eval_accuracy", "eval_f1"),
    "mlm": ("eval_loss", "eval_perplexity"),
    "clm": ("eval_loss", "eval_perplexity"),
}
CAUSAL_TASKS = ("clm", "sft")


# ------------------------------------------------------------------------------- parsing


def _obj(data: Any, key: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise PolicyError(key or "evaluation", "must be an object", type(data).__name__)
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        where = f"{key}.{unknown[0]}" if key else unknown[0]
        raise PolicyError(where, f"unknown key; allowed: {', '.join(allowed)}")
    return data


def _int(value: Any, key: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise PolicyError(key, f"must be an integer from {low} to {high}", value)
    return value


def _bool(value: Any, key: str) -> bool:
    if type(value) is not bool:
        raise PolicyError(key, "must be true or false", value)
    return value


def _number(value: Any, key: str, *, low: float | None = None) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise PolicyError(key, "must be a finite number", value)
    if low is not None and value < low:
        raise PolicyError(key, f"must be at least {low}", value)
    return float(value)


def _name(value: Any, key: str) -> str:
    if type(value) is not str or NAME_RE.fullmatch(value) is None:
        raise PolicyError(
            key, "must be 1-40 of lowercase letters, digits and '_', from a letter", value
        )
    return value


def _channel(value: Any, key: str) -> str:
    if type(value) is not str or len(value) > 64 or R.CHANNEL_NAME_RE.fullmatch(value) is None:
        raise PolicyError(key, "must be an input channel's name", value)
    return value


def _list(value: Any, key: str, most: int, one: Callable[[Any, str], Any]) -> tuple[Any, ...]:
    if not isinstance(value, (list, tuple)) or len(value) > most:
        raise PolicyError(key, f"must be a list of at most {most}", value)
    return tuple(one(item, f"{key}[{i}]") for i, item in enumerate(value))


def _gated(value: Any, key: str) -> GatedMetric:
    data = _obj(value, key, GATE_KEYS)
    metric = data.get("metric")
    if type(metric) is not str or len(metric) > 200 or R.METRIC_NAME_RE.fullmatch(metric) is None:
        raise PolicyError(f"{key}.metric", "must be a metric name ([a-z0-9_]+)", metric)
    bounds = {
        name: None if data.get(name) is None else _number(data[name], f"{key}.{name}")
        for name in ("min", "max")
    }
    regression = data.get("max_regression")
    if regression is not None:
        regression = _number(regression, f"{key}.max_regression", low=0.0)
    if bounds["min"] is None and bounds["max"] is None and regression is None:
        raise PolicyError(key, "needs min, max or max_regression")
    low, high = bounds["min"], bounds["max"]
    if low is not None and high is not None and low > high:
        raise PolicyError(f"{key}.min", f"must not be above max {high}", low)
    better = data.get("higher_is_better", not lower_is_better(metric))
    return GatedMetric(
        metric=metric,
        min=low,
        max=high,
        max_regression=regression,
        higher_is_better=_bool(better, f"{key}.higher_is_better"),
    )


def _unique(names: list[str], key: str, field: str, rule: str) -> None:
    """The first repeated name in a list is an error at its own entry (``gate[2].metric``)."""
    for i, name in enumerate(names):
        if name in names[:i]:
            raise PolicyError(f"{key}[{i}].{field}", rule, name)


def parse_gate(value: Any, key: str) -> tuple[GatedMetric, ...]:
    """A ``gate`` list (the template's or a team's); a metric may be gated once."""
    gate = _list(value, key, MAX_GATED, _gated)
    _unique([g.metric for g in gate], key, "metric", "a metric is gated once")
    return gate


def _golden(value: Any, key: str) -> GoldenSet:
    data = _obj(value, key, ("name", "prefix"))
    prefix = data.get("prefix")
    if type(prefix) is not str or GOLDEN_KEY_RE.fullmatch(prefix) is None or ".." in prefix:
        raise PolicyError(
            f"{key}.prefix",
            "must be a key prefix in the team's prefix of the data bucket (1-500 of S3's safe "
            "characters, no leading '/', no '..')",
            prefix,
        )
    return GoldenSet(name=_name(data.get("name"), f"{key}.name"), prefix=prefix)


def parse_golden_sets(value: Any, key: str) -> tuple[GoldenSet, ...]:
    """A ``golden_sets`` list; names are unique (each names its metric)."""
    sets = _list(value, key, MAX_GOLDEN_SETS, _golden)
    _unique([g.name for g in sets], key, "name", "golden set names must be unique")
    return sets


def _lm_eval(value: Any) -> LmEval:
    data = _obj(value, "lm_eval", ("tasks", "task_channel", "num_fewshot", "limit"))
    tasks = _list(data.get("tasks"), "lm_eval.tasks", MAX_TASKS, _name)
    if not tasks or len(set(tasks)) != len(tasks):
        raise PolicyError("lm_eval.tasks", "must name 1 to 10 different tasks", list(tasks))
    channel = data.get("task_channel")
    limit = data.get("limit")
    return LmEval(
        tasks=tasks,
        task_channel=None if channel is None else _channel(channel, "lm_eval.task_channel"),
        num_fewshot=_int(data.get("num_fewshot", 0), "lm_eval.num_fewshot", 0, 32),
        limit=None if limit is None else _int(limit, "lm_eval.limit", 1, 1_000_000),
    )


def _parse(data: Any) -> EvaluationPolicy:
    data = _obj(data, "", POLICY_KEYS)
    task = data.get("task_metrics")
    channel = None
    if task is not None:
        channel = _channel(
            _obj(task, "task_metrics", ("channel",)).get("channel"), "task_metrics.channel"
        )
    image = data.get("image_uri")
    if image is not None and (type(image) is not str or R.ECR_IMAGE_RE.fullmatch(image) is None):
        raise PolicyError("image_uri", "must be an ECR image URI or null", image)
    instance = data.get("instance_type")
    if instance is not None and type(instance) is not str:
        raise PolicyError("instance_type", "must be an instance type or null", instance)
    policy = EvaluationPolicy(
        task_metrics_channel=channel,
        lm_eval=None if data.get("lm_eval") is None else _lm_eval(data["lm_eval"]),
        golden_sets=parse_golden_sets(data.get("golden_sets", []), "golden_sets"),
        image_uri=image,
        instance_type=instance,
        spot=_bool(data.get("spot", True), "spot"),
        max_runtime_seconds=_int(
            data.get("max_runtime_seconds", DEFAULT_RUNTIME),
            "max_runtime_seconds",
            MIN_RUNTIME,
            R.MAX_RUNTIME_LIMIT,
        ),
        gate=parse_gate(data.get("gate", []), "gate"),
        approve_on_pass=_bool(data.get("approve_on_pass", False), "approve_on_pass"),
    )
    if policy.approve_on_pass and not policy.gate:
        raise PolicyError("approve_on_pass", "needs a gate to pass (gate is empty)")
    return policy
