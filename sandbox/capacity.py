"""A SageMaker stand-in for capacity: spot capacity errors on chosen instance types,
``InstancePreferences`` with ``SelectedInstanceType``/``SelectedInstanceCount``, training
plans, and instances that run out (sandbox/README.md, "Capacity").

moto has none of these. Unit tests put this object where the launcher's SageMaker client is;
the sandbox mounts the same object on its endpoint (``sandbox/capacity_api.py``), so the
deployed trigger meets the same rules through its own boto3 client. Every
``CreateTrainingJob`` request is checked against botocore's model (``validate_parameters``)
before it is looked at. Rules (one copy of each, here):

* ``no_spot``: instance types with no spot capacity. A spot job on one starts (InProgress,
  ``Starting``); :meth:`expire_waits` ends it as SageMaker does when the wait runs out
  (Stopped, secondary status ``MaxWaitTimeExceeded``, no billable time).
* ``no_on_demand``: types with no on-demand capacity. A job with ``InstancePreferences``
  gets the first type with capacity (``SelectedInstanceType``, the job's count as
  ``SelectedInstanceCount``); when no preference has capacity, or a plain on-demand job's
  type has none, the call fails with ``ResourceLimitExceeded`` (HTTP 400, an
  insufficient-capacity message), the code SageMaker answers a start it cannot place with.
* ``instances``: type -> the on-demand instances of that type there are (no entry: as many as
  asked). A running job holds its instances until it ends; a type whose free instances are
  fewer than the job's count has no capacity for it (the rule above).
* ``plans``: training plan ARN -> (instance type, instances). A job on a plan must name the
  plan's type and at most its instances (``ValidationException`` otherwise); while the plan's
  running jobs hold its instances, a job that does not fit fails with ``ResourceLimitExceeded``.
* :meth:`run` moves a job to ``Training`` (its start); :meth:`finish` ends it (Completed,
  Failed with a reason, Stopped) with billable seconds (by default the seconds since
  ``Training``). Starts are serialised: two jobs wanting the last instances at once get them
  one after the other, so exactly one does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters

__all__ = ["CapacityStandIn"]

_MODEL = botocore.session.get_session().get_service_model("sagemaker")
ACCOUNT = "123456789012"
TERMINAL = ("Completed", "Failed", "Stopped")


def _error(code: str, message: str, operation: str = "CreateTrainingJob") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        operation,
    )


class CapacityStandIn:
    def __init__(
        self,
        *,
        no_spot: set[str] | None = None,
        no_on_demand: set[str] | None = None,
        plans: Mapping[str, tuple[str, int]] | None = None,
        instances: Mapping[str, int] | None = None,
        region: str = "us-east-1",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.region = region
        self._clock = clock or (lambda: datetime.now(UTC))
        self._last: datetime | None = None
        self._lock = threading.RLock()
        self.configure(no_spot=no_spot, no_on_demand=no_on_demand, plans=plans, instances=instances)

    def configure(
        self,
        *,
        no_spot: set[str] | None = None,
        no_on_demand: set[str] | None = None,
        plans: Mapping[str, tuple[str, int]] | None = None,
        instances: Mapping[str, int] | None = None,
    ) -> None:
        """Set the rules and forget every job (a fresh SageMaker)."""
        with self._lock:
            self.no_spot = set(no_spot or ())
            self.no_on_demand = set(no_on_demand or ())
            self.plans = dict(plans or {})
            self.instances = dict(instances or {})
            self.jobs: dict[str, dict[str, Any]] = {}
            self.requests: list[dict[str, Any]] = []
            self.stopped: list[str] = []
            self._holds: dict[str, tuple[threading.Event, threading.Event]] = {}

    def use_clock(self, clock: Callable[[], datetime]) -> None:
        """Take times from ``clock`` (the demo's simulated clock) from now on."""
        self._clock = clock

    def clock(self) -> datetime:
        """Strictly increasing times (each state change is newer than the last)."""
        now = self._clock()
        if self._last is not None and now <= self._last:
            now = self._last + timedelta(milliseconds=1)
        self._last = now
        return now

    # ------------------------------------------------------------------ the API
    def hold(self, name: str) -> threading.Event:
        """Hold the ``CreateTrainingJob`` of ``name`` until the returned event is set (a start
        in flight, for tests of what happens meanwhile)."""
        gate = threading.Event()
        self._holds[name] = (gate, threading.Event())
        return gate

    def wait_held(self, name: str, timeout: float = 60.0) -> bool:
        """Wait until the create of ``name`` arrived and is held."""
        return self._holds[name][1].wait(timeout)

    def create_training_job(self, **params: Any) -> dict[str, Any]:
        validate_parameters(params, _MODEL.operation_model("CreateTrainingJob").input_shape)
        held = self._holds.pop(params["TrainingJobName"], None)
        if held is not None:
            held[1].set()
            held[0].wait(60)
        with self._lock:
            return self._create(params)

    def _create(self, params: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(params)
        name = params["TrainingJobName"]
        if name in self.jobs:
            raise _error("ResourceInUse", f"Training job {name} already exists")
        rc = dict(params["ResourceConfig"])
        spot = bool(params.get("EnableManagedSpotTraining"))
        prefs = [p["InstanceType"] for p in rc.get("InstancePreferences", [])]
        # Two of SageMaker's own refusals (tests/constraints has the whole table).
        if prefs and "EnableManagedSpotTraining" in params:
            raise _error(
                "ValidationException",
                "InstancePreferences is mutually exclusive with EnableManagedSpotTraining",
            )
        if len(params.get("Tags", [])) > 50:
            raise _error("ValidationException", "a training job takes at most 50 tags")
        count = int(rc["InstanceCount"])
        plan = rc.get("TrainingPlanArn")
        if plan is not None:
            self._check_plan(plan, rc.get("InstanceType"), count)
        elif prefs:
            free = [t for t in prefs if self._on_demand_free(t, count)]
            if not free:
                raise _error(
                    "ResourceLimitExceeded",
                    "Insufficient capacity for every instance type in InstancePreferences",
                )
            rc["SelectedInstanceType"] = free[0]
            rc["SelectedInstanceCount"] = count
        elif not spot and not self._on_demand_free(str(rc.get("InstanceType")), count):
            raise _error("ResourceLimitExceeded", f"Insufficient capacity for {rc['InstanceType']}")
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:training-job/{name.lower()}"
        waiting = spot and rc.get("InstanceType") in self.no_spot
        now = self.clock()
        self.jobs[name] = {
            "TrainingJobName": name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Starting",
            "RoleArn": params["RoleArn"],
            "AlgorithmSpecification": params["AlgorithmSpecification"],
            "OutputDataConfig": params["OutputDataConfig"],
            "ResourceConfig": rc,
            "StoppingCondition": params["StoppingCondition"],
            "EnableManagedSpotTraining": spot,
            "CreationTime": now,
            "LastModifiedTime": now,
            "Tags": params.get("Tags", []),
            "_waiting": waiting,
        }
        if "CheckpointConfig" in params:
            self.jobs[name]["CheckpointConfig"] = params["CheckpointConfig"]
        return {"TrainingJobArn": arn}

    def _check_plan(self, plan: str, itype: Any, count: int) -> None:
        if plan not in self.plans:
            raise _error("ValidationException", f"training plan {plan} does not exist")
        ptype, reserved = self.plans[plan]
        if itype != ptype or count > reserved:
            raise _error("ValidationException", f"the plan reserves {reserved} x {ptype} instances")
        held = sum(
            int(j["ResourceConfig"]["InstanceCount"])
            for j in self._holding()
            if j["ResourceConfig"].get("TrainingPlanArn") == plan
        )
        if held + count > reserved:
            raise _error(
                "ResourceLimitExceeded",
                f"Insufficient capacity in training plan {plan}: {held} of its {reserved} "
                "instances are in use",
            )

    def _holding(self) -> list[dict[str, Any]]:
        """The jobs that hold instances now (started, not waiting for spot capacity)."""
        return [
            j
            for j in self.jobs.values()
            if j["TrainingJobStatus"] == "InProgress" and not j["_waiting"]
        ]

    def _on_demand_free(self, itype: str, count: int) -> bool:
        if itype in self.no_on_demand:
            return False
        if itype not in self.instances:
            return True
        held = sum(
            int(
                j["ResourceConfig"].get("SelectedInstanceCount")
                or j["ResourceConfig"]["InstanceCount"]
            )
            for j in self._holding()
            if _held_type(j) == itype and not j["ResourceConfig"].get("TrainingPlanArn")
        )
        return held + count <= self.instances[itype]

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803
        job = self.jobs.get(TrainingJobName)
        if job is None:
            raise _error(
                "ValidationException",
                f"Requested resource not found: {TrainingJobName}",
                "DescribeTrainingJob",
            )
        return {k: v for k, v in job.items() if not k.startswith("_")}

    def list_training_jobs(
        self,
        NameContains: str = "",  # noqa: N803
        MaxResults: int = 100,  # noqa: N803
        **_: Any,
    ) -> dict[str, Any]:
        """ListTrainingJobs of the stand-in's jobs whose name contains ``NameContains``
        (the trigger's look for a claimed job; summaries with the name, ARN and status)."""
        names = [n for n in self.jobs if NameContains.lower() in n.lower()][:MaxResults]
        return {
            "TrainingJobSummaries": [
                {
                    "TrainingJobName": n,
                    "TrainingJobArn": self.jobs[n]["TrainingJobArn"],
                    "CreationTime": self.jobs[n]["CreationTime"],
                    "TrainingJobStatus": self.jobs[n]["TrainingJobStatus"],
                }
                for n in names
            ]
        }

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803
        with self._lock:
            job = self.jobs.get(TrainingJobName)
            if job is None:
                raise _error(
                    "ValidationException",
                    f"Requested resource not found: {TrainingJobName}",
                    "StopTrainingJob",
                )
            self.stopped.append(TrainingJobName)
            if job["TrainingJobStatus"] == "InProgress":
                self.finish(TrainingJobName, "Stopped", billable=None)
            return {}

    # ------------------------------------------------------------------ the rules
    def expire_waits(self) -> list[str]:
        """Every spot job still waiting for capacity ends as its wait runs out."""
        with self._lock:
            ended = [
                n
                for n, j in self.jobs.items()
                if j["_waiting"] and j["TrainingJobStatus"] == "InProgress"
            ]
            for name in ended:
                self.finish(name, "Stopped", billable=0, secondary="MaxWaitTimeExceeded")
            return ended

    def run(self, name: str) -> dict[str, Any]:
        """The job's instances are up: secondary status ``Training`` from now."""
        with self._lock:
            job = self.jobs[name]
            if job["_waiting"]:
                raise ValueError(f"{name} waits for spot capacity of a type that has none")
            now = self.clock()
            job.update(SecondaryStatus="Training", TrainingStartTime=now, LastModifiedTime=now)
            return self.describe_training_job(name)

    def finish(
        self,
        name: str,
        status: str,
        *,
        billable: int | None = None,
        reason: str | None = None,
        secondary: str | None = None,
    ) -> dict[str, Any]:
        """End a job; ``billable`` None: the whole seconds since it started ``Training``."""
        with self._lock:
            job = self.jobs[name]
            now = self.clock()
            if billable is None:
                start = job.get("TrainingStartTime")
                billable = 0 if start is None else int((now - start).total_seconds())
            job.update(
                TrainingJobStatus=status,
                SecondaryStatus=secondary or status,
                BillableTimeInSeconds=billable,
                TrainingTimeInSeconds=billable,
                TrainingEndTime=now,
                LastModifiedTime=now,
                _waiting=False,
            )
            if reason:
                job["FailureReason"] = reason
            return self.describe_training_job(name)


def _held_type(job: Mapping[str, Any]) -> str:
    rc = job["ResourceConfig"]
    return str(rc.get("SelectedInstanceType") or rc.get("InstanceType"))
