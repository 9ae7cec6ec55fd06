"""The model registry's calls (issue 27) as IAM requests, mixed into ``requests.Mapper``.

Per the Service Authorization Reference: CreateModelPackage is authorized on the
``model-package`` resource type with ``sagemaker:ModelApprovalStatus``, the customer metadata
keys and the request's tags; DescribeModelPackage and UpdateModelPackage (with
``sagemaker:ModelApprovalStatus``) on the version's ARN; ListModelPackages supports no
resource-level permission (``*``). AWS does not document whether a version created in a group
is authorized on the group's ARN or on the version's (``model-package/<group>/<n>``), so a
create must pass with either, like a training job's two ARN spellings. An update that leaves
the approval status out carries no ``sagemaker:ModelApprovalStatus`` (a ``Null`` condition
sees it absent).

An evaluation's results (issue 36) also read and write objects: ``s3:GetObject`` and
``s3:PutObject`` on the object, with the bucket key's ``kms:Decrypt`` / ``kms:GenerateDataKey``
through S3.
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
        ctx = {}
        if "ModelApprovalStatus" in params:
            ctx["sagemaker:ModelApprovalStatus"] = params["ModelApprovalStatus"]
        return [Request(p, "sagemaker:UpdateModelPackage", (arn,), ctx, src)]

    # ------------------------------------------------------------------ S3 (issue 36)
    def _s3_GetObject(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        obj = f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"
        kms = self._kms(p, obj, ["kms:Decrypt"], "s3", src)  # type: ignore[attr-defined]
        return [Request(p, "s3:GetObject", (obj,), {}, src), *kms]

    def _s3_PutObject(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        obj = f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"
        ctx: dict[str, Any] = {}
        if params.get("ServerSideEncryption"):
            ctx["s3:x-amz-server-side-encryption"] = params["ServerSideEncryption"]
        if params.get("SSEKMSKeyId"):
            ctx["s3:x-amz-server-side-encryption-aws-kms-key-id"] = params["SSEKMSKeyId"]
        kms = self._kms(p, obj, ["kms:GenerateDataKey"], "s3", src)  # type: ignore[attr-defined]
        return [Request(p, "s3:PutObject", (obj,), ctx, src), *kms]
