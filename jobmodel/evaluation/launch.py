"""The evaluation job of a Completed job (issue 36): its name, its request and its record.

Pure. An evaluation is a job of the platform, owned by the job it evaluates: a plain job
(a chain of one step) of kind ``evaluation`` whose record names the evaluated job
(``evaluation_of``) and the policy it runs. Its ``CreateTrainingJob`` request is derived from
the evaluated job's own rendered request, so it runs with what that job ran with (role,
image, VPC, network isolation, KMS keys, the source directory, tags), and changes only what
the evaluation is:

* ``TrainingJobName``: :func:`evaluation_job_name` (the job's name and ``-eval``);
* the entry point ``evaluate.py`` (our PID-1 init watches it, ``templates.container_start``),
  the policy's image if it names one (then the image's own start: its ENTRYPOINT is not
  recorded), and one metric definition per gated metric;
* hyperparameters and channels from ``evaluation.arguments`` (single process: no
  ``sagemaker_*`` distribution key survives);
* one instance of the policy's type (or the template's), spot as the policy says, its time
  limit, twice that to wait for spot capacity (at most 28 days);
* no checkpoints, TensorBoard output, infrastructure check or EFA variables (one process on
  one instance), the job's output prefix its own, the tracking variables the evaluated job's
  run (``evaluation.tracking``), and the ``ftl:job-name`` tag its own name.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..after_training.archive import archive_kind
from ..after_training.registry import model_data_url
from ..contract import names
from ..instances import INSTANCE_TYPES, efa_environment
from ..jobs.job import Job
from ..render import metric_regex
from ..templates.container_start import container_start
from ..templates.evaluation_policy import EvaluationPolicy
from ..templates.spec import TemplateSpec
from . import arguments
from .tracking import evaluation_tracking_environment

__all__ = [
    "ENTRY_POINT",
    "EVALUATION_OF_TAG_KEY",
    "MAX_WAIT_SECONDS",
    "SUFFIX",
    "evaluation_job_name",
    "evaluation_request",
    "policy_of",
]

ENTRY_POINT = "evaluate.py"
SUFFIX = "-eval"
MAX_NAME = 63  # TrainingJobName
MAX_WAIT_SECONDS = 2_419_200  # StoppingCondition.MaxWaitTimeInSeconds, 28 days
# The evaluation job's tag naming the job it evaluates (besides ``ftl:job-name``, its own).
EVALUATION_OF_TAG_KEY = "ftl:evaluation-of"
_DROPPED = ("CheckpointConfig", "TensorBoardOutputConfig", "InfraCheckConfig", "DebugHookConfig")
# Hyperparameters the toolkit reads besides the entrypoint's own (kept from the job's).
_TOOLKIT_KEYS = ("sagemaker_submit_directory", "sagemaker_region", "sagemaker_container_log_level")


def evaluation_job_name(job_name: str) -> str:
    """``<job name>-eval``; a job name too long for it keeps its end (the date and random
    suffix that make it unique) and a hash of the whole, so two jobs never share one."""
    name = job_name + SUFFIX
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(job_name.encode()).hexdigest()[:6]
    room = MAX_NAME - len(SUFFIX) - len(digest) - 1
    return f"{job_name[:room].rstrip('-')}-{digest}{SUFFIX}"


def policy_of(job: Job) -> EvaluationPolicy | None:
    """The policy a job's record says it is evaluated with (``evaluation_policy``, set at
    its claim); None for a job that is not evaluated."""
    if not job.evaluation_policy:
        return None
    return EvaluationPolicy.from_dict(json.loads(job.evaluation_policy))


def _decoded(hyperparameters: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in hyperparameters.items():
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def evaluation_request(
    job: Job,
    policy: EvaluationPolicy,
    template: TemplateSpec,
    *,
    team_data_prefix: str,
) -> dict[str, Any]:
    """The evaluation job's ``CreateTrainingJob`` request for ``job`` (the evaluated job,
    Completed: its ``rendered`` request and the training job that completed)."""
    parent = json.loads(job.rendered or "{}")
    request = copy.deepcopy(dict(parent))
    name = evaluation_job_name(job.job_name)
    # What the tracking's reader of a record takes.
    seen = {"job_name": job.job_name, "rendered": parent}
    if job.training_job_name:
        seen["training_job_name"] = job.training_job_name
    training = _decoded(parent.get("HyperParameters") or {})
    archive = archive_kind(training)
    hps: dict[str, Any] = {k: training[k] for k in _TOOLKIT_KEYS if k in training}
    # The training's own entries keep their decoded values, encoded once below: the strings
    # ``arguments`` gives for them would be encoded twice (a JSON object's value quoted and
    # escaped, past the 256 characters a value may have: gpt-tp-sharded's ``mp_parameters``).
    for key, value in arguments.hyperparameters(policy, archive, training).items():
        hps[key] = value if key in arguments.EVAL_KEYS else training.get(key, value)
    hps.update(sagemaker_program=ENTRY_POINT, sagemaker_job_name=name)
    code = [c for c in parent.get("InputDataConfig") or [] if c["ChannelName"] == "code"]
    training_channels = {
        c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"]
        for c in parent.get("InputDataConfig") or []
        if c["ChannelName"] != "code"
    }
    channels = arguments.channels(
        policy,
        archive,
        model_data_url=model_data_url(job),
        training_channels=training_channels,
        team_data_prefix=team_data_prefix,
    )
    instance_type = policy.instance_type or template.default_instance_type
    request.update(
        TrainingJobName=name,
        AlgorithmSpecification=_algorithm(parent["AlgorithmSpecification"], policy, template),
        HyperParameters={k: json.dumps(v) for k, v in hps.items()},
        InputDataConfig=[*(_channel(n, u) for n, u in channels.items()), *code],
        ResourceConfig=_resources(parent["ResourceConfig"], instance_type),
        StoppingCondition=_stopping(policy),
        EnableManagedSpotTraining=policy.spot,
        Environment=_environment(parent.get("Environment") or {}, seen),
        Tags=_tags(parent.get("Tags") or [], name, job.job_name),
    )
    for key in _DROPPED:
        request.pop(key, None)
    if not request["Environment"]:
        request.pop("Environment")
    return request


def _algorithm(
    parent: Mapping[str, Any], policy: EvaluationPolicy, template: TemplateSpec
) -> dict[str, Any]:
    algorithm: dict[str, Any] = {
        "TrainingImage": policy.image_uri or parent["TrainingImage"],
        "TrainingInputMode": parent.get("TrainingInputMode", "File"),
    }
    if template.image_entrypoint and not policy.image_uri:
        algorithm.update(container_start(template.image_entrypoint, ENTRY_POINT))
    gated = list(dict.fromkeys(g.metric for g in policy.gate))
    if gated:
        algorithm["MetricDefinitions"] = [{"Name": m, "Regex": metric_regex(m)} for m in gated]
    return algorithm


def _channel(name: str, uri: str) -> dict[str, Any]:
    source = {"S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": "FullyReplicated"}
    return {"ChannelName": name, "DataSource": {"S3DataSource": source}, "InputMode": "File"}


def _resources(parent: Mapping[str, Any], instance_type: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "InstanceType": instance_type,
        "InstanceCount": 1,
        "VolumeSizeInGB": parent.get("VolumeSizeInGB", 30),
    }
    known = INSTANCE_TYPES.get(instance_type)
    if parent.get("VolumeKmsKeyId") and not (known and known.local_nvme):
        out["VolumeKmsKeyId"] = parent["VolumeKmsKeyId"]
    return out


def _stopping(policy: EvaluationPolicy) -> dict[str, Any]:
    out = {"MaxRuntimeInSeconds": policy.max_runtime_seconds}
    if policy.spot:
        out["MaxWaitTimeInSeconds"] = min(2 * policy.max_runtime_seconds, MAX_WAIT_SECONDS)
    return out


def _environment(parent: Mapping[str, str], job: Mapping[str, Any]) -> dict[str, str]:
    efa_keys: set[str] = set()
    for known in INSTANCE_TYPES.values():
        efa_keys.update(efa_environment(known))
    tracking = set(names.TRACKING_VARIABLES)
    out = {k: v for k, v in parent.items() if k not in efa_keys and k not in tracking}
    out.update(evaluation_tracking_environment(job))
    return out


def _tags(parent: list[Mapping[str, str]], name: str, evaluated: str) -> list[dict[str, str]]:
    tags = {t["Key"]: t["Value"] for t in parent}
    if names.JOB_NAME_TAG_KEY in tags:
        tags[names.JOB_NAME_TAG_KEY] = name
    tags[EVALUATION_OF_TAG_KEY] = evaluated
    return [{"Key": k, "Value": v} for k, v in tags.items()]
