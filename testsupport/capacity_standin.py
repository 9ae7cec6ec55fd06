"""A SageMaker stand-in for capacity: spot capacity errors on chosen instance types,
``InstancePreferences`` with ``SelectedInstanceType``/``SelectedInstanceCount``, and training
plans (sandbox/README.md, "Capacity").

moto has none of these, so tests and the demo put this object where the launcher's SageMaker
client is. Every ``CreateTrainingJob`` request is checked against botocore's model
(``validate_parameters``) before it is looked at. Rules:

* ``no_spot``: instance types with no spot capacity. A spot job on one starts (InProgress,
  ``Starting``); :meth:`expire_waits` ends it as SageMaker does when the wait runs out
  (Stopped, secondary status ``MaxWaitTimeExceeded``, no billable time).
* ``no_on_demand``: types with no on-demand capacity. A job with ``InstancePreferences``
  gets the first type not listed here (``SelectedInstanceType``, the job's count as
  ``SelectedInstanceCount``); when every preference is listed, or a plain on-demand job's
  type is, the call fails with ``ResourceLimitExceeded`` (HTTP 400, an insufficient-capacity
  message), the code SageMaker answers a start it cannot place with.
* ``plans``: training plan ARN -> (instance type, instances). A job on a plan must name the
  plan's type and at most its instances (``ValidationException`` otherwise).
* :meth:`finish` ends a job (Completed, Failed with a reason, Stopped) with billable seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters

__all__ = ["CapacityStandIn"]

_MODEL = botocore.session.get_session().get_service_model("sagemaker")
ACCOUNT = "123456789012"


def _error(code: str, message: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        "CreateTrainingJob",
    )


class CapacityStandIn:
    def __init__(
        self,
        *,
        no_spot: set[str] | None = None,
        no_on_demand: set[str] | None = None,
        plans: Mapping[str, tuple[str, int]] | None = None,
        region: str = "us-east-1",
        clock: Any = None,
    ) -> None:
        self.no_spot = set(no_spot or ())
        self.no_on_demand = set(no_on_demand or ())
        self.plans = dict(plans or {})
        self.region = region
        self._clock = clock or (lambda: datetime.now(UTC))
        self._last: datetime | None = None
        self.jobs: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.stopped: list[str] = []

    def clock(self) -> datetime:
        """Strictly increasing times (each state change is newer than the last)."""
        now = self._clock()
        if self._last is not None and now <= self._last:
            now = self._last + timedelta(milliseconds=1)
        self._last = now
        return now

    # ------------------------------------------------------------------ the API
    def create_training_job(self, **params: Any) -> dict[str, Any]:
        validate_parameters(params, _MODEL.operation_model("CreateTrainingJob").input_shape)
        self.requests.append(params)
        name = params["TrainingJobName"]
        if name in self.jobs:
            raise _error("ResourceInUse", f"Training job {name} already exists")
        rc = dict(params["ResourceConfig"])
        spot = bool(params.get("EnableManagedSpotTraining"))
        prefs = [p["InstanceType"] for p in rc.get("InstancePreferences", [])]
        plan = rc.get("TrainingPlanArn")
        if plan is not None:
            if plan not in self.plans:
                raise _error("ValidationException", f"training plan {plan} does not exist")
            itype, count = self.plans[plan]
            if rc.get("InstanceType") != itype or rc["InstanceCount"] > count:
                raise _error(
                    "ValidationException", f"the plan reserves {count} x {itype} instances"
                )
        elif prefs:
            free = [t for t in prefs if t not in self.no_on_demand]
            if not free:
                raise _error(
                    "ResourceLimitExceeded",
                    "Insufficient capacity for every instance type in InstancePreferences",
                )
            rc["SelectedInstanceType"] = free[0]
            rc["SelectedInstanceCount"] = rc["InstanceCount"]
        elif not spot and rc.get("InstanceType") in self.no_on_demand:
            raise _error("ResourceLimitExceeded", f"Insufficient capacity for {rc['InstanceType']}")
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:training-job/{name.lower()}"
        waiting = spot and rc.get("InstanceType") in self.no_spot
        self.jobs[name] = {
            "TrainingJobName": name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Starting" if waiting else "Training",
            "ResourceConfig": rc,
            "EnableManagedSpotTraining": spot,
            "CreationTime": self.clock(),
            "LastModifiedTime": self.clock(),
            "Tags": params.get("Tags", []),
            "_waiting": waiting,
        }
        return {"TrainingJobArn": arn}

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803
        job = self.jobs.get(TrainingJobName)
        if job is None:
            raise ClientError(
                {"Error": {"Code": "ResourceNotFound", "Message": "no such job"}},
                "DescribeTrainingJob",
            )
        return {k: v for k, v in job.items() if not k.startswith("_")}

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803
        self.stopped.append(TrainingJobName)
        self.finish(TrainingJobName, "Stopped", billable=0)
        return {}

    # ------------------------------------------------------------------ the rules
    def expire_waits(self) -> list[str]:
        """Every spot job still waiting for capacity ends as its wait runs out."""
        ended = [
            n
            for n, j in self.jobs.items()
            if j["_waiting"] and j["TrainingJobStatus"] == "InProgress"
        ]
        for name in ended:
            self.finish(name, "Stopped", billable=0, secondary="MaxWaitTimeExceeded")
        return ended

    def finish(
        self,
        name: str,
        status: str,
        *,
        billable: int,
        reason: str | None = None,
        secondary: str | None = None,
    ) -> dict[str, Any]:
        job = self.jobs[name]
        job.update(
            TrainingJobStatus=status,
            SecondaryStatus=secondary or status,
            BillableTimeInSeconds=billable,
            TrainingTimeInSeconds=billable,
            LastModifiedTime=self.clock(),
            _waiting=False,
        )
        if reason:
            job["FailureReason"] = reason
        return self.describe_training_job(name)
