"""The model registry's calls (issue 27) as IAM requests, mixed into ``requests.Mapper``.

Per the Service Authorization Reference: CreateModelPackage is authorized on the
``model-package`` resource type with ``sagemaker:ModelApprovalStatus``, the customer metadata
keys and the request's tags; DescribeModelPackage and UpdateModelPackage (with
``sagemaker:ModelApprovalStatus``) on the version's ARN; ListModelPackages supports no
resource-level permission (``*``). AWS does not document whether a version created in a group
is authorized on the group's ARN or on the version's (``model-package/<group>/<n>``), so a
create must pass with either, like a training job's two ARN spellings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from testsupport.authz.evaluate import Request


def _arn(resource: str) -> str:
    from testsupport.authz.requests import ACCOUNT, REGION

    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{resource}"


def _package_arn(name: str) -> str:
    """A version's ARN as given (an ARN) or named ``<group>/<version>``, lower-case as
    SageMaker writes names in the ARNs it returns."""
    return name.lower() if name.startswith("arn:") else _arn(f"model-package/{name.lower()}")


class RegistryRequests:
    def _sagemaker_CreateModelPackage(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        from testsupport.authz.requests import tag_context

        group = str(params["ModelPackageGroupName"]).rsplit("/", 1)[-1].lower()
        ctx: dict[str, Any] = {
            "sagemaker:ModelApprovalStatus": params.get("ModelApprovalStatus", ""),
            **tag_context(params.get("Tags", [])),
        }
        for key, value in (params.get("CustomerMetadataProperties") or {}).items():
            ctx[f"sagemaker:CustomerMetadataProperties/{key}"] = value
        arns = (_arn(f"model-package-group/{group}"), _arn(f"model-package/{group}/1"))
        return [Request(p, "sagemaker:CreateModelPackage", (a,), ctx, src) for a in arns]

    def _sagemaker_DescribeModelPackage(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        arn = _package_arn(str(params["ModelPackageName"]))
        return [Request(p, "sagemaker:DescribeModelPackage", (arn,), {}, src)]

    def _sagemaker_ListModelPackages(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return [Request(p, "sagemaker:ListModelPackages", ("*",), {}, src)]

    def _sagemaker_UpdateModelPackage(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        arn = _package_arn(str(params["ModelPackageArn"]))
        ctx = {"sagemaker:ModelApprovalStatus": params.get("ModelApprovalStatus", "")}
        return [Request(p, "sagemaker:UpdateModelPackage", (arn,), ctx, src)]
