"""CloudFormation for the queue's AWS Batch resources in the sandbox (``ftl:scheduler=queue``).

moto's CloudFormation has no ``AWS::Batch::ServiceEnvironment``, ``SchedulingPolicy`` or
``QuotaShare``: it skips them, and then a ``Fn::GetAtt`` of one (the job queue's scheduling
policy, an output) fails the stack. Its ``AWS::Batch::JobQueue`` knows only queues of
compute environments and fails on a ``SAGEMAKER_TRAINING`` queue (no
``ComputeEnvironmentOrder``). The sandbox rule, registered by :func:`register`:

- these four types get CloudFormation models that create nothing in moto and answer ``Ref``
  and ``Fn::GetAtt`` (``ServiceEnvironmentArn``, ``Arn``, ``JobQueueArn``,
  ``QuotaShareArn``) with the ARN AWS gives: ``arn:aws:batch:<region>:<account>:<kind>/<name>``
  (``sandbox.batch.batch_arn``). So the stack's ``JobQueueArn`` output, the trigger's
  ``FTL_JOB_QUEUE`` and the Batch event rule's ``detail.jobQueue`` all hold the ARN of the
  stand-in's queue of the same name, which ``configure_from_template`` creates from the
  synthesized template (``sandbox/queue_mode.py``);
- a job queue of compute environments still goes to moto's own model.

The quota share's ARN (``job-queue/<queue>/quota-share/<name>``) is this sandbox's guess;
nothing in the platform reads it. What the platform synthesizes for AWS is unchanged.
"""

from __future__ import annotations

from typing import Any

import moto.batch.models  # noqa: F401  (moto's JobQueue model first, so the one here wins)
from moto.core.common_models import CloudFormationModel

from sandbox.batch import batch_arn
from sandbox.cfn_models import see_new_models

SERVICE_JOB_TYPE = "SAGEMAKER_TRAINING"


class _BatchResource:
    """A Batch resource moto does not model: its ARN, nothing else. (A mixin: moto lists only
    direct subclasses of ``CloudFormationModel`` as models.)"""

    KIND = ""  # in the ARN
    ATTRIBUTE = ""  # what Fn::GetAtt answers (besides Ref)
    CFN_TYPE = ""
    NAME_PROPERTY = ""  # the property that names it

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.CFN_TYPE

    @classmethod
    def cloudformation_name_type(cls) -> str:
        return cls.NAME_PROPERTY

    def __init__(self, arn: str) -> None:
        self.physical_resource_id = arn  # Ref gives the ARN

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == cls.ATTRIBUTE

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name != self.ATTRIBUTE:
            from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

            raise UnformattedGetAttTemplateException()
        return self.physical_resource_id

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[override]
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        return cls(cls.arn(resource_name, cloudformation_json.get("Properties", {})))

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[override]
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[override]
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        return None

    @classmethod
    def arn(cls, name: str, properties: dict[str, Any]) -> str:
        return batch_arn(cls.KIND, name)


class ServiceEnvironmentResource(_BatchResource, CloudFormationModel):  # type: ignore[misc]
    KIND, ATTRIBUTE = "service-environment", "ServiceEnvironmentArn"
    CFN_TYPE, NAME_PROPERTY = "AWS::Batch::ServiceEnvironment", "ServiceEnvironmentName"


class SchedulingPolicyResource(_BatchResource, CloudFormationModel):  # type: ignore[misc]
    KIND, ATTRIBUTE = "scheduling-policy", "Arn"
    CFN_TYPE, NAME_PROPERTY = "AWS::Batch::SchedulingPolicy", "Name"


class QuotaShareResource(_BatchResource, CloudFormationModel):  # type: ignore[misc]
    KIND, ATTRIBUTE = "quota-share", "QuotaShareArn"
    CFN_TYPE, NAME_PROPERTY = "AWS::Batch::QuotaShare", "QuotaShareName"

    @classmethod
    def arn(cls, name: str, properties: dict[str, Any]) -> str:
        queue = str(properties.get("JobQueue", "")).rsplit("/", 1)[-1]
        return batch_arn("job-queue", f"{queue}/quota-share/{name}")


class JobQueueResource(_BatchResource, CloudFormationModel):  # type: ignore[misc]
    """``SAGEMAKER_TRAINING`` queues are the stand-in's; other queues stay moto's."""

    KIND, ATTRIBUTE = "job-queue", "JobQueueArn"
    CFN_TYPE, NAME_PROPERTY = "AWS::Batch::JobQueue", "JobQueueName"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[override]
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        props = cloudformation_json.get("Properties", {})
        if str(props.get("JobQueueType", "")).upper() == SERVICE_JOB_TYPE:
            return cls(batch_arn(cls.KIND, resource_name))
        from moto.batch.models import JobQueue

        return JobQueue.create_from_cloudformation_json(
            resource_name, cloudformation_json, account_id, region_name, **kwargs
        )


_registered = False


def register() -> None:
    """Make moto's CloudFormation use these models (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    # The models are CloudFormationModel subclasses defined above.
    see_new_models()
