"""What an AWS failure means to the contract, and the one SageMaker look the flows share.

:func:`map_aws_error` turns a failed AWS call into the contract's error
(``jobmodel.contract.errors``);
:func:`ambiguous` says whether a failed call may still have reached the service (a timeout or
a 5xx: look before calling the start failed); :func:`describe_training_job` is
DescribeTrainingJob with "no such job" as None.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
)

from jobmodel.contract.errors import CapacityError, JobModelError, UpstreamError, aws_error

__all__ = ["QUEUE_HINT", "ambiguous", "describe_training_job", "error_code", "map_aws_error"]

# Added to a CapacityError (direct mode: only CreateTrainingJob raises it).
QUEUE_HINT = "deploy with ftl:scheduler=queue to queue jobs until capacity frees"


def map_aws_error(exc: Exception, call: str) -> JobModelError:
    """Map an AWS failure to the contract's error types (``jobmodel.contract.errors.aws_error``);
    the
    message names the call, and a capacity error says how to queue instead."""
    if not isinstance(exc, ClientError):
        return UpstreamError(f"{call} failed: {type(exc).__name__}: {exc}")
    error = exc.response.get("Error", {})
    reasons = [r.get("Code") for r in exc.response.get("CancellationReasons") or []]
    mapped = aws_error(
        call, error.get("Code", ""), error.get("Message", ""), cancellation_codes=reasons
    )
    if isinstance(mapped, CapacityError):
        return CapacityError(f"{mapped.message}; retry later, or {QUEUE_HINT}")
    return mapped


def ambiguous(exc: Exception) -> bool:
    """True when the request may have reached SageMaker although no answer came back."""
    if isinstance(exc, ClientError):
        return bool(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500)
    return not isinstance(
        exc,
        ConnectTimeoutError | EndpointConnectionError | NoCredentialsError | ParamValidationError,
    )


def error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def describe_training_job(sagemaker: Any, name: str) -> dict[str, Any] | None:
    """DescribeTrainingJob of ``name``; None when SageMaker has no such job."""
    try:
        described: dict[str, Any] = sagemaker.describe_training_job(TrainingJobName=name)
        return described
    except ClientError as exc:
        # AWS says ResourceNotFound; moto says ValidationException.
        if error_code(exc) in ("ResourceNotFound", "ValidationException"):
            return None
        raise map_aws_error(exc, "DescribeTrainingJob") from None
    except BotoCoreError as exc:
        raise map_aws_error(exc, "DescribeTrainingJob") from None
