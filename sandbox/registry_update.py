"""The model registry's writes in the sandbox as SageMaker does them.

UpdateModelPackage (issue 36): moto 5.2's ``update_model_package`` sets every field the
request leaves out to None (a review that names only the approval loses the version's
metadata; an update of the metadata alone loses the approval status) and replaces the
customer metadata with the request's. SageMaker changes only what the request names, and adds
or overwrites the named metadata entries (the request has
``CustomerMetadataPropertiesToRemove`` to take entries away). This wrapper keeps what the
request leaves out and merges the metadata; what the launcher sends is unchanged.

CreateModelPackage: SageMaker's ``ClientToken`` makes the call idempotent (a repeat with the
same token answers the package that token created); moto 5.2 stores the token and creates
another version each time. So a create whose answer was lost, and which botocore then sent
again, made two versions of one job in the sandbox where SageMaker makes one. The wrapper
answers the package a token already created in that group.
"""

from __future__ import annotations

import threading
from typing import Any

_patched = False
_creating = threading.Lock()  # the server is threaded: one token, one package


def merge_updates() -> None:
    """Install the wrappers on moto's SageMaker backend (once)."""
    global _patched
    if _patched:
        return
    _patched = True
    from moto.sagemaker.models import SageMakerModelBackend

    _idempotent_creates(SageMakerModelBackend)

    original = SageMakerModelBackend.update_model_package

    def update_model_package(
        self: Any,
        model_package_arn: str,
        model_approval_status: str | None,
        approval_description: str | None,
        customer_metadata_properties: dict[str, str] | None,
        customer_metadata_properties_to_remove: list[str],
        additional_inference_specifications_to_add: list[Any] | None,
    ) -> str:
        name = self.model_package_name_mapping.get(model_package_arn, model_package_arn)
        package = self.model_packages.get(name)
        if package is not None:
            if model_approval_status is None:
                model_approval_status = package.model_approval_status
            if approval_description is None:
                approval_description = package.approval_description
            merged = dict(package.customer_metadata_properties or {})
            merged.update(customer_metadata_properties or {})
            customer_metadata_properties = merged
        answer: str = original(
            self,
            model_package_arn,
            model_approval_status,
            approval_description,
            customer_metadata_properties,
            customer_metadata_properties_to_remove,
            additional_inference_specifications_to_add,
        )
        return answer

    SageMakerModelBackend.update_model_package = update_model_package  # type: ignore[method-assign]


def _idempotent_creates(backend: Any) -> None:
    original = backend.create_model_package

    def create_model_package(self: Any, *args: Any, **kwargs: Any) -> str:
        token = kwargs.get("client_token")
        group = kwargs.get("model_package_group_name")
        with _creating:
            if token:
                for package in list(self.model_packages.values()):
                    same = package.model_package_group_name == group
                    if same and package.client_token == token:
                        return str(package.arn)
            answer: str = original(self, *args, **kwargs)
            return answer

    backend.create_model_package = create_model_package
