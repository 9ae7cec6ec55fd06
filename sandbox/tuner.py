"""A stand-in for SageMaker automatic model tuning (hyperparameter tuning jobs) in the sandbox
(sandbox/README.md, "Automatic model tuning").

moto 5.2.5 stores a tuning job but runs no trials, and has no StopHyperParameterTuningJob and
no ListTrainingJobsForHyperParameterTuningJob. :class:`TunerStandIn` holds the rules in one
copy: unit tests call it directly (its methods take the API's parameters, as a boto3 client's
do), and the sandbox mounts the same object on its endpoint (``sandbox/tuner_api.py``).

Rules (the request checks are ``sandbox/tuner_checks.py``'s, the values
``sandbox/tuner_space.py``'s, the answers ``sandbox/tuner_state.py``'s):

* A trial is named ``<tuning job>-<NNN>-<8 hex>`` (NNN from 001) and starts InProgress,
  ``Starting``. At create, and each time a trial ends, trials start until
  ``MaxParallelTrainingJobs`` run or the job's trials are all started
  (``MaxNumberOfTrainingJobs``; Grid: every combination once, at most that many).
* Tests and demos move trials: :meth:`TunerStandIn.run_trial` (``Training``),
  :meth:`TunerStandIn.finish_trial` (Completed, Failed or Stopped, with an objective value),
  :meth:`TunerStandIn.run_to_end` (every trial in turn until the tuning job ends).
* Early stopping ``Auto`` (the stand-in's simplification of SageMaker's median rule): a trial
  that completes with an objective worse than the median of the objectives already in, once
  at least 3 are in, ends Stopped, keeping its objective (ObjectiveStatus Succeeded).
* ``TargetObjectiveMetricValue`` reached, or ``BestObjectiveNotImproving`` for its number of
  trials: no trial starts any more and the running ones are stopped (Stopped, no objective).
* The tuning job ends when no trial runs and none can start: Failed if every trial failed,
  else Completed. StopHyperParameterTuningJob: Stopping, every running trial Stopped (billed
  up to now), then Stopped.
* Each status change of a tuning job is recorded in :attr:`TunerStandIn.outbox` as the
  EventBridge event SageMaker sends, and passed to ``on_event`` when set.

Time comes from ``clock``: a callable returning a ``datetime`` or seconds since the epoch
(``sandbox.clock.SimClock``); one with ``advance`` is moved forward by :meth:`run_to_end`.
One lock guards everything (the sandbox's server is threaded).
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sandbox.deploy import ACCOUNT, REGION
from sandbox.tuner_checks import check_create, check_request, error
from sandbox.tuner_space import default_objective, grid, ranges_of, sample
from sandbox.tuner_state import (
    ENDED,
    Trial,
    Tuning,
    describe_trial,
    describe_tuning,
    page,
    state_event,
)

__all__ = ["TunerStandIn"]


class TunerStandIn:
    def __init__(
        self,
        *,
        region: str = REGION,
        account: str = ACCOUNT,
        clock: Callable[[], Any] | None = None,
    ) -> None:
        self.region, self.account = region, account
        self._clock: Callable[[], Any] = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self.on_event: Callable[[dict[str, Any]], None] | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every tuning job and event (a fresh SageMaker)."""
        with self._lock:
            self.jobs: dict[str, Tuning] = {}
            self._trials: dict[str, str] = {}  # trial name -> tuning job name
            self._arns: dict[str, str] = {}  # lower-case ARN -> tuning job name
            self.outbox: list[dict[str, Any]] = []

    def use_clock(self, clock: Callable[[], Any]) -> None:
        """Take times from ``clock`` from now on (a ``datetime`` or epoch seconds)."""
        self._clock = clock

    def now(self) -> datetime:
        value = self._clock()
        if isinstance(value, datetime):
            return value
        return datetime.fromtimestamp(float(value), UTC)

    # ------------------------------------------------------------------ the API
    def create_hyper_parameter_tuning_job(self, **params: Any) -> dict[str, Any]:
        check_create(params)
        with self._lock:
            name = params["HyperParameterTuningJobName"]
            if name.lower() in (n.lower() for n in self.jobs):
                raise error(
                    "ResourceInUse",
                    f"Hyperparameter tuning job {name} already exists",
                    "CreateHyperParameterTuningJob",
                )
            config = params["HyperParameterTuningJobConfig"]
            ranges = ranges_of(config.get("ParameterRanges"))
            limit = config["ResourceLimits"].get("MaxNumberOfTrainingJobs")
            combos = grid(ranges) if config["Strategy"] == "Grid" else None
            if combos is not None:
                limit = min(len(combos), limit or len(combos))
            seed = config.get("RandomSeed")
            if seed is None:
                seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
            now = self.now()
            arn = f"arn:aws:sagemaker:{self.region}:{self.account}:hyper-parameter-tuning-job/"
            job = Tuning(
                name=name,
                arn=arn + name.lower(),
                request=json.loads(json.dumps(params)),  # a copy the caller cannot change
                created=now,
                modified=now,
                ranges=ranges,
                rng=random.Random(seed),
                grid=combos,
                limit=int(limit),
            )
            self.jobs[name] = job
            self._arns[job.arn] = name
            self._record(job, now)
            self._fill(job, now)
            return {"HyperParameterTuningJobArn": job.arn}

    def describe_hyper_parameter_tuning_job(self, **params: Any) -> dict[str, Any]:
        check_request("DescribeHyperParameterTuningJob", params)
        with self._lock:
            job = self._job(params["HyperParameterTuningJobName"], "Describe")
            return describe_tuning(job, self.now())

    def list_training_jobs_for_hyper_parameter_tuning_job(self, **params: Any) -> dict[str, Any]:
        check_request("ListTrainingJobsForHyperParameterTuningJob", params)
        with self._lock:
            job = self._job(params["HyperParameterTuningJobName"], "ListTrainingJobsFor")
            return page(job, params)

    def stop_hyper_parameter_tuning_job(self, **params: Any) -> dict[str, Any]:
        check_request("StopHyperParameterTuningJob", params)
        with self._lock:
            job = self._job(params["HyperParameterTuningJobName"], "Stop")
            if job.status in ENDED:
                raise error(
                    "ValidationException",
                    f"Hyperparameter tuning job {job.name} is {job.status} and cannot be stopped",
                    "StopHyperParameterTuningJob",
                )
            if job.status == "InProgress":
                now = self.now()
                self._status(job, "Stopping", now)
                self._stop_running(job, now)
                self._status(job, "Stopped", now)
            return {}

    def describe_training_job(self, **params: Any) -> dict[str, Any]:
        check_request("DescribeTrainingJob", params)
        with self._lock:
            name = params["TrainingJobName"]
            if name not in self._trials:
                raise error(
                    "ValidationException",
                    f"Requested resource not found: {name}",
                    "DescribeTrainingJob",
                )
            job, trial = self._trial(name)
            return describe_trial(job, trial)

    def list_tags(self, **params: Any) -> dict[str, Any]:
        """The tuning job's tags, for its ARN or one of its trials' (SageMaker tags each
        training job a tuning job launches with the tuning job's tags)."""
        check_request("ListTags", params)
        with self._lock:
            owner = self._arns.get(str(params["ResourceArn"]).lower())
            if owner is None:
                raise error("ValidationException", "Requested resource not found", "ListTags")
            return {"Tags": list(self.jobs[owner].request.get("Tags", []))}

    def owns_training_job(self, name: str) -> bool:
        """Whether ``name`` is a trial of one of the stand-in's tuning jobs."""
        with self._lock:
            return name in self._trials

    def owns_arn(self, arn: str) -> bool:
        """Whether ``arn`` is one of the stand-in's tuning jobs or trials."""
        with self._lock:
            return str(arn).lower() in self._arns

    # ------------------------------------------------------------------ driving trials
    def trials(self, tuning_name: str) -> list[str]:
        """The tuning job's trials, in the order they started."""
        with self._lock:
            return [t.name for t in self._job(tuning_name, "Describe").trials]

    def run_trial(self, name: str) -> dict[str, Any]:
        """The trial's instances are up: secondary status ``Training`` from now."""
        with self._lock:
            job, trial = self._trial(name)
            if not trial.running or trial.secondary != "Starting":
                raise ValueError(f"{name} is {trial.status}/{trial.secondary}, not Starting")
            now = self.now()
            trial.secondary, trial.started, trial.modified = "Training", now, now
            job.modified = now
            return describe_trial(job, trial)

    def finish_trial(
        self,
        name: str,
        objective: float | None = None,
        status: str = "Completed",
        billable: int | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """End a running trial. ``objective`` None: the stand-in's default objective for a
        Completed trial, none for a Stopped one (a Failed one never has one). ``billable``
        None: the seconds since it started ``Training``. Then the tuning job's rules apply:
        early stopping, completion criteria, new trials, its own end."""
        if status not in ENDED:
            raise ValueError(f"a trial ends Completed, Failed or Stopped, not {status}")
        with self._lock:
            job, trial = self._trial(name)
            if not trial.running:
                raise ValueError(f"{name} already ended {trial.status}")
            now = self.now()
            if status == "Completed" and trial.started is None:
                trial.started = now  # it trained, if only for an instant
            if status == "Completed" and objective is None:
                objective = default_objective(job.ranges, trial.tuned, job.maximize)
            if status == "Failed":
                objective = None
                reason = reason or "AlgorithmError: the trial failed (sandbox tuner stand-in)"
            if status == "Completed" and self._stops_early(job, float(objective or 0.0)):
                status = "Stopped"
            self._end_trial(job, trial, status, now, objective=objective, billable=billable)
            trial.reason = reason
            self._after_trial(job, now)
            return describe_trial(job, trial)

    def run_to_end(
        self,
        tuning_name: str,
        objective_of: Callable[[dict[str, str]], float] | None = None,
        seconds_per_trial: float = 60.0,
    ) -> dict[str, Any]:
        """Run every trial for ``seconds_per_trial`` and finish it, in the order they end
        (trials run side by side up to the parallel limit; ties: start order), starting the
        next ones as slots free, until the tuning job ends; returns its description.
        ``objective_of(tuned hyperparameters)`` gives each objective (None: the default).
        A clock with ``advance`` (a ``SimClock``) is moved to each end; on another clock each
        trial is billed ``seconds_per_trial``."""
        advance = getattr(self._clock, "advance", None)
        with self._lock:
            job = self._job(tuning_name, "Describe")
            ends: dict[str, datetime] = {}
            while job.status == "InProgress" and job.running():
                now = self.now()
                for t in job.running():
                    if t.secondary == "Starting":
                        self.run_trial(t.name)
                    ends.setdefault(
                        t.name, (t.started or now) + timedelta(seconds=seconds_per_trial)
                    )
                trial = min(job.running(), key=lambda t: (ends[t.name], t.index))
                value = objective_of(dict(trial.tuned)) if objective_of is not None else None
                if advance is not None:
                    gap = (ends[trial.name] - self.now()).total_seconds()
                    if gap > 0:
                        advance(gap)
                    self.finish_trial(trial.name, value)
                else:
                    self.finish_trial(trial.name, value, billable=int(seconds_per_trial))
            return describe_tuning(job, self.now())

    # ------------------------------------------------------------------ the rules
    def _job(self, name: str, operation: str) -> Tuning:
        job = self.jobs.get(name)
        if job is None:
            raise error(
                "ResourceNotFound",
                f"Amazon SageMaker can't find a tuning job with name {name}",
                f"{operation}HyperParameterTuningJob",
            )
        return job

    def _trial(self, name: str) -> tuple[Tuning, Trial]:
        job = self.jobs[self._trials[name]]
        return job, next(t for t in job.trials if t.name == name)

    def _fill(self, job: Tuning, now: datetime) -> None:
        """Start trials up to the parallel limit while the tuning job has trials to start."""
        parallel = int(job.config["ResourceLimits"]["MaxParallelTrainingJobs"])
        while (
            job.status == "InProgress"
            and job.halted is None
            and len(job.trials) < job.limit
            and len(job.running()) < parallel
        ):
            index = len(job.trials) + 1
            if job.grid is not None:
                tuned = dict(job.grid[index - 1])
            else:
                tuned = {r.name: sample(r, job.rng) for r in job.ranges}
            tag = hashlib.sha256(f"{job.name}/{index}".encode()).hexdigest()[:8]
            name = f"{job.name}-{index:03d}-{tag}"
            arn = f"arn:aws:sagemaker:{self.region}:{self.account}:training-job/{name.lower()}"
            job.trials.append(Trial(name, arn, index, tuned, created=now, modified=now))
            self._trials[name] = job.name
            self._arns[arn] = job.name
            job.modified = now

    def _stops_early(self, job: Tuning, value: float) -> bool:
        """Early stopping Auto: worse than the median of at least 3 objectives already in."""
        if job.config.get("TrainingJobEarlyStoppingType", "Off") != "Auto":
            return False
        earlier = [float(t.objective or 0.0) for t in job.succeeded()]
        return len(earlier) >= 3 and job.better(statistics.median(earlier), value)

    def _end_trial(
        self,
        job: Tuning,
        trial: Trial,
        status: str,
        now: datetime,
        *,
        objective: float | None = None,
        billable: int | None = None,
    ) -> None:
        if billable is None:
            billable = 0 if trial.started is None else int((now - trial.started).total_seconds())
        trial.status = trial.secondary = status
        trial.ended = trial.modified = job.modified = now
        trial.billable = billable
        trial.objective = None if objective is None else float(objective)
        trial.objective_status = "Failed" if objective is None else "Succeeded"

    def _stop_running(self, job: Tuning, now: datetime) -> None:
        for trial in job.running():
            self._end_trial(job, trial, "Stopped", now)

    def _after_trial(self, job: Tuning, now: datetime) -> None:
        """A trial ended: completion criteria, new trials, and the tuning job's own end."""
        criteria = job.config.get("TuningJobCompletionCriteria") or {}
        best = job.best()
        target = criteria.get("TargetObjectiveMetricValue")
        patience = (criteria.get("BestObjectiveNotImproving") or {}).get(
            "MaxNumberOfTrainingJobsNotImproving"
        )
        if job.halted is None and best is not None:
            value = float(best.objective or 0.0)
            if target is not None and (value == target or job.better(value, float(target))):
                job.halted = "TargetObjectiveMetricValue"
            elif patience is not None and job.not_improving() >= int(patience):
                job.halted = "BestObjectiveNotImproving"
            if job.halted is not None:
                self._stop_running(job, now)
        self._fill(job, now)
        if job.status == "InProgress" and not job.running():
            failed = all(t.status == "Failed" for t in job.trials)
            if failed:
                job.reason = (
                    f"All {len(job.trials)} training jobs failed; see each training job's "
                    "FailureReason"
                )
            self._status(job, "Failed" if failed else "Completed", now)

    def _status(self, job: Tuning, status: str, now: datetime) -> None:
        job.status, job.modified = status, now
        if status in ENDED:
            job.ended = now
        self._record(job, now)

    def _record(self, job: Tuning, now: datetime) -> None:
        event = state_event(job, now, self.account, self.region)
        self.outbox.append(event)
        if self.on_event is not None:
            self.on_event(event)
