"""The trigger's SageMaker and PassRole statements: what IAM itself pins about every job.

Every condition key here is one the SageMaker service authorization reference lists for the
action (``CreateTrainingJob``: ``sagemaker:InstanceTypes``, ``MaxRuntimeInSeconds``,
``OutputKmsKeyArn``, ``VolumeKmsKeyArn``, ``NetworkIsolation``, ``InterContainerTrafficEncryption``,
``VpcSubnets``, ``VpcSecurityGroupIds``, ``KeepAlivePeriod``, ``EnableRemoteDebug``,
``aws:RequestTag``; ``AddTags``: ``sagemaker:TaggingAction``; ``DescribeTrainingJob`` and
``StopTrainingJob``: ``aws:ResourceTag``). What IAM cannot see (the image, the entry point, the
instance count, per-template limits) is pinned only by the launcher's validation; README.md,
Security, lists both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from ftl_constructs.nag import acknowledge, acknowledge_resource
from jobmodel import TemplateSpec
from jobmodel.contract.names import PLATFORM_TAG_KEY, TEAM_TAG_KEY
from jobmodel.instances import INSTANCE_TYPES

PLATFORM_TAG = PLATFORM_TAG_KEY
TEAM_TAG = TEAM_TAG_KEY
SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"
OUTPUT_KMS_KEY = "sagemaker:OutputKmsKeyArn"
VOLUME_KMS_KEY = "sagemaker:VolumeKmsKeyArn"

# Instance types whose storage is EBS: SageMaker encrypts their volume with VolumeKmsKeyId, so a
# job on one of them must name the platform key. The NVMe types reject the field (their instance
# storage is encrypted by the hardware). The job model's instance catalog is the one source.
EBS_INSTANCE_TYPES = tuple(sorted(n for n, i in INSTANCE_TYPES.items() if not i.local_nvme))


def training_job_arns(stack: Stack, teams: Sequence[str] = ()) -> list[str]:
    """This platform's training jobs: any name, or in teams mode names starting ``<team>-``."""
    names = [f"{team}-*" for team in teams] or ["*"]
    return [
        stack.format_arn(service="sagemaker", resource="training-job", resource_name=name)
        for name in names
    ]


# A sweep's statements (``_tuning_statements``; queue mode keeps them with ftl:queueSweeps) and
# the PassRole the tuner's trials need.
SWEEP_STATEMENTS: tuple[str, ...] = (
    "CreateCatalogSweeps",
    "DenySweepEbsVolumesWithoutPlatformKey",
    "TagSweepsAtCreation",
    "FollowPlatformSweeps",
    "PassTrainingRoleToSageMaker",
)


def tuning_job_arns(stack: Stack, teams: Sequence[str] = ()) -> list[str]:
    """This platform's tuning jobs (a sweep's, issue 37): named as its training jobs are."""
    names = [f"{team}-*" for team in teams] or ["*"]
    return [
        stack.format_arn(
            service="sagemaker", resource="hyper-parameter-tuning-job", resource_name=name
        )
        for name in names
    ]


def create_conditions(
    *,
    platform_name: str,
    specs: Sequence[TemplateSpec],
    key: kms.IKey,
    subnets: Sequence[ec2.ISubnet] = (),
    security_group: ec2.ISecurityGroup | None = None,
    teams: Sequence[str] = (),
) -> dict[str, dict[str, Any]]:
    """What every ``CreateTrainingJob`` the trigger makes must satisfy: the catalog's instance
    types and limits, the platform key, the platform's network (or none) and tags."""
    # Issue 36: an evaluation job runs on its policy's type, which a template may not allow.
    instance_types = sorted(
        {t for s in specs for t in s.instance_types}
        | {s.evaluation.instance_type for s in specs if s.evaluation and s.evaluation.instance_type}
    )
    in_vpc = bool(subnets) and security_group is not None
    only_values: dict[str, Any] = {"sagemaker:InstanceTypes": instance_types}
    # ForAllValues is true for a key that is absent, so Null pins each list key as present.
    null: dict[str, str] = {"sagemaker:InstanceTypes": "false"}
    if in_vpc:
        assert security_group is not None
        only_values["sagemaker:VpcSubnets"] = [s.subnet_id for s in subnets]
        only_values["sagemaker:VpcSecurityGroupIds"] = [security_group.security_group_id]
        null.update({"sagemaker:VpcSubnets": "false", "sagemaker:VpcSecurityGroupIds": "false"})
    else:  # network=none: a request with any VPC config is refused
        null.update({"sagemaker:VpcSubnets": "true", "sagemaker:VpcSecurityGroupIds": "true"})
    tags: dict[str, Any] = {f"aws:RequestTag/{PLATFORM_TAG}": platform_name}
    if teams:
        tags[f"aws:RequestTag/{TEAM_TAG}"] = list(teams)
    conditions: dict[str, dict[str, Any]] = {
        "ForAllValues:StringEquals": only_values,
        "Null": null,
        "NumericLessThanEquals": {
            "sagemaker:MaxRuntimeInSeconds": str(
                max(
                    [s.max_runtime_seconds for s in specs]
                    + [s.evaluation.max_runtime_seconds for s in specs if s.evaluation]
                )
            )
        },
        "NumericLessThanEqualsIfExists": {
            "sagemaker:KeepAlivePeriod": str(max(s.keep_alive_seconds for s in specs))
        },
        # The ...Arn keys: AWS deprecated OutputKmsKey/VolumeKmsKey and no longer lists them
        # for CreateTrainingJob (a policy on them would never match, or always deny).
        "ArnEquals": {OUTPUT_KMS_KEY: key.key_arn},
        "ArnEqualsIfExists": {VOLUME_KMS_KEY: key.key_arn},
        "StringEquals": tags,
    }
    for flag, attr in (
        ("sagemaker:NetworkIsolation", "network_isolation"),
        ("sagemaker:InterContainerTrafficEncryption", "inter_container_encryption"),
    ):
        allowed = {bool(getattr(s, attr)) for s in specs}
        if len(allowed) == 1:
            conditions.setdefault("Bool", {})[flag] = str(allowed.pop()).lower()
    return conditions


def launch_statements(
    *,
    stack: Stack,
    platform_name: str,
    specs: Sequence[TemplateSpec],
    pass_role_arns: Sequence[str],
    key: kms.IKey,
    subnets: Sequence[ec2.ISubnet] = (),
    security_group: ec2.ISecurityGroup | None = None,
    teams: Sequence[str] = (),
    training_plans: Sequence[str] = (),
) -> list[iam.PolicyStatement]:
    """The trigger's statements for starting, describing, stopping and tagging jobs;
    ``training_plans``: the plans (ARNs) a chain's plan step may start jobs on (a
    ``CreateTrainingJob`` with ``ResourceConfig.TrainingPlanArn`` is authorized on the plan
    too, under the same conditions)."""
    jobs = training_job_arns(stack, teams)
    conditions = create_conditions(
        platform_name=platform_name,
        specs=specs,
        key=key,
        subnets=subnets,
        security_group=security_group,
        teams=teams,
    )
    own_jobs = {"StringEquals": {f"aws:ResourceTag/{PLATFORM_TAG}": platform_name}}
    return [
        *_create_statements(jobs, conditions, training_plans),
        *_follow_statements(jobs, own_jobs),
        *_tuning_statements(tuning_job_arns(stack, teams), conditions, platform_name),
        iam.PolicyStatement(
            sid="PassTrainingRoleToSageMaker",
            actions=["iam:PassRole"],
            resources=list(pass_role_arns),
            conditions={"StringEquals": {"iam:PassedToService": SAGEMAKER_SERVICE}},
        ),
    ]


def _deny_ebs_without_key(sid: str, action: str, resources: list[str]) -> iam.PolicyStatement:
    """Deny ``sagemaker:<action>`` on an EBS instance type without the platform's volume key
    (``ForAnyValue`` over the request's types; ``VolumeKmsKeyArn`` absent)."""
    return iam.PolicyStatement(
        sid=sid,
        effect=iam.Effect.DENY,
        actions=[f"sagemaker:{action}"],
        resources=resources,
        conditions={
            "ForAnyValue:StringEquals": {"sagemaker:InstanceTypes": list(EBS_INSTANCE_TYPES)},
            "Null": {VOLUME_KMS_KEY: "true"},
        },
    )


def _create_statements(
    jobs: list[str], conditions: dict[str, dict[str, Any]], training_plans: Sequence[str]
) -> list[iam.PolicyStatement]:
    """Creating jobs (on the platform's training plans too) and tagging them at creation."""
    plans = (
        [
            iam.PolicyStatement(
                sid="CreateJobsOnPlatformTrainingPlans",
                actions=["sagemaker:CreateTrainingJob"],
                resources=list(training_plans),
                conditions=conditions,
            )
        ]
        if training_plans
        else []
    )
    return [
        *plans,
        iam.PolicyStatement(
            sid="CreateCatalogJobsOnly",
            actions=["sagemaker:CreateTrainingJob"],
            resources=jobs,
            conditions=conditions,
        ),
        iam.PolicyStatement(
            sid="DenyRemoteDebug",
            effect=iam.Effect.DENY,
            actions=["sagemaker:CreateTrainingJob"],
            resources=jobs,
            conditions={"Bool": {"sagemaker:EnableRemoteDebug": "true"}},
        ),
        _deny_ebs_without_key("DenyEbsVolumesWithoutPlatformKey", "CreateTrainingJob", jobs),
        iam.PolicyStatement(
            sid="TagJobsAtCreation",
            actions=["sagemaker:AddTags"],
            resources=jobs,
            conditions={"StringEquals": {"sagemaker:TaggingAction": "CreateTrainingJob"}},
        ),
    ]


def _follow_statements(
    jobs: list[str], own_jobs: dict[str, dict[str, str]]
) -> list[iam.PolicyStatement]:
    """Describing and stopping the platform's jobs (tagged with its name)."""
    return [
        iam.PolicyStatement(
            sid="ReadPlatformJobs",
            actions=["sagemaker:DescribeTrainingJob"],
            resources=jobs,
            conditions=own_jobs,
        ),
        iam.PolicyStatement(
            sid="StopPlatformJobs",
            actions=["sagemaker:StopTrainingJob"],
            resources=jobs,
            conditions=own_jobs,
        ),
    ]


def _tuning_statements(
    sweeps: list[str], conditions: dict[str, dict[str, Any]], platform_name: str
) -> list[iam.PolicyStatement]:
    """A sweep's tuning job (issue 37): created under the conditions every training job is
    (the keys CreateHyperParameterTuningJob also lists: its definition's instance type,
    runtime, keys, network and tags; it lists no ``KeepAlivePeriod``), tagged at creation,
    read, listed and stopped. Its trials are training jobs named ``<sweep>-<n>-<hex>`` with the
    sweep's tags: the training-job statements cover describing them.

    Describe, Stop and ListTrainingJobsForHyperParameterTuningJob list no condition key of
    their own, but their resource type lists ``aws:ResourceTag``: a tuning job tagged by
    another platform is refused, as its training jobs are. The condition is ``IfExists``
    because the trigger tells a lost create from a started sweep by describing the name
    (``backends/tuner``): a tuning job that does not exist has no tags, and must answer
    ResourceNotFound, not AccessDenied (a training job is looked for with ``FindClaimedJobs``'
    list instead; the trigger has no such list for tuning jobs)."""
    tuning = {k: dict(v) for k, v in conditions.items()}
    # KeepAlivePeriod is not a key of the create; the runtime is pinned IfExists, since AWS
    # does not say whether it reads the definition's or the tuning job's own (which our
    # requests leave out; DECISIONS, "A sweep is one job whose trials are the tuner's").
    tuning["NumericLessThanEqualsIfExists"] = tuning.pop("NumericLessThanEquals")
    return [
        iam.PolicyStatement(
            sid="CreateCatalogSweeps",
            actions=["sagemaker:CreateHyperParameterTuningJob"],
            resources=sweeps,
            conditions=tuning,
        ),
        _deny_ebs_without_key(
            "DenySweepEbsVolumesWithoutPlatformKey", "CreateHyperParameterTuningJob", sweeps
        ),
        iam.PolicyStatement(
            sid="TagSweepsAtCreation",
            actions=["sagemaker:AddTags"],
            resources=sweeps,
            conditions={
                "StringEquals": {"sagemaker:TaggingAction": "CreateHyperParameterTuningJob"}
            },
        ),
        iam.PolicyStatement(
            sid="FollowPlatformSweeps",
            actions=[
                "sagemaker:DescribeHyperParameterTuningJob",
                "sagemaker:ListTrainingJobsForHyperParameterTuningJob",
                "sagemaker:StopHyperParameterTuningJob",
            ],
            resources=sweeps,
            conditions={"StringEqualsIfExists": {f"aws:ResourceTag/{PLATFORM_TAG}": platform_name}},
        ),
    ]


def acknowledge_job_arns(
    policy: iam.Policy, jobs: Sequence[str], sweeps: Sequence[str], *, queue_mode: bool
) -> None:
    """cdk-nag's IAM5 on the job (``jobs``) and tuning-job (``sweeps``) ARN patterns the
    trigger's statements name, with why each wildcard is there."""
    reason = (
        "Job names are generated per request at run time (in teams mode under the "
        "team's '<team>-' prefix); creation is pinned by condition keys to the catalog's "
        "instance types, runtime, KMS key, network settings and the platform tag, "
        "and describing and stopping to jobs tagged by this platform."
    )
    if queue_mode:
        reason = (
            "Job names are generated per request at run time (in teams mode under the "
            "team's '<team>-' prefix; Batch prefixes 'AWSBatch'); the trigger creates no "
            "job in queue mode, and describes and stops only jobs tagged by this platform."
        )
    for arn in jobs:
        acknowledge_resource(policy, arn, reason)
    for arn in sweeps:
        acknowledge_resource(
            policy,
            arn,
            "A sweep's tuning job is named per request at run time like a job (in "
            "teams mode under the team's '<team>-' prefix); creation is pinned by the "
            "same condition keys as a training job's, and describing, listing and "
            "stopping to tuning jobs that carry no other platform's tag (IfExists: "
            "a name with no tuning job must answer not found).",
        )


def grant_job_lookup(policy: iam.Policy) -> None:
    """Direct mode: a claimed job whose start went unanswered is looked for by name
    (ftl_trigger/backends/direct/backend.py).
    DescribeTrainingJob is granted only on jobs tagged by the
    platform, so of a job that does not exist it answers AccessDenied, not "no such job";
    ListTrainingJobs (NameContains) says so. It supports no resource-level permissions: only
    "*" grants it (acknowledged with the quota read, ``grant_quota_read``)."""
    policy.add_statements(
        iam.PolicyStatement(
            sid="FindClaimedJobs",
            actions=["sagemaker:ListTrainingJobs"],
            resources=["*"],
        )
    )


def grant_quota_read(policy: iam.Policy) -> None:
    """Quota-aware submit (ftl_trigger/quotas.py). The Service Authorization
    Reference lists no resource type and no condition key for ListServiceQuotas (not
    even servicequotas:service, which GetServiceQuota has): only "*" grants it."""
    policy.add_statements(
        iam.PolicyStatement(
            sid="ReadSageMakerQuotas",
            actions=["servicequotas:ListServiceQuotas"],
            resources=["*"],
        )
    )
    acknowledge(
        policy,
        "AwsSolutions-IAM5[Resource::*]",
        "servicequotas:ListServiceQuotas supports no resource-level permissions and no "
        "condition keys; it reads the account's quota values only. Direct mode: "
        "sagemaker:ListTrainingJobs supports none either; it reads job names and statuses "
        "only, to tell whether a claimed job's unanswered start happened.",
    )
