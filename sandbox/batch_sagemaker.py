"""The Batch stand-in's SageMaker: moto's in-process backend, and the state changes it reports.

The stand-in (``sandbox/batch.py``) creates the training job of a service job it starts with
:meth:`MotoSageMaker.create` (moto's CreateTrainingJob, after botocore's own check of the
payload) and moves it on with :meth:`MotoSageMaker.set_status`. moto keeps no state changes
and sends no events, so every status change made here is reported to ``on_change`` as the
``SageMaker Training Job State Change`` event EventBridge would deliver (``source``
``aws.sagemaker``; the detail is the job's description, times in epoch milliseconds).

What the events model:

- one event per change of (``TrainingJobStatus``, ``SecondaryStatus``); the first is
  ``InProgress``/``Starting`` when the job is created;
- on a terminal status: ``TrainingStartTime``/``TrainingEndTime`` and
  ``TrainingTimeInSeconds`` = seconds from ``Training`` to the end (0 if it never trained),
  ``BillableTimeInSeconds`` the same (the sandbox models no spot savings);
- ``Tags`` as an object, as in SageMaker's events; no ``FailureReason`` unless one was given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ParamValidationError
from botocore.session import get_session
from botocore.validate import validate_parameters

from sandbox.deploy import ACCOUNT, REGION

DETAIL_TYPE = "SageMaker Training Job State Change"
TERMINAL = ("Completed", "Failed", "Stopped")
_TRAINING_INPUT = (
    get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
)


def create_training_job(backend: Any, payload: dict[str, Any]) -> str:
    """CreateTrainingJob in moto's backend, after botocore's own check of the payload."""
    try:
        validate_parameters(payload, _TRAINING_INPUT)
    except ParamValidationError as exc:
        raise ValueError(f"ValidationException: {exc}") from None
    job = backend.create_training_job(
        training_job_name=payload["TrainingJobName"],
        hyper_parameters=payload.get("HyperParameters"),
        algorithm_specification=payload.get("AlgorithmSpecification"),
        role_arn=payload.get("RoleArn"),
        input_data_config=payload.get("InputDataConfig"),
        output_data_config=payload.get("OutputDataConfig"),
        resource_config=payload.get("ResourceConfig"),
        vpc_config=payload.get("VpcConfig"),
        stopping_condition=payload.get("StoppingCondition"),
        tags=payload.get("Tags"),
        enable_network_isolation=payload.get("EnableNetworkIsolation", False),
        enable_inter_container_traffic_encryption=payload.get(
            "EnableInterContainerTrafficEncryption", False
        ),
        enable_managed_spot_training=payload.get("EnableManagedSpotTraining", False),
        checkpoint_config=payload.get("CheckpointConfig"),
        debug_hook_config=payload.get("DebugHookConfig"),
        debug_rule_configurations=payload.get("DebugRuleConfigurations"),
        tensor_board_output_config=payload.get("TensorBoardOutputConfig"),
        experiment_config=payload.get("ExperimentConfig"),
    )
    return job.arn


class MotoSageMaker:
    """The stand-in's SageMaker: moto's in-process backend (the sandbox runs moto's server in
    this process), reached through its CreateTrainingJob for validation of the payload.

    ``clock`` gives the time of each change; ``on_change`` receives each state-change event.
    """

    def __init__(
        self,
        account: str = ACCOUNT,
        region: str = REGION,
        *,
        clock: Callable[[], float] | None = None,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        import time

        self.account, self.region = account, region
        self.clock = clock or time.time
        self.on_change = on_change
        self._times: dict[str, dict[str, float]] = {}

    def _backend(self) -> Any:
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[self.account][self.region]

    def create(self, payload: dict[str, Any]) -> str:
        arn = create_training_job(self._backend(), payload)
        self._times[payload["TrainingJobName"]] = {"created": self.clock()}
        # SageMaker's first state: InProgress/Starting (Batch: SCHEDULED until Training).
        self.set_status(payload["TrainingJobName"], "InProgress", "Starting")
        return arn

    def status(self, name: str) -> tuple[str | None, str | None]:
        job = self._backend().training_jobs.get(name)
        return (None, None) if job is None else (job.training_job_status, job.secondary_status)

    def failure_reason(self, name: str) -> str | None:
        job = self._backend().training_jobs.get(name)
        return getattr(job, "failure_reason", None) if job is not None else None

    def set_status(
        self, name: str, status: str, secondary: str | None = None, *, reason: str | None = None
    ) -> None:
        """Move a training job on; ``reason``: its ``FailureReason`` (an end's)."""
        job = self._backend().training_jobs.get(name)
        if job is None:
            return
        before = (job.training_job_status, job.secondary_status)
        job.training_job_status = status
        job.secondary_status = secondary or status
        if reason is not None:
            job.failure_reason = reason
        times = self._times.setdefault(name, {"created": self.clock()})
        if job.secondary_status == "Training":
            times.setdefault("training", self.clock())
        if status in TERMINAL:
            times.setdefault("ended", self.clock())
            # DescribeTrainingJob's billable time, as the event reports it.
            job.billable_time_in_seconds = _trained(times, self.clock())
        if (status, job.secondary_status) != before and self.on_change is not None:
            self.on_change(training_job_event(job, times, self.clock()))


def training_job_event(job: Any, times: dict[str, float], now: float) -> dict[str, Any]:
    """The ``SageMaker Training Job State Change`` event for moto's job in its current state."""
    detail: dict[str, Any] = {
        "TrainingJobName": job.training_job_name,
        "TrainingJobArn": job.arn,
        "TrainingJobStatus": job.training_job_status,
        "SecondaryStatus": job.secondary_status,
        "RoleArn": job.role_arn,
        "ResourceConfig": job.resource_config,
        "StoppingCondition": job.stopping_condition,
        "EnableManagedSpotTraining": bool(job.enable_managed_spot_training),
        "CreationTime": _ms(times["created"]),
        "LastModifiedTime": _ms(now),
        "Tags": {t["Key"]: t["Value"] for t in job.tags or []},
    }
    if getattr(job, "failure_reason", None):
        detail["FailureReason"] = job.failure_reason
    if job.training_job_status in TERMINAL:
        start, end = times.get("training"), times.get("ended", now)
        seconds = _trained(times, now)
        detail.update(
            TrainingEndTime=_ms(end),
            TrainingTimeInSeconds=seconds,
            BillableTimeInSeconds=seconds,
        )
        if start is not None:
            detail["TrainingStartTime"] = _ms(start)
    return {
        "version": "0",
        "id": f"{job.training_job_name}-{job.training_job_status}-{job.secondary_status}",
        "detail-type": DETAIL_TYPE,
        "source": "aws.sagemaker",
        "account": job.arn.split(":")[4],
        "time": _iso(now),
        "region": job.arn.split(":")[3],
        "resources": [job.arn],
        "detail": detail,
    }


def _trained(times: dict[str, float], now: float) -> int:
    """Seconds from ``Training`` to the end (0 if it never trained)."""
    start, end = times.get("training"), times.get("ended", now)
    return int(end - start) if start is not None else 0


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _iso(now: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
