"""Template rules: ``validate_template`` and the checks it runs at synth time.

Each rule raises ``TemplateError(template, rule, message)`` with its own rule id (listed
on ``validate_template``). The rules on hyperparameters are in ``hyperparameter_rules``, on
the capacity chain in ``chain_rules``, and on how a job starts on real containers in
``distribution_rules``; ``validate_template`` runs them all, in a fixed order (the first
broken rule wins).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _rules as R
from ..contract.errors import TemplateError
from ..contract.names import launcher_tag_count
from ..instances import INSTANCE_TYPES, efa_environment
from ._shapes import fail
from .chain_rules import check_chain
from .container_start import check_container_start
from .distribution_rules import check_distribution, check_start_rules
from .evaluation_rules import check_template as check_evaluation
from .hyperparameter_rules import check_hyperparameters
from .hyperparameters import HyperparameterRule
from .spec import (
    INPUT_MODES,
    S3_DISTRIBUTIONS,
    Distribution,
    InputChannel,
    TemplateSpec,
)
from .tracking_rules import check_template as check_tracking

__all__ = ["validate_template"]


def _is_int(value: Any) -> bool:
    return type(value) is int


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
            raise fail(spec, "type", f"{name} must be an integer, got {getattr(spec, name)!r}")
    for name in bools:
        if type(getattr(spec, name)) is not bool:
            raise fail(spec, "type", f"{name} must be true or false, got {getattr(spec, name)!r}")
    for name in strs:
        if type(getattr(spec, name)) is not str:
            raise fail(spec, "type", f"{name} must be a string, got {getattr(spec, name)!r}")
    if spec.image_uri is not None and type(spec.image_uri) is not str:
        raise fail(spec, "type", "image_uri must be a string or null")
    for name in ("instance_types", "metrics", "inputs"):
        if not isinstance(getattr(spec, name), tuple):
            raise fail(spec, "type", f"{name} must be a list")
    for name in ("framework", "hyperparameters", "overridable", "environment", "tags"):
        if not isinstance(getattr(spec, name), Mapping):
            raise fail(spec, "type", f"{name} must be an object")
    if not isinstance(spec.distribution, Distribution):
        raise fail(spec, "type", "distribution must be a Distribution")
    for k, v in spec.framework.items():
        if type(k) is not str or type(v) is not str:
            raise fail(spec, "framework", f"framework entries must be strings, got {k!r}: {v!r}")
    for name in ("instance_types", "metrics"):
        for item in getattr(spec, name):
            if type(item) is not str:
                raise fail(spec, "type", f"{name} must hold strings, got {item!r}")
    for channel in spec.inputs:
        if not isinstance(channel, InputChannel):
            raise fail(spec, "type", "inputs must hold input channels")
    for key, rule in spec.overridable.items():
        if not isinstance(rule, HyperparameterRule):
            raise fail(spec, "type", f"overridable[{key!r}] must be a hyperparameter rule")


def _check_instances(spec: TemplateSpec) -> None:
    if not spec.instance_types:
        raise fail(spec, "instance-types", "instance_types must list at least one instance type")
    if len(set(spec.instance_types)) != len(spec.instance_types):
        raise fail(spec, "instance-types", "instance_types must not repeat a type")
    for name in spec.instance_types:
        if name not in INSTANCE_TYPES:
            raise fail(
                spec,
                "instance-type-unknown",
                f"instance type {name!r} is not in the instance catalog",
            )
    if spec.default_instance_type not in spec.instance_types:
        raise fail(
            spec,
            "default-instance-type",
            f"default_instance_type {spec.default_instance_type!r} is not one of instance_types",
        )
    if spec.max_instance_count < 1:
        raise fail(
            spec,
            "instance-count",
            f"max_instance_count must be at least 1, got {spec.max_instance_count}",
        )
    if not 1 <= spec.default_instance_count <= spec.max_instance_count:
        raise fail(
            spec,
            "instance-count",
            "default_instance_count must be between 1 and max_instance_count "
            f"{spec.max_instance_count}, "
            f"got {spec.default_instance_count}",
        )
    if not 1 <= spec.volume_size_gb <= 16_384:
        raise fail(
            spec,
            "volume-size",
            f"volume_size_gb must be between 1 and 16384, got {spec.volume_size_gb}",
        )


def _check_runtime(spec: TemplateSpec) -> None:
    if not 1 <= spec.default_runtime_seconds <= spec.max_runtime_seconds <= R.MAX_RUNTIME_LIMIT:
        raise fail(
            spec,
            "runtime",
            "need 1 <= default_runtime_seconds <= max_runtime_seconds <= "
            f"{R.MAX_RUNTIME_LIMIT}, got {spec.default_runtime_seconds} and "
            f"{spec.max_runtime_seconds}",
        )
    if spec.max_wait_seconds < spec.max_runtime_seconds:
        raise fail(
            spec,
            "max-wait",
            f"max_wait_seconds {spec.max_wait_seconds} is below max_runtime_seconds "
            f"{spec.max_runtime_seconds}",
        )
    if spec.spot and not spec.checkpoint:
        raise fail(
            spec, "spot-checkpoint", "spot templates need checkpointing (checkpoint must be true)"
        )
    if not 0 <= spec.retry_attempts <= R.MAX_RETRY_ATTEMPTS:
        raise fail(
            spec, "retry", f"retry_attempts must be between 0 and 30, got {spec.retry_attempts}"
        )
    if not 0 <= spec.keep_alive_seconds <= R.MAX_KEEP_ALIVE:
        raise fail(
            spec,
            "keep-alive",
            f"keep_alive_seconds must be between 0 and {R.MAX_KEEP_ALIVE}, got "
            f"{spec.keep_alive_seconds}",
        )


def _check_image(spec: TemplateSpec, require_image: bool) -> None:
    if spec.image_uri is None:
        if require_image:
            raise fail(
                spec, "image", "image_uri is missing (resolve the training image before synth)"
            )
        return
    if R.ECR_IMAGE_RE.fullmatch(spec.image_uri) is None:
        raise fail(
            spec,
            "image",
            f"image_uri {spec.image_uri!r} is not an ECR image URI "
            "(<account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>:<tag>)",
        )


def _check_entry_point(spec: TemplateSpec) -> None:
    ep = spec.entry_point
    if not ep or ep.startswith("/") or ".." in ep.split("/") or not ep.isprintable():
        raise fail(
            spec,
            "entry-point",
            f"entry_point must be a relative path inside the source, got {ep!r}",
        )


def _check_inputs(spec: TemplateSpec) -> None:
    if spec.input_mode not in INPUT_MODES:
        raise fail(
            spec,
            "input-mode",
            f"input_mode must be one of {', '.join(INPUT_MODES)}, got {spec.input_mode!r}",
        )
    if not 1 <= len(spec.inputs) <= R.MAX_CHANNELS:
        raise fail(
            spec,
            "inputs",
            f"a template needs 1 to {R.MAX_CHANNELS} input channels, got {len(spec.inputs)}",
        )
    seen: set[str] = set()
    for channel in spec.inputs:
        name = channel.name
        if type(name) is not str or len(name) > 64 or R.CHANNEL_NAME_RE.fullmatch(name) is None:
            raise fail(
                spec, "inputs", f"channel name {name!r} must be 1-64 characters of [A-Za-z0-9.-_]"
            )
        if name in seen:
            raise fail(spec, "inputs", f"channel {name} is declared twice")
        seen.add(name)
        if type(channel.required) is not bool:
            raise fail(spec, "inputs", f"channel {name}: required must be true or false")
        if channel.distribution not in S3_DISTRIBUTIONS:
            raise fail(
                spec,
                "inputs",
                f"channel {name}: distribution must be one of {', '.join(S3_DISTRIBUTIONS)}",
            )
        if channel.default_prefix is not None:
            problem = R.s3_prefix_problem(channel.default_prefix)
            if problem is not None:
                raise fail(spec, "inputs", f"channel {name}: default_prefix {problem}")
        if channel.content_type is not None and (
            type(channel.content_type) is not str or not channel.content_type
        ):
            raise fail(
                spec, "inputs", f"channel {name}: content_type must be a non-empty string or null"
            )


def _check_metrics(spec: TemplateSpec) -> None:
    if len(spec.metrics) > R.MAX_METRICS:
        raise fail(spec, "metrics", f"at most {R.MAX_METRICS} metrics, got {len(spec.metrics)}")
    if len(set(spec.metrics)) != len(spec.metrics):
        raise fail(spec, "metrics", "metric names must not repeat")
    for metric in spec.metrics:
        if (
            type(metric) is not str
            or len(metric) > 200
            or R.METRIC_NAME_RE.fullmatch(metric) is None
        ):
            raise fail(spec, "metrics", f"metric name {metric!r} must match [a-z0-9_]+")


def _check_environment(spec: TemplateSpec) -> None:
    for key, value in spec.environment.items():
        problem = R.env_problem(key, value)
        if problem is not None:
            raise fail(spec, "environment", problem)
    worst = 0
    for name in spec.instance_types:
        efa = efa_environment(INSTANCE_TYPES[name])
        worst = max(worst, len(efa.keys() | spec.environment.keys()))
    if worst > R.MAX_ENVIRONMENT:
        raise fail(
            spec,
            "environment",
            f"{worst} environment variables including EFA's; at most {R.MAX_ENVIRONMENT}",
        )


def _check_tags(spec: TemplateSpec) -> None:
    for key, value in spec.tags.items():
        problem = R.tag_problem(key, value)
        if problem is not None:
            raise fail(spec, "tags", problem)
        if key.lower().startswith(R.RESERVED_TAG_PREFIX):
            raise fail(
                spec,
                "tags",
                f"tag key {key!r} uses the launcher's reserved prefix {R.RESERVED_TAG_PREFIX!r}",
            )
    ours = launcher_tag_count(chained=bool(spec.capacity_chain))
    if len(spec.tags) + ours > R.MAX_TAGS:
        raise fail(
            spec,
            "tags",
            f"{len(spec.tags)} template tags leave no room for the launcher's "
            f"{ours} (max {R.MAX_TAGS})",
        )


def _check_queue_priority(spec: TemplateSpec) -> None:
    """``0 <= low <= queue_priority <= high <= 9999`` (Batch's schedulingPriority range)."""
    prio, span = spec.queue_priority, spec.queue_priority_range
    if not _is_int(prio):
        raise fail(spec, "queue-priority", f"queue_priority must be an integer, got {prio!r}")
    if not (isinstance(span, tuple) and len(span) == 2 and all(_is_int(v) for v in span)):
        raise fail(
            spec,
            "queue-priority",
            f"queue_priority_range must be a list of two integers [low, high], got {span!r}",
        )
    low, high = span
    lowest, highest = R.MIN_QUEUE_PRIORITY, R.MAX_QUEUE_PRIORITY
    if not lowest <= low <= high <= highest:
        raise fail(
            spec,
            "queue-priority",
            f"queue_priority_range must be [low, high] with {lowest} <= low <= high <= "
            f"{highest}, got [{low}, {high}]",
        )
    if not low <= prio <= high:
        raise fail(
            spec,
            "queue-priority",
            f"queue_priority must be inside queue_priority_range [{low}, {high}], got {prio}",
        )


def validate_template(spec: TemplateSpec, *, require_image: bool = True) -> None:
    """Raise ``TemplateError(template, rule, message)`` if ``spec`` breaks a platform rule.

    Rule ids: ``type``, ``name``, ``description``, ``framework``, ``instance-types``,
    ``instance-type-unknown``, ``default-instance-type``, ``instance-count``,
    ``volume-size``, ``distribution``, ``smddp-instance``, ``multi-node-distribution``,
    ``multi-node-efa``, ``processes-per-host``, ``smp-parameters``, the start rules of
    ``jobmodel.templates.distribution_rules`` (``smp-partitions``, ...), ``runtime``,
    ``max-wait``, ``spot-checkpoint``, ``retry``, ``keep-alive``, ``image``,
    ``entry-point``, ``image-entrypoint``, ``hyperparameter-default``, ``hyperparameter-rule``,
    ``hyperparameter-reserved``, ``hyperparameter-length``, ``hyperparameter-count``,
    ``input-mode``, ``inputs``, ``metrics``, ``environment``, ``tags``, ``queue-priority``,
    ``capacity-chain``, ``instance-preferences``, ``spot-wait``, ``infra-check``,
    ``tracking``, ``evaluation``.
    """
    if not isinstance(spec, TemplateSpec):
        raise TemplateError("?", "type", f"expected a TemplateSpec, got {type(spec).__name__}")
    _check_types(spec)
    if R.TEMPLATE_NAME_RE.fullmatch(spec.name) is None:
        raise fail(spec, "name", "name must match ^[a-z0-9](-?[a-z0-9]){0,39}$")
    if not spec.description or len(spec.description) > 1024:
        raise fail(spec, "description", "description must be 1 to 1024 characters")
    _check_instances(spec)
    check_distribution(spec)
    _check_runtime(spec)
    _check_image(spec, require_image)
    _check_entry_point(spec)
    check_container_start(spec, spec.image_entrypoint, spec.entry_point)
    check_hyperparameters(spec)
    _check_inputs(spec)
    check_start_rules(spec)
    _check_metrics(spec)
    _check_environment(spec)
    _check_tags(spec)
    _check_queue_priority(spec)
    check_chain(spec)
    check_tracking(spec, R.MAX_ENVIRONMENT)
    check_evaluation(spec)
