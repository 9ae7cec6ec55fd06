"""Template specs: what the platform team decides about a job, and the knobs callers may turn.

Specs are frozen dataclasses whose mapping fields are read-only views
(``MappingProxyType``) and whose list fields are tuples. ``to_dict()`` gives plain
JSON-able data and ``from_dict()`` reads it back exactly; ``validate_template()``
holds every synth-time rule, each with its own rule id.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import Any

from . import _rules as R
from .distribution import check_start_rules
from .errors import TemplateError, ValidationError
from .instances import INSTANCE_TYPES, efa_environment

__all__ = [
    "CATALOG_VERSION",
    "DISTRIBUTION_KINDS",
    "INPUT_MODES",
    "Distribution",
    "HyperparameterRule",
    "InputChannel",
    "TemplateSpec",
    "dump_catalog",
    "load_catalog",
    "shipped_catalog",
    "validate_template",
]

CATALOG_VERSION = 1
DISTRIBUTION_KINDS = ("none", "torchrun", "smddp", "smp", "mpi", "smp-v2")
INPUT_MODES = ("File", "FastFile", "Pipe")
S3_DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")
SMP_DEGREE_KEYS = ("partitions", "pipeline_parallel_degree", "tensor_parallel_degree")

# Hyperparameter keys the renderer owns; a template may not set them.
RESERVED_HYPERPARAMETERS = frozenset({"mp_parameters"})
RESERVED_HYPERPARAMETER_PREFIX = "sagemaker_"
# Script-mode keys added to every job, and the extra keys per distribution (REFERENCE.md).
SCRIPT_MODE_KEYS = (
    "sagemaker_program",
    "sagemaker_submit_directory",
    "sagemaker_container_log_level",
    "sagemaker_job_name",
    "sagemaker_region",
)
DISTRIBUTION_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "none": (),
        "torchrun": ("sagemaker_torch_distributed_enabled", "sagemaker_instance_type"),
        "smddp": (
            "sagemaker_distributed_dataparallel_enabled",
            "sagemaker_instance_type",
            "sagemaker_distributed_dataparallel_custom_mpi_options",
        ),
        "mpi": (
            "sagemaker_mpi_enabled",
            "sagemaker_mpi_num_of_processes_per_host",
            "sagemaker_mpi_custom_mpi_options",
        ),
        "smp": (
            "mp_parameters",
            "sagemaker_mpi_enabled",
            "sagemaker_mpi_num_of_processes_per_host",
            "sagemaker_mpi_custom_mpi_options",
        ),
        # SDK v2 PyTorch estimator, torch_distributed + smdistributed.modelparallel (SMP v2).
        "smp-v2": (
            "mp_parameters",
            "sagemaker_distributed_dataparallel_enabled",
            "sagemaker_instance_type",
            "sagemaker_torch_distributed_enabled",
        ),
    }
)


def _freeze_map(value: Any) -> Any:
    """A read-only view of a copy of ``value`` when it is a mapping; anything else as is."""
    if isinstance(value, MappingProxyType):
        return value
    if isinstance(value, Mapping):
        return MappingProxyType(dict(value))
    return value


def _freeze_seq(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def _check_keys(
    template: str, what: str, data: Any, allowed: Iterable[str], required: Iterable[str]
) -> None:
    if not isinstance(data, Mapping):
        raise TemplateError(
            template, "type", f"{what} must be an object, got {type(data).__name__}"
        )
    allowed_set = set(allowed)
    unknown = sorted(str(k) for k in data if k not in allowed_set)
    if unknown:
        raise TemplateError(template, "unknown-key", f"{what} has unknown key {unknown[0]!r}")
    for key in required:
        if key not in data:
            raise TemplateError(template, "missing-key", f"{what} needs key {key!r}")


# --------------------------------------------------------------------------------------
# Hyperparameter rules
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HyperparameterRule:
    """What a caller may set one hyperparameter to: a type and either bounds or choices."""

    type: str
    min: int | float | None = None
    max: int | float | None = None
    choices: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.choices, list):
            object.__setattr__(self, "choices", tuple(self.choices))

    def to_dict(self) -> dict[str, Any]:
        """The contract's ``overridable`` entry: ``type`` plus ``min``/``max`` or ``choices``."""
        out: dict[str, Any] = {"type": self.type}
        if self.min is not None:
            out["min"] = self.min
        if self.max is not None:
            out["max"] = self.max
        if self.choices is not None:
            out["choices"] = list(self.choices)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, template: str = "?") -> HyperparameterRule:
        _check_keys(
            template, "hyperparameter rule", d, ("type", "min", "max", "choices"), ("type",)
        )
        choices = d.get("choices")
        return cls(
            type=d["type"],
            min=d.get("min"),
            max=d.get("max"),
            choices=tuple(choices) if isinstance(choices, (list, tuple)) else choices,
        )

    def problem(self) -> str | None:
        """Why this rule itself is malformed, or None."""
        if self.type not in R.HP_TYPES:
            return f"type must be one of {', '.join(R.HP_TYPES)}, got {self.type!r}"
        has_bounds = self.min is not None or self.max is not None
        if self.choices is not None and has_bounds:
            return "give either min/max or choices, not both"
        if self.type == "bool":
            if has_bounds or self.choices is not None:
                return "a bool rule takes neither min/max nor choices"
            return None
        if has_bounds:
            if self.type == "str":
                return "a str rule takes choices, not min/max"
            for bound in (self.min, self.max):
                if bound is None:
                    continue
                if self.type == "int" and type(bound) is not int:
                    return f"int bounds must be integers, got {bound!r}"
                if type(bound) not in (int, float) or not math.isfinite(bound):
                    return f"bounds must be finite numbers, got {bound!r}"
            if self.min is not None and self.max is not None and self.min > self.max:
                return f"min {self.min} is above max {self.max}"
        if self.choices is not None:
            if not isinstance(self.choices, tuple) or not self.choices:
                return "choices must be a non-empty list"
            for choice in self.choices:
                if self.violation(choice) is not None:
                    return f"choice {choice!r} is not a valid {self.type}"
            if len(set(self.choices)) != len(self.choices):
                return "choices must not repeat"
        return None

    def violation(self, value: Any) -> str | None:
        """Why ``value`` breaks this rule (phrase after the field name), or None."""
        t = type(value)
        kind = self.type
        if kind == "int":
            if t is not int:
                return f"must be an integer, got {_json_type(value)}"
            if value.bit_length() > 63:
                return "is out of range for an integer"
        elif kind == "float":
            if t is not int and t is not float:
                return f"must be a number, got {_json_type(value)}"
            if t is int and abs(value) > 2**1023:
                return "is out of range for a float"
            if t is float and not math.isfinite(value):
                return "must be a finite number"
        elif kind == "bool":
            if t is not bool:
                return f"must be true or false, got {_json_type(value)}"
            return None
        elif kind == "str":
            if t is not str:
                return f"must be a string, got {_json_type(value)}"
            if len(value) > R.MAX_HYPERPARAMETER_LENGTH:
                return f"must be at most {R.MAX_HYPERPARAMETER_LENGTH} characters, got {len(value)}"
        else:  # malformed rule; problem() reports it
            return f"has an unknown rule type {kind!r}"
        if self.choices is not None:
            if value not in self.choices:
                return f"must be one of {list(self.choices)}, got {R.show(value)}"
            return None
        lo, hi = self.min, self.max
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return f"must be between {_fmt_bound(lo)} and {_fmt_bound(hi)}, got {R.show(value)}"
        return None

    def coerce(self, value: Any) -> Any:
        """``value`` in its canonical form (float rules store floats); assumes it is valid."""
        if self.type == "float" and type(value) is int:
            return float(value)
        return value


def _fmt_bound(bound: Any) -> str:
    return "-inf" if bound is None else repr(bound)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    t = type(value)
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is float:
        return "number"
    if t is str:
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return t.__name__


def check_override(template: str, key: str, rule: HyperparameterRule, value: Any) -> Any:
    """A caller's value for ``key`` checked against ``rule``, in canonical form."""
    problem = rule.violation(value)
    field_name = f"hyperparameters.{key}"
    if problem is not None:
        raise ValidationError(field_name, f"{field_name} {problem} (template {template})")
    value = rule.coerce(value)
    encoded = R.encode_value(value)
    if len(encoded) > R.MAX_HYPERPARAMETER_LENGTH:
        raise ValidationError(
            field_name,
            f"{field_name} must encode to at most {R.MAX_HYPERPARAMETER_LENGTH} characters, got "
            f"{len(encoded)}",
        )
    return value


# --------------------------------------------------------------------------------------
# Distribution and input channels
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Distribution:
    """How the job spreads over processes and nodes (rendered to toolkit hyperparameters)."""

    kind: str = "none"
    processes_per_host: int | None = None
    custom_mpi_options: str = ""
    mp_parameters: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mp_parameters", _freeze_map(self.mp_parameters))

    def __hash__(self) -> int:
        return hash((self.kind, self.processes_per_host, self.custom_mpi_options))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "processes_per_host": self.processes_per_host,
            "custom_mpi_options": self.custom_mpi_options,
            "mp_parameters": None if self.mp_parameters is None else dict(self.mp_parameters),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, template: str = "?") -> Distribution:
        _check_keys(template, "distribution", d, [f.name for f in fields(cls)], ("kind",))
        return cls(**d)


@dataclass(frozen=True, slots=True)
class InputChannel:
    """One input channel; ``default_prefix`` is a key prefix inside the platform's data bucket."""

    name: str
    required: bool = True
    default_prefix: str | None = None
    distribution: str = "FullyReplicated"
    content_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "required": self.required,
            "default_prefix": self.default_prefix,
            "distribution": self.distribution,
            "content_type": self.content_type,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, template: str = "?") -> InputChannel:
        _check_keys(template, "input channel", d, [f.name for f in fields(cls)], ("name",))
        return cls(**d)


# --------------------------------------------------------------------------------------
# Template spec
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TemplateSpec:
    """Everything about a job that the platform team decides, plus what callers may override."""

    name: str
    description: str
    image_uri: str | None = None
    framework: Mapping[str, str] = field(default_factory=dict)
    entry_point: str = "train.py"
    distribution: Distribution = Distribution()
    instance_types: tuple[str, ...]
    default_instance_type: str
    default_instance_count: int = 1
    max_instance_count: int = 1
    volume_size_gb: int = 100
    spot: bool = True
    checkpoint: bool = True
    default_runtime_seconds: int = 86_400
    max_runtime_seconds: int = 432_000
    max_wait_seconds: int = 864_000
    input_mode: str = "File"
    inputs: tuple[InputChannel, ...] = ()
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    overridable: Mapping[str, HyperparameterRule] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    retry_attempts: int = 2
    keep_alive_seconds: int = 0
    tensorboard: bool = True
    debugger: bool = False
    profiler: bool = False
    network_isolation: bool = False
    inter_container_encryption: bool = False
    environment: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    # Why a template is kept only for old workloads (e.g. an out-of-support image); None if current.
    legacy: str | None = None

    def __post_init__(self) -> None:
        setter = object.__setattr__
        setter(self, "framework", _freeze_map(self.framework))
        setter(self, "instance_types", _freeze_seq(self.instance_types))
        setter(self, "metrics", _freeze_seq(self.metrics))
        setter(self, "hyperparameters", _freeze_map(self.hyperparameters))
        setter(self, "environment", _freeze_map(self.environment))
        setter(self, "tags", _freeze_map(self.tags))
        if isinstance(self.distribution, Mapping):
            setter(
                self,
                "distribution",
                Distribution.from_dict(self.distribution, template=str(self.name)),
            )
        inputs = _freeze_seq(self.inputs)
        if isinstance(inputs, tuple):
            inputs = tuple(
                InputChannel.from_dict(c, template=str(self.name)) if isinstance(c, Mapping) else c
                for c in inputs
            )
        setter(self, "inputs", inputs)
        overridable = self.overridable
        if isinstance(overridable, Mapping):
            overridable = MappingProxyType(
                {
                    k: HyperparameterRule.from_dict(v, template=str(self.name))
                    if isinstance(v, Mapping)
                    else v
                    for k, v in overridable.items()
                }
            )
        setter(self, "overridable", overridable)

    def __hash__(self) -> int:
        return hash((self.name, self.image_uri, self.instance_types, self.distribution))

    # -- lookups used on the hot path ------------------------------------------------

    @cached_property
    def channels(self) -> Mapping[str, InputChannel]:
        """Input channels by name (computed once per spec)."""
        return MappingProxyType({c.name: c for c in self.inputs})

    # -- serialisation ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data; ``TemplateSpec.from_dict(spec.to_dict()) == spec``."""
        return {
            "name": self.name,
            "description": self.description,
            "image_uri": self.image_uri,
            "framework": dict(self.framework),
            "entry_point": self.entry_point,
            "distribution": self.distribution.to_dict(),
            "instance_types": list(self.instance_types),
            "default_instance_type": self.default_instance_type,
            "default_instance_count": self.default_instance_count,
            "max_instance_count": self.max_instance_count,
            "volume_size_gb": self.volume_size_gb,
            "spot": self.spot,
            "checkpoint": self.checkpoint,
            "default_runtime_seconds": self.default_runtime_seconds,
            "max_runtime_seconds": self.max_runtime_seconds,
            "max_wait_seconds": self.max_wait_seconds,
            "input_mode": self.input_mode,
            "inputs": [c.to_dict() for c in self.inputs],
            "hyperparameters": dict(self.hyperparameters),
            "overridable": {k: r.to_dict() for k, r in self.overridable.items()},
            "metrics": list(self.metrics),
            "retry_attempts": self.retry_attempts,
            "keep_alive_seconds": self.keep_alive_seconds,
            "tensorboard": self.tensorboard,
            "debugger": self.debugger,
            "profiler": self.profiler,
            "network_isolation": self.network_isolation,
            "inter_container_encryption": self.inter_container_encryption,
            "environment": dict(self.environment),
            "tags": dict(self.tags),
            "legacy": self.legacy,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TemplateSpec:
        """Read ``to_dict()`` output back; unknown keys raise ``TemplateError``."""
        name = str(d.get("name", "?")) if isinstance(d, Mapping) else "?"
        _check_keys(
            name,
            "template",
            d,
            [f.name for f in fields(cls)],
            ("name", "description", "instance_types", "default_instance_type"),
        )
        kwargs = dict(d)
        if "distribution" in kwargs:
            dist = kwargs["distribution"]
            if not isinstance(dist, Mapping):
                raise TemplateError(name, "type", "distribution must be an object")
            kwargs["distribution"] = Distribution.from_dict(dist, template=name)
        if "inputs" in kwargs:
            inputs = kwargs["inputs"]
            if not isinstance(inputs, (list, tuple)):
                raise TemplateError(name, "type", "inputs must be a list")
            kwargs["inputs"] = tuple(InputChannel.from_dict(c, template=name) for c in inputs)
        if "overridable" in kwargs:
            over = kwargs["overridable"]
            if not isinstance(over, Mapping):
                raise TemplateError(name, "type", "overridable must be an object")
            kwargs["overridable"] = {
                k: HyperparameterRule.from_dict(v, template=name) for k, v in over.items()
            }
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:  # pragma: no cover - defensive
            raise TemplateError(name, "type", str(exc)) from exc

    def public_view(self) -> dict[str, Any]:
        """The contract's ``templates`` entry (``legacy`` only on legacy templates)."""
        view = {
            "name": self.name,
            "description": self.description,
            "distribution": self.distribution.kind,
            "instance_types": list(self.instance_types),
            "default_instance_type": self.default_instance_type,
            "default_instance_count": self.default_instance_count,
            "max_instance_count": self.max_instance_count,
            "spot": self.spot,
            "max_runtime_seconds": self.max_runtime_seconds,
            "inputs": [c.name for c in self.inputs],
            "hyperparameters": {
                "defaults": dict(self.hyperparameters),
                "overridable": {k: r.to_dict() for k, r in self.overridable.items()},
            },
        }
        if self.legacy is not None:
            view["legacy"] = self.legacy
        return view

    def with_image(self, image_uri: str) -> TemplateSpec:
        """A copy with ``image_uri`` set (the CDK side resolves images at synth)."""
        return replace(self, image_uri=image_uri)


# --------------------------------------------------------------------------------------
# Template validation
# --------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return type(value) is int


def _fail(spec: TemplateSpec, rule: str, message: str) -> TemplateError:
    return TemplateError(str(spec.name), rule, message)


def _check_types(spec: TemplateSpec) -> None:
    ints = (
        "default_instance_count",
        "max_instance_count",
        "volume_size_gb",
        "default_runtime_seconds",
        "max_runtime_seconds",
        "max_wait_seconds",
        "retry_attempts",
        "keep_alive_seconds",
    )
    bools = (
        "spot",
        "checkpoint",
        "tensorboard",
        "debugger",
        "profiler",
        "network_isolation",
        "inter_container_encryption",
    )
    strs = ("name", "description", "entry_point", "default_instance_type", "input_mode")
    for name in ints:
        if not _is_int(getattr(spec, name)):
            raise _fail(spec, "type", f"{name} must be an integer, got {getattr(spec, name)!r}")
    for name in bools:
        if type(getattr(spec, name)) is not bool:
            raise _fail(spec, "type", f"{name} must be true or false, got {getattr(spec, name)!r}")
    for name in strs:
        if type(getattr(spec, name)) is not str:
            raise _fail(spec, "type", f"{name} must be a string, got {getattr(spec, name)!r}")
    if spec.image_uri is not None and type(spec.image_uri) is not str:
        raise _fail(spec, "type", "image_uri must be a string or null")
    for name in ("instance_types", "metrics", "inputs"):
        if not isinstance(getattr(spec, name), tuple):
            raise _fail(spec, "type", f"{name} must be a list")
    for name in ("framework", "hyperparameters", "overridable", "environment", "tags"):
        if not isinstance(getattr(spec, name), Mapping):
            raise _fail(spec, "type", f"{name} must be an object")
    if not isinstance(spec.distribution, Distribution):
        raise _fail(spec, "type", "distribution must be a Distribution")
    for k, v in spec.framework.items():
        if type(k) is not str or type(v) is not str:
            raise _fail(spec, "framework", f"framework entries must be strings, got {k!r}: {v!r}")
    for name in ("instance_types", "metrics"):
        for item in getattr(spec, name):
            if type(item) is not str:
                raise _fail(spec, "type", f"{name} must hold strings, got {item!r}")
    for channel in spec.inputs:
        if not isinstance(channel, InputChannel):
            raise _fail(spec, "type", "inputs must hold input channels")
    for key, rule in spec.overridable.items():
        if not isinstance(rule, HyperparameterRule):
            raise _fail(spec, "type", f"overridable[{key!r}] must be a hyperparameter rule")


def _check_instances(spec: TemplateSpec) -> None:
    if not spec.instance_types:
        raise _fail(spec, "instance-types", "instance_types must list at least one instance type")
    if len(set(spec.instance_types)) != len(spec.instance_types):
        raise _fail(spec, "instance-types", "instance_types must not repeat a type")
    for name in spec.instance_types:
        if name not in INSTANCE_TYPES:
            raise _fail(
                spec,
                "instance-type-unknown",
                f"instance type {name!r} is not in the instance catalog",
            )
    if spec.default_instance_type not in spec.instance_types:
        raise _fail(
            spec,
            "default-instance-type",
            f"default_instance_type {spec.default_instance_type!r} is not one of instance_types",
        )
    if spec.max_instance_count < 1:
        raise _fail(
            spec,
            "instance-count",
            f"max_instance_count must be at least 1, got {spec.max_instance_count}",
        )
    if not 1 <= spec.default_instance_count <= spec.max_instance_count:
        raise _fail(
            spec,
            "instance-count",
            "default_instance_count must be between 1 and max_instance_count "
            f"{spec.max_instance_count}, "
            f"got {spec.default_instance_count}",
        )
    if not 1 <= spec.volume_size_gb <= 16_384:
        raise _fail(
            spec,
            "volume-size",
            f"volume_size_gb must be between 1 and 16384, got {spec.volume_size_gb}",
        )


def _check_distribution(spec: TemplateSpec) -> None:
    dist = spec.distribution
    kind = dist.kind
    if kind not in DISTRIBUTION_KINDS:
        raise _fail(
            spec,
            "distribution",
            f"distribution kind must be one of {', '.join(DISTRIBUTION_KINDS)}",
        )
    if type(dist.custom_mpi_options) is not str:
        raise _fail(spec, "distribution", "custom_mpi_options must be a string")
    if len(R.encode_value(dist.custom_mpi_options)) > R.MAX_HYPERPARAMETER_LENGTH:
        raise _fail(
            spec, "hyperparameter-length", "custom_mpi_options encodes to more than 256 characters"
        )
    types = [INSTANCE_TYPES[n] for n in spec.instance_types]
    if kind == "smddp":
        for it in types:
            if not it.smddp:
                raise _fail(
                    spec,
                    "smddp-instance",
                    f"smddp distribution needs smddp-capable types; {it.name} is not",
                )
    if spec.max_instance_count > 1:
        if kind == "none":
            raise _fail(
                spec,
                "multi-node-distribution",
                f"max_instance_count {spec.max_instance_count} needs a distributed template "
                "(distribution is none)",
            )
        for it in types:
            if not it.efa:
                raise _fail(
                    spec,
                    "multi-node-efa",
                    f"multi-node templates need EFA-capable types; {it.name} has no EFA",
                )
    if kind in ("mpi", "smp"):
        pph = dist.processes_per_host
        if not _is_int(pph) or pph < 1:
            raise _fail(
                spec,
                "processes-per-host",
                f"{kind} needs processes_per_host of at least 1, got {pph!r}",
            )
        for it in types:
            if pph > it.accelerators:
                raise _fail(
                    spec,
                    "processes-per-host",
                    f"processes_per_host {pph} is more than the {it.accelerators} accelerators of "
                    f"{it.name}",
                )
    elif dist.processes_per_host is not None:
        raise _fail(
            spec, "distribution", f"processes_per_host applies to mpi and smp only, not {kind}"
        )
    if kind == "smp":
        params = dist.mp_parameters
        if not isinstance(params, Mapping) or not any(k in params for k in SMP_DEGREE_KEYS):
            raise _fail(
                spec,
                "smp-parameters",
                f"smp needs mp_parameters with one of {', '.join(SMP_DEGREE_KEYS)}",
            )
        for key, value in params.items():
            if type(key) is not str or not R.is_json_scalar(value):
                raise _fail(spec, "smp-parameters", f"mp_parameters[{key!r}] must be a JSON scalar")
        for key in (*SMP_DEGREE_KEYS, "microbatches"):
            if key in params and (not _is_int(params[key]) or params[key] < 1):
                raise _fail(
                    spec, "smp-parameters", f"mp_parameters {key} must be a positive integer"
                )
        tp = params.get("tensor_parallel_degree", 1)
        if tp > dist.processes_per_host:
            raise _fail(
                spec,
                "smp-parameters",
                f"tensor_parallel_degree {tp} is more than processes_per_host "
                f"{dist.processes_per_host}",
            )
        if len(R.encode_value(dict(params))) > R.MAX_HYPERPARAMETER_LENGTH:
            raise _fail(
                spec, "hyperparameter-length", "mp_parameters encodes to more than 256 characters"
            )
    elif dist.mp_parameters is not None and kind != "smp-v2":
        raise _fail(
            spec, "distribution", f"mp_parameters applies to smp and smp-v2 only, not {kind}"
        )


def _check_runtime(spec: TemplateSpec) -> None:
    if not 1 <= spec.default_runtime_seconds <= spec.max_runtime_seconds <= R.MAX_RUNTIME_LIMIT:
        raise _fail(
            spec,
            "runtime",
            "need 1 <= default_runtime_seconds <= max_runtime_seconds <= "
            f"{R.MAX_RUNTIME_LIMIT}, got {spec.default_runtime_seconds} and "
            f"{spec.max_runtime_seconds}",
        )
    if spec.max_wait_seconds < spec.max_runtime_seconds:
        raise _fail(
            spec,
            "max-wait",
            f"max_wait_seconds {spec.max_wait_seconds} is below max_runtime_seconds "
            f"{spec.max_runtime_seconds}",
        )
    if spec.spot and not spec.checkpoint:
        raise _fail(
            spec, "spot-checkpoint", "spot templates need checkpointing (checkpoint must be true)"
        )
    if not 0 <= spec.retry_attempts <= R.MAX_RETRY_ATTEMPTS:
        raise _fail(
            spec, "retry", f"retry_attempts must be between 0 and 30, got {spec.retry_attempts}"
        )
    if not 0 <= spec.keep_alive_seconds <= R.MAX_KEEP_ALIVE:
        raise _fail(
            spec,
            "keep-alive",
            f"keep_alive_seconds must be between 0 and {R.MAX_KEEP_ALIVE}, got "
            f"{spec.keep_alive_seconds}",
        )


def _check_image(spec: TemplateSpec, require_image: bool) -> None:
    if spec.image_uri is None:
        if require_image:
            raise _fail(
                spec, "image", "image_uri is missing (resolve the training image before synth)"
            )
        return
    if R.ECR_IMAGE_RE.fullmatch(spec.image_uri) is None:
        raise _fail(
            spec,
            "image",
            f"image_uri {spec.image_uri!r} is not an ECR image URI "
            "(<account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>:<tag>)",
        )


def _check_entry_point(spec: TemplateSpec) -> None:
    ep = spec.entry_point
    if not ep or ep.startswith("/") or ".." in ep.split("/") or not ep.isprintable():
        raise _fail(
            spec,
            "entry-point",
            f"entry_point must be a relative path inside the source, got {ep!r}",
        )


def _check_hyperparameters(spec: TemplateSpec) -> None:
    keys = set()
    for key, value in spec.hyperparameters.items():
        if type(key) is not str or not key:
            raise _fail(
                spec,
                "hyperparameter-default",
                f"hyperparameter names must be non-empty strings, got {key!r}",
            )
        if not R.is_json_scalar(value):
            raise _fail(
                spec,
                "hyperparameter-default",
                f"default for {key} must be a JSON scalar, got {value!r}",
            )
        keys.add(key)
    for key, rule in spec.overridable.items():
        if type(key) is not str or not key:
            raise _fail(
                spec,
                "hyperparameter-rule",
                f"overridable names must be non-empty strings, got {key!r}",
            )
        problem = rule.problem()
        if problem is not None:
            raise _fail(spec, "hyperparameter-rule", f"rule for {key}: {problem}")
        if key in spec.hyperparameters:
            violation = rule.violation(spec.hyperparameters[key])
            if violation is not None:
                raise _fail(spec, "hyperparameter-default", f"default for {key} {violation}")
        keys.add(key)
    for key in keys:
        if key.startswith(RESERVED_HYPERPARAMETER_PREFIX) or key in RESERVED_HYPERPARAMETERS:
            raise _fail(
                spec, "hyperparameter-reserved", f"hyperparameter {key} is set by the platform"
            )
        if len(key) > R.MAX_HYPERPARAMETER_LENGTH:
            raise _fail(
                spec, "hyperparameter-length", f"hyperparameter name {key[:40]}... is too long"
            )
    for key, value in spec.hyperparameters.items():
        encoded = R.encode_value(value)
        if len(encoded) > R.MAX_HYPERPARAMETER_LENGTH:
            raise _fail(
                spec,
                "hyperparameter-length",
                f"default for {key} encodes to {len(encoded)} characters (max 256)",
            )
    total = (
        len(keys) + len(SCRIPT_MODE_KEYS) + len(DISTRIBUTION_KEYS.get(spec.distribution.kind, ()))
    )
    if total > R.MAX_HYPERPARAMETERS:
        raise _fail(
            spec,
            "hyperparameter-count",
            f"{total} hyperparameters including the platform's keys; SageMaker allows "
            f"{R.MAX_HYPERPARAMETERS}",
        )


def _check_inputs(spec: TemplateSpec) -> None:
    if spec.input_mode not in INPUT_MODES:
        raise _fail(
            spec,
            "input-mode",
            f"input_mode must be one of {', '.join(INPUT_MODES)}, got {spec.input_mode!r}",
        )
    if not 1 <= len(spec.inputs) <= R.MAX_CHANNELS:
        raise _fail(
            spec,
            "inputs",
            f"a template needs 1 to {R.MAX_CHANNELS} input channels, got {len(spec.inputs)}",
        )
    seen: set[str] = set()
    for channel in spec.inputs:
        name = channel.name
        if type(name) is not str or len(name) > 64 or R.CHANNEL_NAME_RE.fullmatch(name) is None:
            raise _fail(
                spec, "inputs", f"channel name {name!r} must be 1-64 characters of [A-Za-z0-9.-_]"
            )
        if name in seen:
            raise _fail(spec, "inputs", f"channel {name} is declared twice")
        seen.add(name)
        if type(channel.required) is not bool:
            raise _fail(spec, "inputs", f"channel {name}: required must be true or false")
        if channel.distribution not in S3_DISTRIBUTIONS:
            raise _fail(
                spec,
                "inputs",
                f"channel {name}: distribution must be one of {', '.join(S3_DISTRIBUTIONS)}",
            )
        if channel.default_prefix is not None:
            problem = R.s3_prefix_problem(channel.default_prefix)
            if problem is not None:
                raise _fail(spec, "inputs", f"channel {name}: default_prefix {problem}")
        if channel.content_type is not None and (
            type(channel.content_type) is not str or not channel.content_type
        ):
            raise _fail(
                spec, "inputs", f"channel {name}: content_type must be a non-empty string or null"
            )


def _check_metrics(spec: TemplateSpec) -> None:
    if len(spec.metrics) > R.MAX_METRICS:
        raise _fail(spec, "metrics", f"at most {R.MAX_METRICS} metrics, got {len(spec.metrics)}")
    if len(set(spec.metrics)) != len(spec.metrics):
        raise _fail(spec, "metrics", "metric names must not repeat")
    for metric in spec.metrics:
        if (
            type(metric) is not str
            or len(metric) > 200
            or R.METRIC_NAME_RE.fullmatch(metric) is None
        ):
            raise _fail(spec, "metrics", f"metric name {metric!r} must match [a-z0-9_]+")


def _check_environment(spec: TemplateSpec) -> None:
    for key, value in spec.environment.items():
        problem = R.env_problem(key, value)
        if problem is not None:
            raise _fail(spec, "environment", problem)
    worst = 0
    for name in spec.instance_types:
        efa = efa_environment(INSTANCE_TYPES[name])
        worst = max(worst, len(efa.keys() | spec.environment.keys()))
    if worst > R.MAX_ENVIRONMENT:
        raise _fail(
            spec,
            "environment",
            f"{worst} environment variables including EFA's; at most {R.MAX_ENVIRONMENT}",
        )


def _check_tags(spec: TemplateSpec) -> None:
    for key, value in spec.tags.items():
        problem = R.tag_problem(key, value)
        if problem is not None:
            raise _fail(spec, "tags", problem)
        if key.lower().startswith(R.RESERVED_TAG_PREFIX):
            raise _fail(
                spec,
                "tags",
                f"tag key {key!r} uses the launcher's reserved prefix {R.RESERVED_TAG_PREFIX!r}",
            )
    if len(spec.tags) + R.LAUNCHER_TAG_COUNT > R.MAX_TAGS:
        raise _fail(
            spec,
            "tags",
            f"{len(spec.tags)} template tags leave no room for the launcher's "
            f"{R.LAUNCHER_TAG_COUNT} (max {R.MAX_TAGS})",
        )


def validate_template(spec: TemplateSpec, *, require_image: bool = True) -> None:
    """Raise ``TemplateError(template, rule, message)`` if ``spec`` breaks a platform rule.

    Rule ids: ``type``, ``name``, ``description``, ``framework``, ``instance-types``,
    ``instance-type-unknown``, ``default-instance-type``, ``instance-count``,
    ``volume-size``, ``distribution``, ``smddp-instance``, ``multi-node-distribution``,
    ``multi-node-efa``, ``processes-per-host``, ``smp-parameters``, the start rules of
    ``jobmodel.distribution`` (``smp-partitions``, ...), ``runtime``,
    ``max-wait``, ``spot-checkpoint``, ``retry``, ``keep-alive``, ``image``,
    ``entry-point``, ``hyperparameter-default``, ``hyperparameter-rule``,
    ``hyperparameter-reserved``, ``hyperparameter-length``, ``hyperparameter-count``,
    ``input-mode``, ``inputs``, ``metrics``, ``environment``, ``tags``.
    """
    if not isinstance(spec, TemplateSpec):
        raise TemplateError("?", "type", f"expected a TemplateSpec, got {type(spec).__name__}")
    _check_types(spec)
    if R.TEMPLATE_NAME_RE.fullmatch(spec.name) is None:
        raise _fail(spec, "name", "name must match ^[a-z0-9](-?[a-z0-9]){0,39}$")
    if not spec.description or len(spec.description) > 1024:
        raise _fail(spec, "description", "description must be 1 to 1024 characters")
    _check_instances(spec)
    _check_distribution(spec)
    _check_runtime(spec)
    _check_image(spec, require_image)
    _check_entry_point(spec)
    _check_hyperparameters(spec)
    _check_inputs(spec)
    check_start_rules(spec)
    _check_metrics(spec)
    _check_environment(spec)
    _check_tags(spec)


# --------------------------------------------------------------------------------------
# Catalog files
# --------------------------------------------------------------------------------------


def load_catalog(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    validate: bool = True,
    require_image: bool = False,
) -> dict[str, TemplateSpec]:
    """Read a catalog (``{"version": 1, "templates": [...]}``) from a JSON file path or a dict.

    Returns specs by name, in file order. Duplicate names raise ``TemplateError``
    (rule ``duplicate-name``); with ``validate`` every spec goes through
    ``validate_template(spec, require_image=require_image)``.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as fh:
            data: Any = json.load(fh)
    else:
        data = source
    return _catalog_from_data(data, validate=validate, require_image=require_image)


def _catalog_from_data(
    data: Any, *, validate: bool, require_image: bool
) -> dict[str, TemplateSpec]:
    if not isinstance(data, Mapping):
        raise TemplateError("<catalog>", "catalog", "a catalog must be a JSON object")
    _check_keys("<catalog>", "catalog", data, ("version", "templates"), ("version", "templates"))
    if data["version"] != CATALOG_VERSION or type(data["version"]) is not int:
        raise TemplateError(
            "<catalog>",
            "catalog",
            f"catalog version must be {CATALOG_VERSION}, got {data['version']!r}",
        )
    templates = data["templates"]
    if not isinstance(templates, list):
        raise TemplateError("<catalog>", "catalog", "templates must be a list")
    out: dict[str, TemplateSpec] = {}
    for entry in templates:
        spec = TemplateSpec.from_dict(entry)
        if spec.name in out:
            raise TemplateError(
                str(spec.name),
                "duplicate-name",
                f"template {spec.name} appears twice in the catalog",
            )
        if validate:
            validate_template(spec, require_image=require_image)
        out[spec.name] = spec
    return out


def dump_catalog(specs: Mapping[str, TemplateSpec] | Iterable[TemplateSpec]) -> dict[str, Any]:
    """The catalog file form of ``specs``; duplicate names raise ``TemplateError``."""
    values = specs.values() if isinstance(specs, Mapping) else specs
    seen: set[str] = set()
    out = []
    for spec in values:
        if spec.name in seen:
            raise TemplateError(
                spec.name, "duplicate-name", f"template {spec.name} appears twice in the catalog"
            )
        seen.add(spec.name)
        out.append(spec.to_dict())
    return {"version": CATALOG_VERSION, "templates": out}


SHIPPED_CATALOG_FILE = "shipped_templates.json"


@lru_cache(maxsize=1)
def _shipped() -> tuple[TemplateSpec, ...]:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), SHIPPED_CATALOG_FILE)
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return tuple(_catalog_from_data(data, validate=True, require_image=False).values())


def shipped_catalog() -> dict[str, TemplateSpec]:
    """The catalog shipped with the platform (images unresolved: ``image_uri`` is None)."""
    return {spec.name: spec for spec in _shipped()}
