"""The readers of the submit fields that need more than a generic rule: one function per
field, named by its row in ``jobmodel.requests.submit_fields.FIELDS`` (which also says the order
they
run in). Each returns the field's value with the template's defaults applied or raises the
contract's error naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _rules as R
from ..contract.errors import NotFound, ValidationError
from ..contract.names import launcher_tag_count
from ..instances import INSTANCE_TYPES
from ..platform import PlatformConfig
from ..teams import Team
from ..templates.distribution_kinds import KINDS
from ..templates.hyperparameters import check_override
from ..templates.hyperparameters import json_type as _json_type
from ..templates.spec import TemplateSpec
from . import _fields as F


def check_fields(payload: Any, allowed: frozenset[str]) -> None:
    """A JSON object of known fields."""
    if not isinstance(payload, Mapping):
        raise ValidationError(
            "body", f"the request must be a JSON object, got {_json_type(payload)}"
        )
    unknown = [k for k in payload if k not in allowed]
    if unknown:
        first = str(F.sorted_keys(dict.fromkeys(unknown))[0])[:100]
        raise ValidationError(
            first, f"unknown field {first!r}; allowed fields: {', '.join(sorted(allowed))}"
        )


def action(payload: Mapping[str, Any]) -> None:
    """``action``, when given, is ``submit``."""
    value = payload.get("action")
    if value is not None and value != "submit":
        raise ValidationError(
            "action", f"action must be 'submit' for a submit request, got {R.show(value)}"
        )


def template(payload: Mapping[str, Any], catalog: Mapping[str, TemplateSpec]) -> TemplateSpec:
    """``template``: required, a name in the catalog (``NotFound`` otherwise)."""
    name = payload.get("template")
    if name is None:
        raise ValidationError("template", "template is required")
    if type(name) is not str:
        raise ValidationError("template", f"template must be a string, got {_json_type(name)}")
    spec = catalog.get(name)
    if spec is None:
        raise NotFound(
            f"template {R.show(name)} is not in the catalog; known templates: "
            f"{', '.join(sorted(catalog))}",
            field="template",
        )
    return spec


def job_name_prefix(payload: Mapping[str, Any], spec: TemplateSpec, max_length: int) -> str:
    """``job_name``: the job name's prefix, sanitised; the template's name by default."""
    raw_prefix = F.opt(payload, "job_name")
    if raw_prefix is None:
        return spec.name
    if type(raw_prefix) is not str:
        raise ValidationError(
            "job_name", f"job_name must be a string, got {_json_type(raw_prefix)}"
        )
    if len(raw_prefix) > max_length:
        raise ValidationError(
            "job_name",
            f"job_name must be at most {max_length} characters, got {len(raw_prefix)}",
        )
    prefix = R.sanitize_job_prefix(raw_prefix)
    if not prefix:
        raise ValidationError(
            "job_name", f"job_name must contain a letter or digit, got {R.show(raw_prefix)}"
        )
    return prefix


def hyperparameters(payload: Mapping[str, Any], spec: TemplateSpec) -> dict[str, Any]:
    """``hyperparameters``: overrides of the template's overridable ones, canonical values."""
    overrides: dict[str, Any] = {}
    raw_hp = F.opt(payload, "hyperparameters")
    if raw_hp is not None:
        raw_hp = F.require_mapping("hyperparameters", raw_hp)
        rules = spec.overridable
        for key in F.sorted_keys(raw_hp):
            if type(key) is not str:
                raise ValidationError(
                    "hyperparameters", f"hyperparameter names must be strings, got {R.show(key)}"
                )
            rule = rules.get(key)
            if rule is None:
                field_name = F.sub("hyperparameters", key)
                allowed = ", ".join(rules) or "none"
                raise ValidationError(
                    field_name,
                    f"{field_name} is not overridable for template {spec.name} (overridable: "
                    f"{allowed})",
                )
            overrides[key] = check_override(spec.name, key, rule, raw_hp[key])
    return overrides


def fits_queue(count: int, capacity: int | None) -> None:
    """In queue mode, the job fits in the queue's whole capacity; otherwise AWS Batch would
    hold it at the head of the queue until the head-of-queue time limit ends it."""
    if capacity is not None and count > capacity:
        raise ValidationError(
            "instance_count",
            f"instance_count {count} is more than the job queue's capacity of {capacity} "
            f"instances (ftl:queueCapacityInstances), so the job could never start; ask for "
            f"at most {capacity}, or ask the platform team to raise the capacity",
        )


def instance_type(payload: Mapping[str, Any], spec: TemplateSpec) -> str:
    """``instance_type``: one the template allows; the template's default when absent."""
    value = F.opt(payload, "instance_type")
    if value is None:
        return spec.default_instance_type
    if type(value) is not str:
        raise ValidationError(
            "instance_type", f"instance_type must be a string, got {_json_type(value)}"
        )
    if value not in spec.instance_types:
        raise ValidationError(
            "instance_type",
            f"instance_type must be one of {', '.join(spec.instance_types)} for template "
            f"{spec.name}, "
            f"got {R.show(value)}",
        )
    return value


def instance_count(payload: Mapping[str, Any], spec: TemplateSpec, instance_type: str) -> int:
    """``instance_count``, and what it asks of ``instance_type`` (already read): smddp
    support, EFA for multi-node."""
    count = F.bounded_int(
        payload, "instance_count", spec.default_instance_count, spec.max_instance_count, spec.name
    )
    kind = KINDS[spec.distribution.kind]
    if count > 1 and not kind.multi_node:
        raise ValidationError(
            "instance_count",
            f"instance_count above 1 needs a distributed template; {spec.name} has distribution "
            "none",
        )
    itype = INSTANCE_TYPES.get(instance_type)
    if itype is None:
        raise ValidationError(
            "instance_type", f"instance_type {instance_type} is not in the instance catalog"
        )
    if kind.needs_smddp and not itype.smddp:
        raise ValidationError(
            "instance_type",
            f"instance_type {instance_type} does not support smddp, which template {spec.name} "
            "uses",
        )
    if count > 1 and not itype.efa:
        raise ValidationError(
            "instance_type",
            f"instance_type {instance_type} has no EFA; multi-node jobs (instance_count {count}) "
            "need EFA",
        )
    return count


def instances(payload: Mapping[str, Any], spec: TemplateSpec) -> tuple[str, int]:
    """``instance_type`` and ``instance_count`` together (``queue_eta`` tries options)."""
    chosen = instance_type(payload, spec)
    return chosen, instance_count(payload, spec, chosen)


def spot(payload: Mapping[str, Any], spec: TemplateSpec) -> bool:
    """``spot``: the template's setting when absent; needs a checkpointing template."""
    value = F.boolean(payload, "spot", spec.spot)
    if value and not spec.checkpoint:
        raise ValidationError(
            "spot", f"spot needs checkpointing, which template {spec.name} turns off"
        )
    return value


def max_wait(
    payload: Mapping[str, Any], spec: TemplateSpec, *, spot: bool, runtime: int
) -> int | None:
    """``max_wait_seconds``: spot jobs only (None otherwise), from ``runtime`` to the
    template's limit; the limit when absent."""
    wait_limit = max(spec.max_wait_seconds, runtime)
    value = F.opt(payload, "max_wait_seconds")
    if value is None:
        return wait_limit if spot else None
    if not spot:
        raise ValidationError(
            "max_wait_seconds", "max_wait_seconds applies to spot jobs only (spot is false)"
        )
    F.require_int("max_wait_seconds", value)
    if value < runtime:
        raise ValidationError(
            "max_wait_seconds",
            f"max_wait_seconds must be at least max_runtime_seconds ({runtime}), got {value}",
        )
    if value > wait_limit:
        raise ValidationError(
            "max_wait_seconds",
            f"max_wait_seconds must be at most {wait_limit} for template {spec.name}, got {value}",
        )
    return int(value)


def inputs(
    payload: Mapping[str, Any], spec: TemplateSpec, platform: PlatformConfig, team: Team | None
) -> dict[str, str]:
    """``inputs``: the caller's channel URIs (allowed buckets, or the team's data) plus the
    template's defaults; a required channel must end up with one."""
    channels = spec.channels
    given: dict[str, str] = {}
    raw_inputs = F.opt(payload, "inputs")
    if raw_inputs is not None:
        raw_inputs = F.require_mapping("inputs", raw_inputs)
        allowed_buckets = platform.input_buckets
        for key in F.sorted_keys(raw_inputs):
            field_name = F.sub("inputs", key)
            if type(key) is not str or key not in channels:
                raise ValidationError(
                    field_name,
                    f"{field_name}: template {spec.name} has no channel {R.show(key)} "
                    f"(channels: {', '.join(channels)})",
                )
            uri = raw_inputs[key]
            if type(uri) is not str:
                raise ValidationError(
                    field_name, f"{field_name} must be an s3:// URI string, got {_json_type(uri)}"
                )
            bucket, problem = R.bucket_of_s3_uri(uri)
            if bucket is None:
                raise ValidationError(field_name, f"{field_name} {problem}")
            if team is not None:
                _check_team_input(field_name, uri, bucket, team, platform)
            elif bucket not in allowed_buckets:
                raise ValidationError(
                    field_name,
                    f"{field_name} reads bucket {bucket}, which the platform does not allow "
                    f"(allowed: {', '.join(sorted(allowed_buckets))})",
                )
            given[key] = uri
    inputs: dict[str, str] = {}
    for channel in spec.inputs:
        uri = given.get(channel.name)
        if uri is None and channel.default_prefix is not None:
            team_prefix = "" if team is None else f"{team.name}/"
            uri = f"s3://{platform.data_bucket}/{team_prefix}{channel.default_prefix}"
        if uri is None:
            if channel.required:
                field_name = f"inputs.{channel.name}"
                raise ValidationError(
                    field_name, f"{field_name} is required by template {spec.name}"
                )
            continue
        inputs[channel.name] = uri
    return inputs


def tags(
    payload: Mapping[str, Any],
    spec: TemplateSpec,
    platform: PlatformConfig,
    team: Team | None,
    *,
    queued: bool = False,
) -> dict[str, str]:
    """``tags``: the caller's, none reserved, within SageMaker's total with the others (one
    more, ``ftl:job-name``, in queue mode and on every attempt of a capacity-chain job)."""
    tags: dict[str, str] = {}
    raw_tags = F.opt(payload, "tags")
    platform_tags = platform.platform_tags
    if raw_tags is not None:
        raw_tags = F.require_mapping("tags", raw_tags)
        for key in F.sorted_keys(raw_tags):
            field_name = F.sub("tags", key) if type(key) is str else "tags"
            value = raw_tags[key]
            problem = R.tag_problem(key, value)
            if problem is not None:
                raise ValidationError(field_name, f"{field_name}: {problem}")
            if key[:4].lower() == R.RESERVED_TAG_PREFIX:
                raise ValidationError(
                    field_name, f"{field_name}: tag keys starting 'ftl:' are set by the platform"
                )
            if key in platform_tags:
                raise ValidationError(
                    field_name, f"{field_name}: tag {key!r} is set by the platform"
                )
            tags[key] = value
    total = len(platform_tags.keys() | spec.tags.keys() | tags.keys())
    total += launcher_tag_count(
        team=team is not None, queued=queued, chained=bool(spec.capacity_chain)
    )
    if total > R.MAX_TAGS:
        raise ValidationError(
            "tags",
            f"tags: {len(tags)} caller tags make {total} with the platform's, template's and "
            f"launcher's; SageMaker allows {R.MAX_TAGS}",
        )
    return tags


def priority(payload: Mapping[str, Any], spec: TemplateSpec, *, queued: bool) -> int | None:
    """``priority``: queue mode only; an integer in the template's ``queue_priority_range``,
    the template's ``queue_priority`` when absent. Direct mode has no priority (None)."""
    value = F.opt(payload, "priority")
    if not queued:
        if value is not None:
            raise ValidationError(
                "priority",
                "priority applies only when the platform queues jobs (ftl:scheduler = queue); "
                "this platform starts jobs directly, so leave priority out",
            )
        return None
    if value is None:
        return spec.queue_priority
    F.require_int("priority", value)
    low, high = spec.queue_priority_range
    if not low <= value <= high:
        raise ValidationError(
            "priority",
            f"priority must be from {low} to {high} for template {spec.name}, got {value}",
        )
    return int(value)


def capacity(payload: Mapping[str, Any], spec: TemplateSpec) -> tuple[str, ...] | None:
    """``capacity``: the steps of the template's capacity chain the caller chooses (kept in
    the template's order); None when absent (the whole chain)."""
    value = F.opt(payload, "capacity")
    if value is None:
        return None
    chain = spec.capacity_chain
    if not chain:
        raise ValidationError(
            "capacity", f"template {spec.name} has no capacity chain; leave capacity out"
        )
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValidationError(
            "capacity", f"capacity must be a non-empty list of steps of {', '.join(chain)}"
        )
    for step in value:
        if step not in chain:
            raise ValidationError(
                "capacity",
                f"capacity step {R.show(step)} is not in template {spec.name}'s chain "
                f"({', '.join(chain)})",
            )
    if len(set(value)) != len(value):
        raise ValidationError("capacity", "capacity must not repeat a step")
    return tuple(k for k in chain if k in value)


def _check_team_input(
    field_name: str, uri: str, bucket: str, team: Team, platform: PlatformConfig
) -> None:
    """A team reads only ``s3://<data bucket>/<team>/...`` and the team's own buckets."""
    if bucket in team.buckets:
        return
    own = f"s3://{platform.data_bucket}/{team.name}/"
    if uri.startswith(own) and len(uri) > len(own):
        return
    buckets = "".join(f", s3://{b}/" for b in team.buckets)
    raise ValidationError(
        field_name,
        f"{field_name} must be under {own}{buckets} (team {team.name}'s data), got {R.show(uri)}",
    )
