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
from ..after_training.tracking import TrackingConfig
from ..contract.errors import ValidationError
from ..platform import PlatformConfig
from ..teams import Team
from ..templates.spec import TemplateSpec
from . import submit_fields as SF
from . import submit_parts as P
from .submit_fields import SUBMIT_FIELDS

__all__ = ["SUBMIT_FIELDS", "SubmitRequest", "validate_job_name", "validate_submit"]

MAX_JOB_NAME_PREFIX = SF.MAX_JOB_NAME_PREFIX


@dataclass(frozen=True, kw_only=True)
class SubmitRequest:
    """A validated submit request with the template's defaults applied.

    ``hyperparameters`` holds the caller's overrides only (canonical values);
    ``inputs`` the effective channel URIs (caller's plus template defaults);
    ``tags`` the caller's tags only; ``max_wait_seconds`` is None for on-demand jobs;
    ``priority`` is the Batch scheduling priority in queue mode (the template's default
    applied) and None in direct mode.

    One attribute per kept row of ``submit_fields.FIELDS`` (its ``attr``; a test holds the
    two equal): the rows say how each is read, shown and fingerprinted.
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
    # The caller's ``tracking`` (None: the template's or platform's default;
    # jobmodel.after_training.tracking).
    tracking: bool | None = None

    def __post_init__(self) -> None:
        for row in SF.FIELDS:
            value = getattr(self, row.attr, None) if row.kept else None
            if row.json_type == "object" and isinstance(value, Mapping):
                if not isinstance(value, MappingProxyType):
                    object.__setattr__(self, row.attr, MappingProxyType(dict(value)))

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, ``client_token`` included; the fields added after the first
        release (``priority``, ``capacity``) only when set, so an older request's form and
        fingerprint are what they were (``submit_fields.form``)."""
        return SF.form(self)

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> SubmitRequest:
        """The request :meth:`to_dict` wrote (the ledger's ``request``): each kept row's
        value, a list read back as a tuple; a row the form left out takes its default."""
        kept = {row.attr for row in SF.FIELDS if row.kept}
        values: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in body.items() if k in kept
        }
        return cls(**values)

    def fingerprint(self) -> str:
        """sha256 hex of the normalised request (defaults applied, sorted keys).

        Covers the rows of ``submit_fields.FIELDS`` that are part of the request's identity:
        it leaves out ``client_token`` (and ``action``, ``dry_run``): two submits with the same
        token are the same request exactly when their fingerprints match.
        """
        return _digest(SF.identity(self))

    def recorded(self) -> tuple[dict[str, Any], str]:
        """What a job's first record keeps of the request: its form (:meth:`to_dict`) and its
        :meth:`fingerprint`, from one pass over the fields."""
        body = SF.form(self)
        return body, _digest(SF.identity_of(body))


def _digest(body: Mapping[str, Any]) -> str:
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
    tracking: TrackingConfig | None = None,
) -> SubmitRequest:
    """Check a submit request against ``catalog`` and ``platform``; apply the defaults.

    With ``team`` (a teams deployment), inputs must lie under ``s3://<data bucket>/<team>/``
    or in one of the team's ``buckets``, and a template's default input prefix is read from
    under the team's prefix. Raises ``ValidationError`` (``field`` names the offending
    field, ``a.b`` for nested keys) or ``NotFound`` (unknown template, field ``template``).
    ``scheduler`` is the platform's ``ftl:scheduler``: ``priority`` is accepted only when it
    is ``queue`` (``jobmodel.capacity.scheduler``); ``queue_capacity`` its queue's capacity in
    instances: a job needing more could never start. ``tracking`` is the platform's MLflow
    configuration (``jobmodel.after_training.tracking``; None: none). The fields are read and
    checked in the
    order of their rows in ``jobmodel.requests.submit_fields.FIELDS``.
    """
    P.check_fields(payload, SUBMIT_FIELDS)
    reading = SF.Reading(
        payload=payload,
        catalog=catalog,
        platform=platform,
        team=team,
        queued=scheduler == "queue",
        queue_capacity=queue_capacity,
        tracking=tracking,
    )
    return SubmitRequest(**SF.read_all(reading))
