"""The renderer: a validated request, its template and one step become an attempt's
``CreateTrainingJob`` kwargs (:func:`render_attempt`; a plain job is a chain of one step).

Nothing here calls AWS; the output is the exact keyword arguments for boto3's
``sagemaker.create_training_job``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import _rules as R
from .after_training.tracking_job import AttemptTracking
from .capacity.chain import EFA_VARIABLES, Step, attempt_name, plain_step
from .capacity.plans import ON_DEMAND, PLAN, SPOT
from .contract import names
from .contract.errors import TemplateError
from .instances import INSTANCE_TYPES, efa_environment
from .locations import checkpoint_s3_uri, make_job_name, output_s3_uri
from .platform import PlatformConfig
from .requests.submit import SubmitRequest, validate_job_name
from .templates.container_start import container_start
from .templates.distribution_kinds import KINDS
from .templates.spec import TemplateSpec

__all__ = [
    "AttemptTracking",
    "JobIdentity",
    "CHECKPOINT_LOCAL_PATH",
    "CODE_CHANNEL",
    "CODE_CHANNEL_SOURCEDIR",
    "TENSORBOARD_LOCAL_PATH",
    "checkpoint_s3_uri",
    "encode_hyperparameters",
    "make_job_name",
    "metric_regex",
    "output_s3_uri",
    "render_attempt",
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
_METRIC_VALUE_RE = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def metric_regex(name: str) -> str:
    """The metric definition regex for ``name`` (the ``ftl_metric`` line in docs/DECISIONS.md)."""
    if type(name) is not str or R.METRIC_NAME_RE.fullmatch(name) is None:
        raise ValueError(f"metric name must match [a-z0-9_]+, got {name!r}")
    return f"ftl_metric name={name} value={_METRIC_VALUE_RE}"


def encode_hyperparameters(d: Mapping[str, Any]) -> dict[str, str]:
    """Every value JSON-encoded (``json.dumps``), as SageMaker SDK v2 does; the toolkit decodes."""
    dumps = json.dumps
    return {str(k): dumps(v) for k, v in d.items()}


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
    job: JobIdentity,
    step: Step,
) -> list[dict[str, str]]:
    merged: dict[str, str] = dict(platform.platform_tags)
    merged.update(template.tags)
    merged.update(req.tags)
    merged[platform.platform_tag_key] = platform.platform_name
    merged[names.TEMPLATE_TAG_KEY] = template.name
    if req.client_token:
        merged[names.CLIENT_TOKEN_TAG_KEY] = req.client_token
    if job.team is not None:
        merged[names.TEAM_TAG_KEY] = job.team
    if job.requested_by:
        who = R.sanitize_tag_value(job.requested_by)
        if who:
            merged[names.REQUESTED_BY_TAG_KEY] = who
    if step.chained:
        # Every attempt of a chain names its ledger job (job events find the job by it).
        merged[names.JOB_NAME_TAG_KEY] = job.name
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
    template: TemplateSpec, platform: PlatformConfig, step: Step
) -> dict[str, Any]:
    """The step's capacity: one type (``InstanceType``) or, for a chain's on-demand step, the
    ordered preferences (``InstancePreferences``); a plan step's plan."""
    resources: dict[str, Any] = {}
    if step.chained and step.kind == ON_DEMAND:
        resources["InstancePreferences"] = [{"InstanceType": t} for t in step.instance_types]
    else:
        resources["InstanceType"] = step.instance_types[0]
    resources["InstanceCount"] = step.instance_count
    resources["VolumeSizeInGB"] = template.volume_size_gb
    if step.kind == PLAN:
        resources["TrainingPlanArn"] = step.plan_arn
    # Instance types with local NVMe storage reject a volume key (the hardware encrypts it).
    types = [INSTANCE_TYPES[t] for t in step.instance_types]
    if platform.kms_key_arn and not any(t.local_nvme for t in types):
        resources["VolumeKmsKeyId"] = platform.kms_key_arn
    if template.keep_alive_seconds > 0 and step.kind != SPOT:
        resources["KeepAlivePeriodInSeconds"] = template.keep_alive_seconds
    return resources


def _stopping_condition(runtime_seconds: int, step: Step) -> dict[str, Any]:
    """The one place ``StoppingCondition`` is built: a spot step waits its own wait on top of
    the runtime."""
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": runtime_seconds}
    if step.kind == SPOT:
        stopping["MaxWaitTimeInSeconds"] = runtime_seconds + int(step.wait_seconds or 0)
    return stopping


def _environment(template: TemplateSpec, step: Step) -> dict[str, str]:
    """EFA's variables where every type the step may get has them, then the template's (a
    chain's step keeps EFA's own: the toolkit's runners set them again from the host's type,
    SM_CURRENT_INSTANCE_TYPE); the tracking environment goes on top."""
    common = [efa_environment(INSTANCE_TYPES[t]) for t in step.instance_types]
    env = {k: v for k, v in common[0].items() if all(c.get(k) == v for c in common)}
    own = template.environment
    env.update({k: v for k, v in own.items() if not (step.chained and k in EFA_VARIABLES)})
    return env


def _step_hyperparameters(hp: dict[str, str], step: Step) -> dict[str, str]:
    """``sagemaker_instance_type`` (smddp's runner reads it) for the step: its one type, or
    left out while SageMaker picks one of several (the runner then takes the host's own)."""
    if "sagemaker_instance_type" in hp:
        if len(step.instance_types) == 1:
            hp["sagemaker_instance_type"] = json.dumps(step.instance_types[0])
        else:
            del hp["sagemaker_instance_type"]
    return hp


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


@dataclass(frozen=True, kw_only=True)
class JobIdentity:
    """Which job an attempt belongs to: its name, the attempt (1-based), its team, who asked
    for it and the training role (a team's; None: the platform's)."""

    name: str
    attempt: int = 1
    team: str | None = None
    requested_by: str | None = None
    role_arn: str | None = None


def _artifact(platform: PlatformConfig, team: str | None) -> str:
    """The artifact bucket, and the team's prefix in it: where output and diagnostics go."""
    return platform.artifact_bucket if team is None else f"{platform.artifact_bucket}/{team}"


def _tracked(
    req: SubmitRequest,
    template: TemplateSpec,
    platform: PlatformConfig,
    step: Step,
    tracking: AttemptTracking | None,
    job: JobIdentity,
) -> dict[str, str]:
    """The attempt's tracking environment (empty: not tracked)."""
    if tracking is None:
        return {}
    return tracking.environment(
        req.tracking,
        template,
        platform=platform.platform_name,
        team=job.team,
        job_name=job.name,
        attempt=job.attempt,
        instance_types=step.instance_types,
        output_s3_uri=f"s3://{_artifact(platform, job.team)}/",
    )


def render_attempt(
    req: SubmitRequest,
    template: TemplateSpec,
    platform: PlatformConfig,
    step: Step,
    tracking: AttemptTracking | None,
    *,
    job: JobIdentity,
) -> dict[str, Any]:
    """One attempt's complete ``create_training_job`` kwargs: the job's request on the step's
    capacity (a plain job's one step is :func:`jobmodel.capacity.chain.plain_step`).

    ``req`` must come from ``validate_submit`` against the same template; the template must
    have its image resolved (``TemplateError`` rule ``image`` if not). The training job is
    the attempt's (``<job>-a<n>`` after the first); its checkpoints, output and run stay the
    job's. With a team, checkpoints, output, TensorBoard and debug data go under the team's
    ``<team>/`` prefixes and the job is tagged ``ftl:team``. ``tracking``: the platform's
    MLflow servers (None: not tracked).
    """
    validate_job_name(job.name)
    image = template.image_uri
    if not image:
        raise TemplateError(
            template.name, "image", "image_uri is not resolved; cannot render a job"
        )
    team = job.team
    artifact = _artifact(platform, team)
    hp = _hyperparameters(req, template, platform, job.name)
    out: dict[str, Any] = {
        "TrainingJobName": attempt_name(job.name, job.attempt),
        "AlgorithmSpecification": _algorithm(template, image),
        "HyperParameters": _step_hyperparameters(hp, step),
        "RoleArn": job.role_arn or platform.role_arn,
    }
    input_config = _input_config(req, template, platform)
    if input_config:
        out["InputDataConfig"] = input_config
    output_config: dict[str, Any] = {"S3OutputPath": f"s3://{artifact}/"}
    if platform.kms_key_arn:
        output_config["KmsKeyId"] = platform.kms_key_arn
    out["OutputDataConfig"] = output_config
    out["ResourceConfig"] = _resource_config(template, platform, step)
    if platform.subnets:
        out["VpcConfig"] = {
            "SecurityGroupIds": list(platform.security_groups),
            "Subnets": list(platform.subnets),
        }
    out["StoppingCondition"] = _stopping_condition(req.max_runtime_seconds, step)
    # A chain's attempt carries the flag only when spot: SageMaker documents
    # InstancePreferences (the on-demand step) as exclusive of it, even false.
    if step.kind == SPOT or not step.chained:
        out["EnableManagedSpotTraining"] = step.kind == SPOT
    if template.checkpoint:
        out["CheckpointConfig"] = {
            "S3Uri": checkpoint_s3_uri(platform, job.name, team),
            "LocalPath": CHECKPOINT_LOCAL_PATH,
        }
    out["EnableNetworkIsolation"] = template.network_isolation
    out["EnableInterContainerTrafficEncryption"] = template.inter_container_encryption
    environment = _environment(template, step)
    environment.update(_tracked(req, template, platform, step, tracking, job))
    if environment:
        out["Environment"] = environment
    if template.infra_check_on:
        # SageMaker's hardware and cluster-network health check before training.
        out["InfraCheckConfig"] = {"EnableInfraCheck": True}
    if template.retry_attempts > 0:
        out["RetryStrategy"] = {"MaximumRetryAttempts": template.retry_attempts}
    out.update(_diagnostics(template, artifact, job.name))
    out["Tags"] = _tags(req, template, platform, job, step)
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
    """A plain, untracked job's request: :func:`render_attempt` with the request's own
    capacity as its one step."""
    job = JobIdentity(name=job_name, team=team, requested_by=requested_by, role_arn=role_arn)
    return render_attempt(req, template, platform, plain_step(req, template), None, job=job)


def request_hash(rendered: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of a rendered request (sorted keys, compact)."""
    canonical = json.dumps(rendered, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
