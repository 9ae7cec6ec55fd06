"""Record every AWS call the code makes through botocore, with its parameters.

The recorder sits on ``BaseClient._make_api_call``, the one place every client call passes
(boto3 clients, the trigger's trimmed-model clients, paginators), so the list of requests the
authorization check evaluates is what the code really sent, not a list kept by hand.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.client import BaseClient


@dataclass(frozen=True)
class Call:
    service: str  # the signing name: sagemaker, dynamodb, batch, sns, s3, ...
    operation: str
    params: dict[str, Any]


@contextmanager
def recording() -> Iterator[list[Call]]:
    calls: list[Call] = []
    original = BaseClient._make_api_call

    def record(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
        service = self.meta.service_model.signing_name or self.meta.service_model.service_name
        calls.append(Call(service, operation_name, copy.deepcopy(api_params)))
        return original(self, operation_name, api_params)

    BaseClient._make_api_call = record  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        BaseClient._make_api_call = original  # type: ignore[method-assign]
