"""Run-time validation of a caller's submit request against the deployed catalog.

``validate_submit`` is a pure function: it reads the payload, the catalog and the
platform configuration, and either returns a ``SubmitRequest`` with every default
applied or raises ``ValidationError`` / ``NotFound`` naming the offending field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .. import _rules as R
from ..contract.errors import ValidationError
from ..platform import PlatformConfig
from ..teams import Team
from ..templates.spec import TemplateSpec
from . import submit_parts as P

__all__ = ["SUBMIT_FIELDS", "SubmitRequest", "validate_job_name", "validate_submit"]

SUBMIT_FIELDS: frozenset[str] = frozenset(
    {
        "action",
        "template",
        "job_name",
        "hyperparameters",
        "instance_type",
        "instance_count",
        "spot",
        "max_runtime_seconds",
        "max_wait_seconds",
        "inputs",
        "tags",
        "client_token",
        "dry_run",
        "priority",
        "capacity",
    }
)
MAX_JOB_NAME_PREFIX = 128


@dataclass(frozen=True, kw_only=True)
class SubmitRequest:
    """A validated submit request with the template's defaults applied.

    ``hyperparameters`` holds the caller's overrides only (canonical values);
    ``inputs`` the effective channel URIs (caller's plus template defaults);
    ``tags`` the caller's tags only; ``max_wait_seconds`` is None for on-demand jobs;
    ``priority`` is the Batch scheduling priority in queue mode (the template's default
    applied) and None in direct mode.
    """

    template: str
    job_name_prefix: str
    hyperparameters: Mapping[str, Any]
    instance_type: str
    instance_count: int
    spot: bool
    max_runtime_seconds: int
    max_wait_seconds: int | None
    inputs: Mapping[str, str]
    tags: Mapping[str, str]
    client_token: str | None = None
    dry_run: bool = False  # not part of the request's identity (fingerprint)
    priority: int | None = None
    capacity: tuple[str, ...] | None = None  # the chain steps chosen (None: the whole chain)

    def __post_init__(self) -> None:
        for name in ("hyperparameters", "inputs", "tags"):
            value = getattr(self, name)
            if not isinstance(value, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, ``client_token`` included; ``priority`` only when set (so
        a direct-mode request's form and fingerprint are what they were before queue mode)."""
        body = {
            "template": self.template,
            "job_name_prefix": self.job_name_prefix,
            "hyperparameters": dict(self.hyperparameters),
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "spot": self.spot,
            "max_runtime_seconds": self.max_runtime_seconds,
            "max_wait_seconds": self.max_wait_seconds,
            "inputs": dict(self.inputs),
            "tags": dict(self.tags),
            "client_token": self.client_token,
        }
        if self.priority is not None:
            body["priority"] = self.priority
        if self.capacity is not None:
            body["capacity"] = list(self.capacity)
        return body

    def fingerprint(self) -> str:
        """sha256 hex of the normalised request (defaults applied, sorted keys).

        Leaves out ``client_token`` (and ``action``): two submits with the same token
        are the same request exactly when their fingerprints match.
        """
        body = self.to_dict()
        del body["client_token"]
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def validate_job_name(name: Any) -> str:
    """A SageMaker training job name for describe/stop, or ``ValidationError`` on ``job_name``."""
    if type(name) is not str or not 1 <= len(name) <= 63 or R.JOB_NAME_RE.fullmatch(name) is None:
        raise ValidationError(
            "job_name",
            "job_name must be 1 to 63 characters of [a-zA-Z0-9-], starting and ending with a "
            "letter or digit, "
            f"got {R.show(name)}",
        )
    return name


def validate_submit(
    payload: Any,
    catalog: Mapping[str, TemplateSpec],
    platform: PlatformConfig,
    *,
    team: Team | None = None,
    scheduler: str = "direct",
    queue_capacity: int | None = None,
) -> SubmitRequest:
    """Check a submit request against ``catalog`` and ``platform``; apply the defaults.

    With ``team`` (a teams deployment), inputs must lie under ``s3://<data bucket>/<team>/``
    or in one of the team's ``buckets``, and a template's default input prefix is read from
    under the team's prefix. Raises ``ValidationError`` (``field`` names the offending
    field, ``a.b`` for nested keys) or ``NotFound`` (unknown template, field ``template``).
    ``scheduler`` is the platform's ``ftl:scheduler``: ``priority`` is accepted only when it
    is ``queue`` (``jobmodel.capacity.scheduler``); ``queue_capacity`` its queue's capacity in
    instances: a job needing more could never start. One function per part of the request
    (``jobmodel.requests.submit_parts``), checked in this order.
    """
    P.check_fields(payload, SUBMIT_FIELDS)
    spec = P.template(payload, catalog)
    prefix = P.job_name_prefix(payload, spec, MAX_JOB_NAME_PREFIX)
    overrides = P.hyperparameters(payload, spec)
    instance_type, count = P.instances(payload, spec)
    P.fits_queue(count, queue_capacity if scheduler == "queue" else None)
    spot, runtime, max_wait = P.spot_and_stopping(payload, spec)
    inputs = P.inputs(payload, spec, platform, team)
    queued = scheduler == "queue"
    tags = P.tags(payload, spec, platform, team, queued=queued)
    priority = P.priority(payload, spec, queued=queued)
    token, dry_run = P.flags(payload)
    chosen = P.capacity(payload, spec)
    return SubmitRequest(
        template=spec.name,
        job_name_prefix=prefix,
        hyperparameters=overrides,
        instance_type=instance_type,
        instance_count=count,
        spot=spot,
        max_runtime_seconds=runtime,
        max_wait_seconds=max_wait if spot else None,
        inputs=inputs,
        tags=tags,
        client_token=token,
        dry_run=dry_run,
        priority=priority,
        capacity=chosen,
    )
