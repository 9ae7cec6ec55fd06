"""The services' documented cross-field rules, each with its source and a planted violation.

botocore's models hold per-field limits only (:mod:`.model`); these rules span fields or come
from the services' documentation strings and API reference pages. Each :class:`Rule` says
where the rule is written (``source``), checks a request (``problem``: None when it keeps the
rule) and plants a violation into a request that keeps it (``plant``), so a test shows each
rule catches what it is for. ``CreateTrainingJob`` rules apply to a ``SubmitServiceJob``'s
payload too (Batch hands it to SageMaker).
"""

from __future__ import annotations

import copy
import json
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobmodel._rules import aws_len

from . import rules_tuner as T
from .rules_notify import plant_publish, plant_put_events, publish, put_events

Params = Mapping[str, Any]
SM = "sagemaker CreateTrainingJob"
BATCH = "batch SubmitServiceJob"
EVENTS = "events PutEvents"
SNS = "sns Publish"
TUNER = "sagemaker CreateHyperParameterTuningJob"
_EVENTS_API = "https://docs.aws.amazon.com/eventbridge/latest/APIReference/"
_SNS_API = "https://docs.aws.amazon.com/sns/latest/api/"
_SM_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/"
_BATCH_API = "https://docs.aws.amazon.com/batch/latest/APIReference/"
_BATCH_NAME = frozenset(string.ascii_letters + string.digits + "-_")
_QUOTA_SHARE = _BATCH_NAME


@dataclass(frozen=True)
class Rule:
    name: str
    applies_to: str  # SM, BATCH, EVENTS, SNS or TUNER
    source: str
    problem: Callable[[Params], str | None]
    plant: Callable[[dict[str, Any]], None]  # makes a good request break the rule


def _rc(p: Params) -> Mapping[str, Any]:
    return p.get("ResourceConfig") or {}


def _spot(p: Params) -> bool:
    return p.get("EnableManagedSpotTraining") is True


# ----------------------------------------------------------------- CreateTrainingJob
def _spot_wait(p: Params) -> str | None:
    stop = p.get("StoppingCondition") or {}
    wait, runtime = stop.get("MaxWaitTimeInSeconds"), stop.get("MaxRuntimeInSeconds")
    if _spot(p) and wait is None:
        return "a managed spot job needs StoppingCondition.MaxWaitTimeInSeconds"
    if wait is not None and not _spot(p):
        return "MaxWaitTimeInSeconds is the wait of a managed spot job; this job is not spot"
    if wait is not None and runtime is not None and wait < runtime:
        return f"MaxWaitTimeInSeconds {wait} < MaxRuntimeInSeconds {runtime}"
    return None


def _plant_spot_wait(p: dict[str, Any]) -> None:
    p["EnableManagedSpotTraining"] = True
    stop = p.setdefault("StoppingCondition", {"MaxRuntimeInSeconds": 3600})
    stop["MaxWaitTimeInSeconds"] = stop["MaxRuntimeInSeconds"] - 1


_EXCLUSIVE = ("InstanceType", "InstanceGroups", "InstancePlacementConfig")


def _preferences(p: Params) -> str | None:
    prefs = _rc(p).get("InstancePreferences")
    if prefs is None:
        return None
    clash = [k for k in _EXCLUSIVE if k in _rc(p)]
    if "EnableManagedSpotTraining" in p:
        clash.append("EnableManagedSpotTraining")
    if clash:
        return f"InstancePreferences with {', '.join(clash)}"
    counted = [("InstanceCount" in pref) for pref in prefs]
    whole = "InstanceCount" in _rc(p)
    if any(counted) and (whole or not all(counted)) or (not any(counted) and not whole):
        return "InstanceCount must be on every preference or on ResourceConfig, not both"
    return None


def _plant_preferences(p: dict[str, Any]) -> None:
    rc = p["ResourceConfig"]
    rc["InstancePreferences"] = [{"InstanceType": rc.pop("InstanceType", "ml.g5.xlarge")}]
    p["EnableManagedSpotTraining"] = False


def _training_plan(p: Params) -> str | None:
    if _rc(p).get("TrainingPlanArn") and _spot(p):
        return "a training plan's reserved capacity is not managed spot"
    return None


def _plant_training_plan(p: dict[str, Any]) -> None:
    p["ResourceConfig"]["TrainingPlanArn"] = (
        "arn:aws:sagemaker:us-east-1:123456789012:training-plan/planted"
    )
    _plant_spot_wait(p)
    p["StoppingCondition"]["MaxWaitTimeInSeconds"] += 1


def _keep_alive(p: Params) -> str | None:
    if _rc(p).get("KeepAlivePeriodInSeconds") and _spot(p):
        return "KeepAlivePeriodInSeconds (a warm pool) on a managed spot job"
    return None


def _plant_keep_alive(p: dict[str, Any]) -> None:
    _plant_training_plan(p)
    del p["ResourceConfig"]["TrainingPlanArn"]
    p["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 600


def _hyperparameters(p: Params) -> str | None:
    hp = p.get("HyperParameters") or {}
    if len(hp) > 100:
        return f"{len(hp)} hyperparameters (max 100)"
    for key, value in hp.items():
        if aws_len(key) > 256 or aws_len(value) > 256:
            return f"hyperparameter {key[:40]!r}: key and value are limited to 256 characters"
    return None


def _plant_hyperparameters(p: dict[str, Any]) -> None:
    p.setdefault("HyperParameters", {})["planted"] = "x" * 257  # the model allows 2500


def _environment(p: Params) -> str | None:
    env = p.get("Environment") or {}
    if len(env) > 100:
        return f"{len(env)} environment variables (max 100)"
    for key, value in env.items():
        if aws_len(key) > 512 or aws_len(value) > 512:
            return f"environment variable {key[:40]!r} over 512 characters"
    return None


def _plant_environment(p: dict[str, Any]) -> None:
    p["Environment"] = {f"V{i}": "x" for i in range(101)}


def _tags(p: Params, key: str = "Tags") -> str | None:
    raw = p.get(key) or []
    pairs = list(raw.items()) if isinstance(raw, Mapping) else [(t["Key"], t["Value"]) for t in raw]
    keys = [k for k, _ in pairs]
    if len(pairs) > 50:
        return f"{len(pairs)} tags (max 50)"
    if len(set(keys)) != len(keys):
        return "tag keys must be unique per resource"
    if any(k[:4].lower() == "aws:" for k in keys):
        return "tag keys starting 'aws:' are reserved"
    return None


def _plant_tags(p: dict[str, Any]) -> None:
    p["Tags"] = [*p.get("Tags", []), {"Key": "aws:planted", "Value": "x"}]


def _infra_check(p: Params) -> str | None:
    config = p.get("InfraCheckConfig")
    if config is not None and set(config) - {"EnableInfraCheck"}:
        return f"InfraCheckConfig takes EnableInfraCheck only, got {sorted(config)}"
    return None


def _plant_infra_check(p: dict[str, Any]) -> None:
    p["InfraCheckConfig"] = {"EnableInfraCheck": True, "Planted": 1}


# ----------------------------------------------------------------- SubmitServiceJob
def _job_name(p: Params) -> str | None:
    name = str(p.get("jobName", ""))
    if not 1 <= len(name) <= 128 or not _BATCH_NAME.issuperset(name):
        return f"jobName {name[:60]!r}: 1-128 letters, digits, '-' and '_'"
    return None


def _plant_job_name(p: dict[str, Any]) -> None:
    p["jobName"] = "planted.name"


def _share(p: Params) -> str | None:
    share, quota = p.get("shareIdentifier"), p.get("quotaShareName")
    if share is not None and quota is not None:
        return "shareIdentifier and quotaShareName together"
    if share is not None and not (len(share) <= 255 and share.isascii() and share.isalnum()):
        return f"shareIdentifier {share[:60]!r}: at most 255 alphanumeric characters"
    if quota is not None and not (1 <= len(quota) <= 128 and _QUOTA_SHARE.issuperset(quota)):
        return f"quotaShareName {quota[:60]!r}: 1-128 letters, digits, '-' and '_'"
    return None


def _plant_share(p: dict[str, Any]) -> None:
    p.pop("quotaShareName", None)
    p["shareIdentifier"] = "team-a"


def _priority(p: Params) -> str | None:
    value = p.get("schedulingPriority")
    if value is not None and not 0 <= value <= 9999:
        return f"schedulingPriority {value}: 0 to 9999"
    return None


def _plant_priority(p: dict[str, Any]) -> None:
    p["schedulingPriority"] = 10_000


def _payload(p: Params) -> str | None:
    size = len(str(p.get("serviceRequestPayload", "")).encode())
    if size > 10 * 1024:
        return f"serviceRequestPayload is {size} bytes (max 10 KiB)"
    whole = len(json.dumps(p).encode())
    if whole > 30 * 1024:
        return f"the request is {whole} bytes (max 30 KiB)"
    return None


def _plant_payload(p: dict[str, Any]) -> None:
    body = json.loads(p["serviceRequestPayload"])
    body["HyperParameters"] = {f"k{i}": "x" * 200 for i in range(60)}
    p["serviceRequestPayload"] = json.dumps(body)


def _retries(p: Params) -> str | None:
    strategy = p.get("retryStrategy") or {}
    attempts = strategy.get("attempts")
    if attempts is not None and not 1 <= attempts <= 10:
        return f"retryStrategy.attempts {attempts}: 1 to 10"
    rules = strategy.get("evaluateOnExit") or []
    if len(rules) > 5:
        return f"{len(rules)} evaluateOnExit rules (max 5)"
    for rule in rules:
        reason = rule.get("onStatusReason", "")
        if len(reason) > 512 or not reason.isprintable():
            return f"onStatusReason {reason[:40]!r}: up to 512 printable characters"
    return None


def _plant_retries(p: dict[str, Any]) -> None:
    p["retryStrategy"] = {"attempts": 11}


def _batch_tags(p: Params) -> str | None:
    return _tags(p, "tags")


def _plant_batch_tags(p: dict[str, Any]) -> None:
    p["tags"] = {**p.get("tags", {}), **{f"k{i}": "v" for i in range(51)}}


RULES: tuple[Rule, ...] = (
    Rule("spot and MaxWaitTimeInSeconds", SM,
         "sagemaker model, StoppingCondition.MaxWaitTimeInSeconds: 'a managed Spot training "
         "job ... must be equal to or greater than MaxRuntimeInSeconds'; "
         f"{_SM_API}API_StoppingCondition.html", _spot_wait, _plant_spot_wait),
    Rule("InstancePreferences exclusivity", SM,
         "sagemaker model, ResourceConfig.InstancePreferences: 'mutually exclusive with "
         "InstanceType, InstanceGroups, InstancePlacementConfig, and "
         "EnableManagedSpotTraining'; InstancePreference.InstanceCount: on every preference "
         f"or on ResourceConfig; {_SM_API}API_ResourceConfig.html",
         _preferences, _plant_preferences),
    Rule("training plans", SM,
         "sagemaker model, ResourceConfig.InstancePreferences: plans are 'Flexible Training "
         "Plans (FTP)', reserved capacity, apart from spot; ResourceConfig.TrainingPlanArn "
         f"(pattern in the model); {_SM_API}API_ResourceConfig.html",
         _training_plan, _plant_training_plan),
    Rule("KeepAlivePeriodInSeconds and spot", SM,
         "SageMaker Developer Guide, 'SageMaker AI Managed Warm Pools', Considerations: warm "
         "pools are not available to managed spot training; "
         "https://docs.aws.amazon.com/sagemaker/latest/dg/train-warm-pools.html",
         _keep_alive, _plant_keep_alive),
    Rule("hyperparameter limits", SM,
         "sagemaker model, CreateTrainingJobRequest.HyperParameters: 'a maximum of 100 "
         "hyperparameters ... Each key and value is limited to 256 characters' (the value "
         f"shape allows 2500); {_SM_API}API_CreateTrainingJob.html",
         _hyperparameters, _plant_hyperparameters),
    Rule("environment limits", SM,
         "sagemaker model, CreateTrainingJobRequest.Environment (map max 100) and "
         f"TrainingEnvironmentKey/Value (max 512); {_SM_API}API_CreateTrainingJob.html",
         _environment, _plant_environment),
    Rule("tag rules", SM,
         "sagemaker model, Tag.Key: 'Tag keys must be unique per resource'; Tags max 50; "
         "'aws:' reserved (Tagging AWS resources, tag restrictions); "
         f"{_SM_API}API_Tag.html", _tags, _plant_tags),
    Rule("InfraCheckConfig", SM,
         "sagemaker model, InfraCheckConfig: EnableInfraCheck is its one member; AWS "
         f"documents no further limit; {_SM_API}API_InfraCheckConfig.html",
         _infra_check, _plant_infra_check),
    Rule("Batch job names", BATCH,
         "batch model, SubmitServiceJobRequest.jobName: 'up to 128 characters ... letters, "
         f"numbers, hyphens (-), and underscores (_)'; {_BATCH_API}API_SubmitServiceJob.html",
         _job_name, _plant_job_name),
    Rule("Batch share identifiers", BATCH,
         "batch model, ShareAttributes.shareIdentifier: 'limited to 255 alphanumeric "
         "characters'; SubmitServiceJobRequest.shareIdentifier / quotaShareName (one or the "
         "other); CreateQuotaShareRequest.quotaShareName: 'up to 128 ... letters, numbers, "
         f"hyphens (-), and underscores (_)'; {_BATCH_API}API_ShareAttributes.html",
         _share, _plant_share),
    Rule("Batch priorities", BATCH,
         "batch model, SubmitServiceJobRequest.schedulingPriority: 'integers between 0 and "
         f"9999'; {_BATCH_API}API_SubmitServiceJob.html", _priority, _plant_priority),
    Rule("Batch payload size", BATCH,
         "AWS Batch User Guide, service quotas: 'Maximum job service request payload size "
         "(for SubmitServiceJob) 10 KiB', 'Maximum size of SubmitServiceJob request 30 KiB'; "
         "https://docs.aws.amazon.com/batch/latest/userguide/service_limits.html",
         _payload, _plant_payload),
    Rule("Batch retry limits", BATCH,
         "batch model, ServiceJobRetryStrategy.attempts: 'between 1 and 10'; "
         "RetryStrategy.evaluateOnExit: 'up to 5 objects'; ServiceJobEvaluateOnExit."
         "onStatusReason: 'up to 512 characters ... all printable characters'; "
         f"{_BATCH_API}API_ServiceJobRetryStrategy.html", _retries, _plant_retries),
    Rule("Batch tags", BATCH,
         "batch model, SubmitServiceJobRequest.tags (TagrisTagsMap, max 50); Batch User "
         "Guide, tag restrictions ('aws:' reserved); "
         "https://docs.aws.amazon.com/batch/latest/userguide/tag-restrictions.html",
         _batch_tags, _plant_batch_tags),
    Rule("PutEvents entries", EVENTS,
         "EventBridge API Reference, PutEvents: 1 to 10 entries; PutEventsRequestEntry: "
         "Detail 'a valid JSON object'; the total entry size at most 256 KB (EventBridge User "
         "Guide, 'Calculating PutEvents event entry size'); 'aws.' sources are AWS's; "
         f"{_EVENTS_API}API_PutEventsRequestEntry.html", put_events, plant_put_events),
    Rule("SNS Publish limits", SNS,
         "SNS API Reference, Publish: Subject 'ASCII text ... no line breaks or control "
         "characters ... less than 100 characters'; at most 10 message attributes; attribute "
         "names (A-Z a-z 0-9 _ - ., no 'AWS.'/'Amazon.' prefix, no dot at an end, no '..'); "
         "256 KB with attributes; "
         f"{_SNS_API}API_Publish.html", publish, plant_publish),
    Rule("tuner scaling types", TUNER,
         "sagemaker model, IntegerParameterRange/ContinuousParameterRange.ScalingType: "
         "'Logarithmic scaling works only for ranges that have only values greater than 0', "
         "'Reverse logarithmic scaling works only for ranges that are entirely within the "
         f"range 0<=x<1.0' (a continuous range's); {_SM_API}API_ContinuousParameterRange.html",
         T.scaling, T.plant_scaling),
    Rule("tuner early stopping", TUNER,
         "sagemaker model, HyperParameterTuningJobConfig.TrainingJobEarlyStoppingType: "
         "'Because the Hyperband strategy has its own advanced internal early stopping "
         "mechanism, TrainingJobEarlyStoppingType must be OFF to use Hyperband'; "
         f"{_SM_API}API_HyperParameterTuningJobConfig.html",
         T.early_stopping, T.plant_early_stopping),
    Rule("tuner ranges and limits", TUNER,
         "sagemaker model, ParameterRanges (integer ranges' ends integers, continuous ones' "
         "numbers, min to max), ResourceLimits (MaxParallelTrainingJobs of "
         "MaxNumberOfTrainingJobs), HyperParameterTrainingJobDefinition.Environment ('the "
         "sum of the number of environment variables for all the training job definitions "
         "can't exceed the maximum', 48); Developer Guide, 'Define hyperparameter ranges' and "
         "'Understand the hyperparameter tuning strategies' (a hyperparameter is static or "
         "tuned; Grid takes categorical ranges); "
         "https://docs.aws.amazon.com/sagemaker/latest/dg/automatic-model-tuning-define-ranges.html",
         T.ranges_and_limits, T.plant_ranges_and_limits),
    Rule("tuner objective", TUNER,
         "sagemaker model, HyperParameterAlgorithmSpecification.MetricDefinitions ('the "
         "metrics that the algorithm emits') and HyperParameterTuningJobObjective.MetricName; "
         "Developer Guide, 'Define metrics and environment variables' (your own algorithm's "
         "objective is one of the metrics it defines); "
         "https://docs.aws.amazon.com/sagemaker/latest/dg/"
         "automatic-model-tuning-define-metrics-variables.html",
         T.objective, T.plant_objective),
)  # fmt: skip


def planted(rule: Rule, good: Params) -> dict[str, Any]:
    """``good`` with a violation of ``rule`` planted (a deep copy)."""
    bad = copy.deepcopy(dict(good))
    rule.plant(bad)
    return bad
