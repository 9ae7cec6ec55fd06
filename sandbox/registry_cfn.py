"""CloudFormation for the model registry's groups in the sandbox (issue 27).

moto 5.2's CloudFormation has no ``AWS::SageMaker::ModelPackageGroup``: it would skip the
groups, and the first Completed job's registration would find no group. This model creates
each group with moto's own SageMaker backend (name, description, tags), so the deployed
functions register into the groups the stack declares. ``Ref`` and ``Fn::GetAtt
ModelPackageGroupArn`` answer the group's ARN. What the platform synthesizes is unchanged.
"""

from __future__ import annotations

from typing import Any

from moto.core.common_models import CloudFormationModel

from sandbox.cfn_models import see_new_models

_registered = False


class ModelPackageGroupResource(CloudFormationModel):  # type: ignore[misc]
    def __init__(self, arn: str) -> None:
        self.physical_resource_id = arn

    @staticmethod
    def cloudformation_name_type() -> str:
        return "ModelPackageGroupName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SageMaker::ModelPackageGroup"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "ModelPackageGroupArn"

    def get_cfn_attribute(self, attribute_name: str) -> str:
        return self.physical_resource_id

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[override]
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> ModelPackageGroupResource:
        from moto.sagemaker.models import sagemaker_backends

        props = cloudformation_json.get("Properties", {})
        arn = sagemaker_backends[account_id][region_name].create_model_package_group(
            model_package_group_name=props.get("ModelPackageGroupName", resource_name),
            model_package_group_description=props.get("ModelPackageGroupDescription", ""),
            tags=props.get("Tags") or [],
        )
        return cls(arn)

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[override]
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        return original_resource  # a group's name never changes; its versions stay

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[override]
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        return None


def register() -> None:
    """Make moto's CloudFormation use this model (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    see_new_models()
