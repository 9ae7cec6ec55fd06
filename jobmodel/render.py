"""The renderer: a validated request plus its template become ``CreateTrainingJob`` kwargs.

Nothing here calls AWS; the output is the exact keyword arguments for boto3's
``sagemaker.create_training_job``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from . import _rules as R
from .contract import names as N
from .contract.errors import TemplateError, ValidationError
from .instances import INSTANCE_TYPES, efa_environment
from .platform import PlatformConfig
from .requests.submit import SubmitRequest, validate_job_name
from .templates.container_start import container_start
from .templates.distribution_kinds import KINDS
from .templates.spec import TemplateSpec

__all__ = [
    "CHECKPOINT_LOCAL_PATH",
    "CODE_CHANNEL",
    "CODE_CHANNEL_SOURCEDIR",
    "TENSORBOARD_LOCAL_PATH",
    "checkpoint_s3_uri",
    "encode_hyperparameters",
    "make_job_name",
    "metric_regex",
    "output_s3_uri",
    "render_create_training_job",
    "request_hash",
]

CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
# Network isolation: SDK v2 (EstimatorBase, ``enable_network_isolation()``) stages the
# source archive as an input channel named ``code`` and points the toolkit at its local copy.
CODE_CHANNEL = "code"
CODE_CHANNEL_SOURCEDIR = "/opt/ml/input/data/code/sourcedir.tar.gz"
TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"
CONTAINER_LOG_LEVEL = 20
_NAME_SUFFIX_LEN = len("-YYYYMMDD-HHMM-xxxx")
_MAX_PREFIX_LEN = 63 - _NAME_SUFFIX_LEN
_HEX = frozenset("0123456789abcdef")
_METRIC_VALUE_RE = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def make_job_name(
    prefix: str, *, now: datetime, rand_hex: str, team: str | None = None, reserve: int = 0
) -> str:
    """``<prefix>-YYYYMMDD-HHMM-xxxx``: a valid, unique-enough SageMaker job name.

    The prefix is sanitised (runs outside ``[a-zA-Z0-9-]`` become one ``-``, edge
    dashes dropped) and cut so the name fits 63 characters; ``now`` is taken in
    UTC (a naive datetime is read as UTC); ``rand_hex`` is 4 hex digits. With ``team``
    the name starts ``<team>-`` (a prefix that already starts so is not doubled).
    ``reserve``: characters left free after the name (a chained job's attempts are
    ``<name>-a<n>``, ``jobmodel.capacity.chain.attempt_name``).
    """
    if type(prefix) is not str:
        raise ValidationError("job_name", "job_name must be a string")
    clean = R.sanitize_job_prefix(prefix)
    if not clean:
        raise ValidationError(
            "job_name", f"job_name must contain a letter or digit, got {R.show(prefix)}"
        )
    suffix = rand_hex.lower()
    if len(suffix) != 4 or not _HEX.issuperset(suffix):
        raise ValueError(f"rand_hex must be 4 hex digits, got {rand_hex!r}")
    if team is not None and not (clean == team or clean.startswith(team + "-")):
        clean = f"{team}-{clean}"
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    clean = clean[: _MAX_PREFIX_LEN - reserve].rstrip("-")
    stamp = f"{now.year:04d}{now.month:02d}{now.day:02d}-{now.hour:02d}{now.minute:02d}"
    return f"{clean}-{stamp}-{suffix}"


def metric_regex(name: str) -> str:
    """The metric definition regex for ``name`` (the ``ftl_metric`` line in docs/DECISIONS.md)."""
    if type(name) is not str or R.METRIC_NAME_RE.fullmatch(name) is None:
        raise ValueError(f"metric name must match [a-z0-9_]+, got {name!r}")
    return f"ftl_metric name={name} value={_METRIC_VALUE_RE}"


def encode_hyperparameters(d: Mapping[str, Any]) -> dict[str, str]:
    """Every value JSON-encoded (``json.dumps``), as SageMaker SDK v2 does; the toolkit decodes."""
    dumps = json.dumps
    return {str(k): dumps(v) for k, v in d.items()}


def _team_dir(team: str | None) -> str:
    return "" if team is None else f"{team}/"


def checkpoint_s3_uri(platform: PlatformConfig, job_name: str, team: str | None = None) -> str:
    """Where a job's checkpoints live: ``s3://<checkpoint bucket>/[<team>/]<job name>/``."""
    return f"s3://{platform.checkpoint_bucket}/{_team_dir(team)}{job_name}/"


def output_s3_uri(platform: PlatformConfig, job_name: str, team: str | None = None) -> str:
    """Where SageMaker writes a job's output: ``s3://<artifact bucket>/[<team>/]<job name>/``."""
    return f"s3://{platform.artifact_bucket}/{_team_dir(team)}{job_name}/"


def _hyperparameters(
    req: SubmitRequest, template: TemplateSpec, platform: PlatformConfig, job_name: str
) -> dict[str, str]:
    hp: dict[str, Any] = dict(template.hyperparameters)
    hp.update(req.hyperparameters)
    hp["sagemaker_program"] = template.entry_point
    # An isolated container cannot reach S3 itself: it reads the archive from the code channel.
    hp["sagemaker_submit_directory"] = (
        CODE_CHANNEL_SOURCEDIR if template.network_isolation else platform.source_s3_uri
    )
    hp["sagemaker_container_log_level"] = CONTAINER_LOG_LEVEL
    hp["sagemaker_job_name"] = job_name
    hp["sagemaker_region"] = platform.region
    dist = template.distribution
    hp.update(KINDS[dist.kind].render(dist, req.instance_type))
    return encode_hyperparameters(hp)


def _code_channel(platform: PlatformConfig) -> dict[str, Any]:
    """The ``code`` channel SDK v2 adds under network isolation (``_Job._prepare_channel``
    with the uploaded archive's S3 URI): an S3Prefix, FullyReplicated source with no
    ``InputMode`` or ``ContentType`` of its own, so the job's input mode applies."""
    return {
        "ChannelName": CODE_CHANNEL,
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": platform.source_s3_uri,
                "S3DataDistributionType": "FullyReplicated",
            }
        },
    }


def _tags(
    req: SubmitRequest,
    template: TemplateSpec,
    platform: PlatformConfig,
    requested_by: str | None,
    team: str | None,
) -> list[dict[str, str]]:
    merged: dict[str, str] = dict(platform.platform_tags)
    merged.update(template.tags)
    merged.update(req.tags)
    merged[platform.platform_tag_key] = platform.platform_name
    merged[N.TEMPLATE_TAG_KEY] = template.name
    if req.client_token:
        merged[N.CLIENT_TOKEN_TAG_KEY] = req.client_token
    if team is not None:
        merged[N.TEAM_TAG_KEY] = team
    if requested_by:
        who = R.sanitize_tag_value(requested_by)
        if who:
            merged[N.REQUESTED_BY_TAG_KEY] = who
    return [{"Key": k, "Value": v} for k, v in merged.items()]


def _algorithm(template: TemplateSpec, image: str) -> dict[str, Any]:
    algorithm: dict[str, Any] = {"TrainingImage": image, "TrainingInputMode": template.input_mode}
    if template.image_entrypoint:
        # Our init as PID 1, so a stop reaches the training processes (issue 34).
        algorithm.update(container_start(template.image_entrypoint, template.entry_point))
    if template.metrics:
        algorithm["MetricDefinitions"] = [
            {"Name": m, "Regex": metric_regex(m)} for m in template.metrics
        ]
    algorithm["EnableSageMakerMetricsTimeSeries"] = True
    return algorithm


def _input_config(
    req: SubmitRequest, template: TemplateSpec, platform: PlatformConfig
) -> list[dict[str, Any]]:
    """One channel per request input (the template's distribution and content type), plus
    the ``code`` channel under network isolation."""
    channels = template.channels
    input_config = []
    for name, uri in req.inputs.items():
        channel = channels[name]
        entry: dict[str, Any] = {
            "ChannelName": name,
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": uri,
                    "S3DataDistributionType": channel.distribution,
                }
            },
            "InputMode": template.input_mode,
        }
        if channel.content_type:
            entry["ContentType"] = channel.content_type
        input_config.append(entry)
    if template.network_isolation:
        input_config.append(_code_channel(platform))
    return input_config


def _resource_config(
    req: SubmitRequest, template: TemplateSpec, platform: PlatformConfig
) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "InstanceType": req.instance_type,
        "InstanceCount": req.instance_count,
        "VolumeSizeInGB": template.volume_size_gb,
    }
    # Instance types with local NVMe storage reject a volume key (the hardware encrypts it).
    if platform.kms_key_arn and not INSTANCE_TYPES[req.instance_type].local_nvme:
        resources["VolumeKmsKeyId"] = platform.kms_key_arn
    if template.keep_alive_seconds > 0 and not req.spot:
        resources["KeepAlivePeriodInSeconds"] = template.keep_alive_seconds
    return resources


def _stopping_condition(req: SubmitRequest, template: TemplateSpec) -> dict[str, Any]:
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": req.max_runtime_seconds}
    if req.spot:
        wait = req.max_wait_seconds
        if wait is None:
            wait = max(template.max_wait_seconds, req.max_runtime_seconds)
        stopping["MaxWaitTimeInSeconds"] = wait
    return stopping


def _diagnostics(template: TemplateSpec, artifact: str, job_name: str) -> dict[str, Any]:
    """TensorBoard, Debugger and profiler output: each only when the template asks for it
    (the profiler is switched off explicitly otherwise)."""
    out: dict[str, Any] = {}
    if template.tensorboard:
        out["TensorBoardOutputConfig"] = {
            "S3OutputPath": f"s3://{artifact}/{job_name}/tensorboard/",
            "LocalPath": TENSORBOARD_LOCAL_PATH,
        }
    if template.debugger:
        out["DebugHookConfig"] = {"S3OutputPath": f"s3://{artifact}/{job_name}/debug/"}
    if template.profiler:
        out["ProfilerConfig"] = {"S3OutputPath": f"s3://{artifact}/{job_name}/profiler/"}
    else:
        out["ProfilerConfig"] = {"DisableProfiler": True}
    return out


def render_create_training_job(
    req: SubmitRequest,
    template: TemplateSpec,
    platform: PlatformConfig,
    *,
    job_name: str,
    requested_by: str | None = None,
    team: str | None = None,
    role_arn: str | None = None,
) -> dict[str, Any]:
    """The complete ``create_training_job`` kwargs for ``req`` on ``template``.

    ``req`` must come from ``validate_submit`` against the same template; the
    template must have its image resolved (``TemplateError`` rule ``image`` if not).
    With ``team``, checkpoints, output, TensorBoard and debug data go under the team's
    ``<team>/`` prefixes, the job is tagged ``ftl:team``, and ``role_arn`` (the team's
    training role) replaces the platform's role.
    """
    validate_job_name(job_name)
    image = template.image_uri
    if not image:
        raise TemplateError(
            template.name, "image", "image_uri is not resolved; cannot render a job"
        )
    artifact = (
        platform.artifact_bucket + "/" + team if team is not None else platform.artifact_bucket
    )
    out: dict[str, Any] = {
        "TrainingJobName": job_name,
        "AlgorithmSpecification": _algorithm(template, image),
        "HyperParameters": _hyperparameters(req, template, platform, job_name),
        "RoleArn": role_arn or platform.role_arn,
    }
    input_config = _input_config(req, template, platform)
    if input_config:
        out["InputDataConfig"] = input_config
    output_config: dict[str, Any] = {"S3OutputPath": f"s3://{artifact}/"}
    if platform.kms_key_arn:
        output_config["KmsKeyId"] = platform.kms_key_arn
    out["OutputDataConfig"] = output_config
    out["ResourceConfig"] = _resource_config(req, template, platform)
    if platform.subnets:
        out["VpcConfig"] = {
            "SecurityGroupIds": list(platform.security_groups),
            "Subnets": list(platform.subnets),
        }
    out["StoppingCondition"] = _stopping_condition(req, template)
    out["EnableManagedSpotTraining"] = req.spot
    if template.checkpoint:
        out["CheckpointConfig"] = {
            "S3Uri": checkpoint_s3_uri(platform, job_name, team),
            "LocalPath": CHECKPOINT_LOCAL_PATH,
        }
    out["EnableNetworkIsolation"] = template.network_isolation
    out["EnableInterContainerTrafficEncryption"] = template.inter_container_encryption
    environment = efa_environment(INSTANCE_TYPES[req.instance_type])
    environment.update(template.environment)
    if environment:
        out["Environment"] = environment
    if template.infra_check_on:
        # SageMaker's hardware and cluster-network health check before training.
        out["InfraCheckConfig"] = {"EnableInfraCheck": True}
    if template.retry_attempts > 0:
        out["RetryStrategy"] = {"MaximumRetryAttempts": template.retry_attempts}
    out.update(_diagnostics(template, artifact, job_name))
    out["Tags"] = _tags(req, template, platform, requested_by, team)
    return out


def request_hash(rendered: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of a rendered request (sorted keys, compact)."""
    canonical = json.dumps(rendered, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
