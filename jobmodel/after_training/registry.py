"""The model registry (issue 27): a completed job's model as one version in its team's group.

Standard library only. The stacks create one SageMaker model package group per team and
template (:func:`group_name`; a single-team deployment has one per template), and the end
effect ``register`` (``jobmodel.jobs.effects``) turns a job that ended ``Completed`` into one
``CreateModelPackage`` request (:func:`create_request`): approval ``PendingManualApproval``,
the training image and the job's ``model.tar.gz`` (what it holds, full model, LoRA adapter or
merged model, is ``archive.archive_kind``'s), the final metrics and the lineage as customer
metadata, and a client token derived from the effect's deduplication id.
``ModelPackageConfig`` on CreateTrainingJob is not used: SageMaker honours it only for
serverless model-customization jobs, not for the platform's script-mode training jobs
(docs/DECISIONS.md, Issue 27).

Exactly one version per job: the performer first looks for a version of the job in the group
(:func:`is_version_of`, by the description's leading ``<job name>:``) and creates one only
when there is none; the client token makes a retried create idempotent where SageMaker honours
it; and the version found or created is recorded on the job with the same write that marks
the effect done (:func:`recorded`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..contract.names import EVALUATE_EFFECT
from .archive import archive_kind

__all__ = [
    "APPROVAL_STATUSES",
    "ENV_MODEL_REGISTRY",
    "FIELDS",
    "NOT_OFFERED_REGIONS",
    "PENDING",
    "RegisteredJob",
    "client_token",
    "create_request",
    "group_name",
    "is_version_of",
    "lineage",
    "model_metrics",
    "model_metrics_uri",
    "recorded",
    "safe_text",
    "version_view",
]

# "on" in both functions' environment: the stacks created the groups, so jobs register.
ENV_MODEL_REGISTRY = "FTL_MODEL_REGISTRY"
PENDING = "PendingManualApproval"
APPROVAL_STATUSES = ("Approved", "Rejected")  # what an admin's review may set
# The job record's attributes describe shows (written with the effect's done mark).
FIELDS = (
    "model_package_arn",
    "model_package_group",
    "model_package_version",
    "model_approval_status",
)
MAX_GROUP_NAME = 63
MAX_METADATA = 50  # CustomerMetadataProperties entries
MAX_KEY, MAX_VALUE = 128, 256
MAX_DESCRIPTION = 1024
# The evaluation's metrics JSON, under the evaluated job's output prefix (issue 36).
METRICS_KEY = "evaluation/model-metrics.json"
# CustomerMetadataProperties keys and values: letters, spaces, digits and _.:/=+-@ only.
_UNSAFE = re.compile(r"[^\w .:/=+\-@]", re.ASCII)
_GROUP_UNSAFE = re.compile(r"[^a-z0-9-]+")
# Serving: the images are the templates' training images (Hugging Face and PyTorch DLCs,
# whose inference toolkit serves model.tar.gz); the types are a documented default.
CONTENT_TYPES = ("application/json",)
REALTIME_TYPES = ("ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.12xlarge")
# Regions whose CloudFormation has no AWS::SageMaker::ModelPackageGroup (cfn-lint 1.x's region
# data, read 2026-11): the stacks create no registry there, and jobs register nothing.
NOT_OFFERED_REGIONS = frozenset(
    {
        "ap-east-2", "ap-south-2", "ap-southeast-4", "ap-southeast-6",
        "cn-north-1", "cn-northwest-1", "us-gov-east-1",
    }
)  # fmt: skip


class RegisteredJob(Protocol):
    """A job as the registry reads it: ``jobmodel.jobs.job.Job``'s attributes it needs (this
    room may not import ``jobs``; a ``Job`` is one)."""

    @property
    def job_name(self) -> str: ...
    @property
    def rendered(self) -> str: ...  # the request its training job was created with, JSON
    @property
    def training_job_name(self) -> str | None: ...
    @property
    def training_job_arn(self) -> str | None: ...
    @property
    def job_arn(self) -> str | None: ...
    @property
    def template(self) -> str: ...
    @property
    def team(self) -> str | None: ...
    @property
    def requested_by(self) -> str | None: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def instance_count(self) -> int: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def attempts(self) -> Sequence[Any] | None: ...
    @property
    def final_metrics(self) -> Mapping[str, float] | None: ...


def group_name(platform: str, template: str, team: str | None = None) -> str:
    """``<platform>-[<team>-]<template>``, lower-case, within SageMaker's 63 characters and
    pattern ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``; a longer name is cut and ends with 8 hex
    digits of its hash, so two long names never meet."""
    parts = [platform, *([team] if team else []), template]
    full = _GROUP_UNSAFE.sub("-", "-".join(parts).lower()).strip("-") or "ftl"
    if len(full) <= MAX_GROUP_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[: MAX_GROUP_NAME - 9].rstrip('-')}-{digest}"


def client_token(dedup: str) -> str:
    """CreateModelPackage's ``ClientToken`` (1-36 of ``[a-zA-Z0-9-]``) for the effect's id."""
    return hashlib.sha256(dedup.encode()).hexdigest()[:32]


def _rendered(job: RegisteredJob) -> dict[str, Any]:
    """The request the job's training job was created with (its ``rendered`` JSON)."""
    try:
        value = json.loads(job.rendered or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _hyperparameters(rendered: Mapping[str, Any]) -> dict[str, str]:
    """The job's hyperparameters as the script sees them (the toolkit's JSON decoded), without
    SageMaker's own ``sagemaker_*`` entries."""
    out: dict[str, str] = {}
    for key, raw in (rendered.get("HyperParameters") or {}).items():
        if str(key).startswith("sagemaker_"):
            continue
        try:
            value = json.loads(raw)
        except (TypeError, ValueError):
            value = raw
        out[str(key)] = value if isinstance(value, str) else json.dumps(value)
    return out


def _source(rendered: Mapping[str, Any]) -> tuple[str, str]:
    """The training source's S3 URI and hash: the asset's key is the hash of its content
    (CDK names assets so); under network isolation the ``code`` channel carries the URI."""
    uri = str((rendered.get("HyperParameters") or {}).get("sagemaker_submit_directory", ""))
    uri = uri.strip('"')
    if not uri.startswith("s3://"):
        for channel in rendered.get("InputDataConfig") or []:
            if channel.get("ChannelName") == "code":
                uri = str(channel["DataSource"]["S3DataSource"]["S3Uri"])
    leaf = uri.rsplit("/", 1)[-1]
    return uri, leaf.split(".", 1)[0]


def _channels(rendered: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(c["ChannelName"]): str(c["DataSource"]["S3DataSource"]["S3Uri"])
        for c in rendered.get("InputDataConfig") or []
        if c.get("ChannelName") != "code" and "S3DataSource" in c.get("DataSource", {})
    }


def model_data_url(job: RegisteredJob) -> str:
    """Where SageMaker wrote the model: ``<S3OutputPath>/<training job>/output/model.tar.gz``
    of the attempt that completed (a capacity chain's later attempt is ``<job>-a<n>``)."""
    rendered = _rendered(job)
    path = str((rendered.get("OutputDataConfig") or {}).get("S3OutputPath", "")).rstrip("/")
    training = str(job.training_job_name or rendered.get("TrainingJobName") or "")
    training = training or str(job.job_name)
    return f"{path}/{training}/output/model.tar.gz"


def safe_text(text: Any, limit: int) -> str:
    """``text`` with every character the metadata pattern refuses as ``_``, cut to fit."""
    return _UNSAFE.sub("_", str(text))[:limit] or "_"


def lineage(job: RegisteredJob) -> dict[str, str]:
    """Where the model came from, as CustomerMetadataProperties (at most 50 entries, keys
    <= 128 and values <= 256 characters, each of the allowed characters): the job first,
    then its input channels, final metrics (``metric.<name>``) and hyperparameters
    (``hp.<name>``) while room is left; ``omitted`` counts what did not fit."""
    rendered = _rendered(job)
    hps = _hyperparameters(rendered)
    uri, digest = _source(rendered)
    fixed: dict[str, Any] = {
        "job_name": job.job_name,
        "job_arn": job.training_job_arn or job.job_arn,
        "template": job.template,
        "team": job.team,
        "requested_by": job.requested_by,
        "source_hash": digest,
        "source_uri": uri,
        "image": (rendered.get("AlgorithmSpecification") or {}).get("TrainingImage"),
        "instance_type": job.instance_type,
        "instance_count": job.instance_count,
        "cost_usd": job.cost_usd,
        "attempts": len(job.attempts) if job.attempts else 1,
    }
    # The training job that made the model, where it is not the job's own name: a chain's
    # later attempt, a sweep's best trial (issue 37).
    trained = rendered.get("TrainingJobName")
    if trained and trained != fixed["job_name"]:
        fixed["training_job"] = trained
    fixed.update(archive_kind(hps).lineage())
    entries = [(k, v) for k, v in fixed.items() if v not in (None, "")]
    metrics = job.final_metrics or {}
    entries += [(f"input.{k}", v) for k, v in sorted(_channels(rendered).items())]
    entries += [(f"metric.{k}", v) for k, v in sorted(metrics.items())]
    entries += [(f"hp.{k}", v) for k, v in sorted(hps.items())]
    out: dict[str, str] = {}
    room = MAX_METADATA - 1  # one left for "omitted"
    for key, value in entries:
        safe_key = safe_text(key, MAX_KEY)
        if len(out) < room and safe_key not in out:
            out[safe_key] = safe_text(value, MAX_VALUE)
    if len(entries) > len(out):
        out["omitted"] = str(len(entries) - len(out))
    return out


def description(job: RegisteredJob) -> str:
    """``<job name>: ...`` (the leading name is how a version is found again)."""
    what = archive_kind(_hyperparameters(_rendered(job))).describe()
    text = f"{job.job_name}: {what}, template {job.template}, team {job.team}"
    return text.replace("\n", " ")[:MAX_DESCRIPTION]


def model_metrics_uri(output_s3_uri: str) -> str:
    """Where the evaluation's results effect writes the metrics JSON of the evaluated job
    whose output prefix is ``output_s3_uri``: ``<prefix>evaluation/model-metrics.json``
    (issue 36)."""
    prefix = output_s3_uri if output_s3_uri.endswith("/") else output_s3_uri + "/"
    return prefix + METRICS_KEY


def model_metrics(
    output_s3_uri: str | None, owed: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """CreateModelPackage's ``ModelMetrics`` of a job (its output prefix and its owed
    effects): the evaluation's metrics JSON for a job that owes an evaluation
    (UpdateModelPackage cannot set them later), else None."""
    if not output_s3_uri or not isinstance(owed, Mapping) or EVALUATE_EFFECT not in owed:
        return None
    statistics = {"ContentType": "application/json", "S3Uri": model_metrics_uri(output_s3_uri)}
    return {"ModelQuality": {"Statistics": statistics}}


def is_version_of(summary: Mapping[str, Any], job_name: str) -> bool:
    """Whether a ListModelPackages summary is the version of ``job_name``."""
    return str(summary.get("ModelPackageDescription") or "").startswith(f"{job_name}:")


def create_request(
    job: RegisteredJob,
    group: str,
    dedup: str,
    *,
    metrics: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The CreateModelPackage parameters that register ``job``'s model in ``group``
    (``metrics``: its ``ModelMetrics``, :func:`model_metrics`)."""
    rendered = _rendered(job)
    image = str((rendered.get("AlgorithmSpecification") or {}).get("TrainingImage", ""))
    uri, digest = _source(rendered)
    return {
        **({"ModelMetrics": metrics} if metrics else {}),
        "ModelPackageGroupName": group,
        "ModelPackageDescription": description(job),
        "ModelApprovalStatus": PENDING,
        "InferenceSpecification": {
            "Containers": [{"Image": image, "ModelDataUrl": model_data_url(job)}],
            "SupportedContentTypes": list(CONTENT_TYPES),
            "SupportedResponseMIMETypes": list(CONTENT_TYPES),
            "SupportedRealtimeInferenceInstanceTypes": list(REALTIME_TYPES),
        },
        "MetadataProperties": {
            "GeneratedBy": str(job.training_job_arn or job.job_arn or ""),
            "CommitId": digest,
            "Repository": uri,
            "ProjectId": str(job.job_name),
        },
        "CustomerMetadataProperties": lineage(job),
        "ClientToken": client_token(dedup),
    }


def recorded(group: str, described: Mapping[str, Any]) -> dict[str, Any]:
    """The job attributes (:data:`FIELDS`) for a version as created or described."""
    return {
        "model_package_arn": described["ModelPackageArn"],
        "model_package_group": group,
        "model_package_version": described.get("ModelPackageVersion"),
        "model_approval_status": described.get("ModelApprovalStatus", PENDING),
    }


def version_view(described: Mapping[str, Any]) -> dict[str, Any]:
    """A version as ``models`` lists it: ARN, version, approval and the lineage."""
    return {
        "model_package_arn": described.get("ModelPackageArn"),
        "model_package_group": described.get("ModelPackageGroupName"),
        "model_package_version": described.get("ModelPackageVersion"),
        "model_approval_status": described.get("ModelApprovalStatus"),
        "approval_description": described.get("ApprovalDescription"),
        "description": described.get("ModelPackageDescription"),
        "created_at": _iso(described.get("CreationTime")),
        "lineage": dict(described.get("CustomerMetadataProperties") or {}),
    }


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)
