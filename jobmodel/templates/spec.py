"""Template types: what the platform team decides about a job, and the knobs callers may turn.

Specs are frozen dataclasses whose mapping fields are read-only views
(``MappingProxyType``) and whose list fields are tuples. ``to_dict()`` gives plain
JSON-able data and ``from_dict()`` reads it back exactly. The rules a spec must
follow are in ``jobmodel.templates.rules``; ``HyperparameterRule`` is in
``jobmodel.templates.hyperparameters``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any

from ..contract.errors import TemplateError
from ._shapes import check_keys, freeze_map, freeze_seq
from .distribution_kinds import KINDS, Distribution
from .evaluation_policy import EvaluationPolicy
from .hyperparameters import HyperparameterRule

__all__ = [
    "CHAIN_STEPS",
    "DISTRIBUTION_KINDS",
    "INPUT_MODES",
    "MAX_PREFERENCES",
    "ON_DEMAND",
    "PLAN",
    "S3_DISTRIBUTIONS",
    "SPOT",
    "Distribution",
    "InputChannel",
    "TemplateSpec",
]

DISTRIBUTION_KINDS = tuple(KINDS)  # one row each in ``distribution_kinds.KINDS``
INPUT_MODES = ("File", "FastFile", "Pipe")
S3_DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")
# The steps a template's capacity_chain may name (``capacity.plans`` re-exports them).
SPOT = "spot"
ON_DEMAND = "on-demand"
PLAN = "training-plan"
CHAIN_STEPS = (SPOT, ON_DEMAND, PLAN)
MAX_PREFERENCES = 5  # SageMaker's limit on ResourceConfig.InstancePreferences


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
        check_keys(template, "input channel", d, [f.name for f in fields(cls)], ("name",))
        return cls(**d)


def channel_view(
    channel: InputChannel, data_bucket: str | None, team: str | None
) -> dict[str, Any]:
    """One entry of a template view's ``channels``."""
    uri = None
    if channel.default_prefix is not None and data_bucket:
        uri = f"s3://{data_bucket}/{'' if team is None else team + '/'}{channel.default_prefix}"
    return {
        "name": channel.name,
        "required": channel.required,
        "default_prefix": channel.default_prefix,
        "default_s3_uri": uri,
    }


@dataclass(frozen=True, kw_only=True)
class TemplateSpec:
    """Everything about a job that the platform team decides, plus what callers may override."""

    name: str
    description: str
    image_uri: str | None = None
    # The image's ENTRYPOINT (image_sets/), resolved at synth with the image; the renderer
    # starts it under the platform's init (``container_start``). Empty: the image's own start.
    image_entrypoint: tuple[str, ...] = ()
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
    # Queue mode (ftl:scheduler = queue): the Batch scheduling priority a job gets by default,
    # and the [low, high] range a caller's ``priority`` may choose from (higher runs first).
    queue_priority: int = 50
    queue_priority_range: tuple[int, int] = (0, 100)
    # Capacity (jobmodel.capacity.plans): the chain's steps in order (empty: one attempt, spot as
    # the request says), the on-demand step's ordered instance-type preferences after the
    # job's own type, how long the spot step waits for capacity, and SageMaker's
    # infrastructure health check (None: on for multi-node templates).
    capacity_chain: tuple[str, ...] = ()
    instance_preferences: tuple[str, ...] = ()
    spot_wait_seconds: int = 3600
    infra_check: bool | None = None
    # Experiment tracking (jobmodel.after_training.tracking): None follows the platform's
    # ftl:mlflow default;
    # false turns it off for the template's jobs (a caller cannot turn it back on); true
    # tracks them unless the caller says false.
    tracking: bool | None = None
    # Evaluation after a Completed job (issue 36, ``evaluation_policy``); None: none.
    evaluation: EvaluationPolicy | None = None

    def __post_init__(self) -> None:
        setter = object.__setattr__
        setter(self, "framework", freeze_map(self.framework))
        setter(self, "instance_types", freeze_seq(self.instance_types))
        setter(self, "image_entrypoint", freeze_seq(self.image_entrypoint))
        setter(self, "metrics", freeze_seq(self.metrics))
        setter(self, "hyperparameters", freeze_map(self.hyperparameters))
        setter(self, "environment", freeze_map(self.environment))
        setter(self, "tags", freeze_map(self.tags))
        setter(self, "queue_priority_range", freeze_seq(self.queue_priority_range))
        setter(self, "capacity_chain", freeze_seq(self.capacity_chain))
        setter(self, "instance_preferences", freeze_seq(self.instance_preferences))
        if isinstance(self.distribution, Mapping):
            setter(
                self,
                "distribution",
                Distribution.from_dict(self.distribution, template=str(self.name)),
            )
        inputs = freeze_seq(self.inputs)
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
        if self.evaluation is not None and not isinstance(self.evaluation, EvaluationPolicy):
            policy = EvaluationPolicy.from_dict(self.evaluation, template=str(self.name))
            setter(self, "evaluation", policy)

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
            "image_entrypoint": list(self.image_entrypoint),
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
            "queue_priority": self.queue_priority,
            "queue_priority_range": list(self.queue_priority_range),
            "capacity_chain": list(self.capacity_chain),
            "instance_preferences": list(self.instance_preferences),
            "spot_wait_seconds": self.spot_wait_seconds,
            "infra_check": self.infra_check,
            "tracking": self.tracking,
            "evaluation": None if self.evaluation is None else self.evaluation.to_dict(),
        }

    @property
    def multi_node(self) -> bool:
        """Jobs of this template may span more than one instance."""
        return self.max_instance_count > 1

    @property
    def infra_check_on(self) -> bool:
        """Whether jobs get SageMaker's infrastructure health check (``InfraCheckConfig``):
        the template's ``infra_check``, by default on for multi-node templates."""
        return self.multi_node if self.infra_check is None else bool(self.infra_check)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TemplateSpec:
        """Read ``to_dict()`` output back; unknown keys raise ``TemplateError``."""
        name = str(d.get("name", "?")) if isinstance(d, Mapping) else "?"
        check_keys(
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

    def public_view(
        self, *, data_bucket: str | None = None, team: str | None = None
    ) -> dict[str, Any]:
        """The contract's ``templates`` entry (``legacy`` only on legacy templates).

        ``channels`` says which input channels are required and where a channel's default
        data is: ``default_s3_uri`` in ``data_bucket`` (under ``<team>/`` for a team), null
        when the channel has no default or the bucket is not given.
        """
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
            "channels": [channel_view(c, data_bucket, team) for c in self.inputs],
            "hyperparameters": {
                "defaults": dict(self.hyperparameters),
                "overridable": {k: r.to_dict() for k, r in self.overridable.items()},
            },
            "queue_priority": self.queue_priority,
            "queue_priority_range": list(self.queue_priority_range),
            "capacity_chain": list(self.capacity_chain),
            "instance_preferences": list(self.instance_preferences),
            "infra_check": self.infra_check_on,
        }
        if self.legacy is not None:
            view["legacy"] = self.legacy
        return view

    def with_image(self, image_uri: str, *, entrypoint: tuple[str, ...] = ()) -> TemplateSpec:
        """A copy with ``image_uri`` and the image's ENTRYPOINT set (the CDK side resolves
        both at synth, the ENTRYPOINT from the image's package set)."""
        return replace(self, image_uri=image_uri, image_entrypoint=tuple(entrypoint))
