"""The tuner backend: a sweep (a job of kind ``sweep``) is one SageMaker tuning job.

Whatever the scheduler, a sweep's trials are the tuner's: ``CreateHyperParameterTuningJob``
starts it (the record's ``tuning_request``, named as the job), ``DescribeHyperParameterTuningJob``
and ``ListTrainingJobsForHyperParameterTuningJob`` refresh it, ``DescribeTrainingJob`` gives an
ended trial's billable seconds so it is charged once (``jobmodel.sweeps.progress``), and
``StopHyperParameterTuningJob`` stops it: by the caller's stop, or when its charged spend
reaches its cap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from ftl_ledger.job_codec import from_record
from ftl_trigger.remote import error_code
from jobmodel.contract import names
from jobmodel.contract.errors import Conflict, JobModelError
from jobmodel.contract.statuses import Status
from jobmodel.jobs.record import Change
from jobmodel.sweeps.progress import ENDED_TRIAL, TunerView, over_cap, sweep_change

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_trigger.backends import Host
    from ftl_trigger.backends.queue.places import QueueSpot
    from ftl_trigger.identity import Caller

__all__ = ["TRIAL_PAGES", "TunerBackend"]

TRIAL_PAGES = 8  # ListTrainingJobsForHyperParameterTuningJob pages of 100: 750 trials at most
DESCRIBES = 25  # ended trials whose billable time one refresh reads at most (the rest: next)


class TunerBackend:
    name = "tuner"

    def __init__(self, host: Host) -> None:
        self.host = host

    def owns(self, job: Mapping[str, Any]) -> bool:
        return from_record(job).kind == names.SWEEP_KIND

    def check(self, job: Mapping[str, Any], rendered: Mapping[str, Any]) -> None:
        """Nothing beyond the job model's validation."""

    # ------------------------------------------------------------------ start
    def start(self, job: dict[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
        host = self.host
        name = str(from_record(job).job_name)
        try:
            arn = host.rt.sagemaker.create_hyper_parameter_tuning_job(**rendered)[
                "HyperParameterTuningJobArn"
            ]
        except (ClientError, BotoCoreError) as exc:
            if error_code(exc) == "ResourceInUse":
                return self._adopt(job)  # a peer finished the same claim
            error = host.map_error(exc, "CreateHyperParameterTuningJob")
            if host.ambiguous(exc):
                try:
                    described = self._describe(name)
                except JobModelError:
                    raise error from None  # cannot tell: the claim stays for a replay
                if described is not None:
                    return self._adopt(job, described)
            host.record_failed(job, error)
            raise error from None
        return host.record_start(job, self._started(str(arn)))

    def recover(self, job: dict[str, Any]) -> dict[str, Any]:
        described = self._describe(str(from_record(job).job_name))
        if described is None:
            return job
        return self.host.record_start(job, self._started(described["HyperParameterTuningJobArn"]))

    # ---------------------------------------------------------------- refresh
    def refresh(self, job: dict[str, Any]) -> tuple[dict[str, Any], None]:
        """The tuner's word on the sweep and its trials, recorded (each ended trial charged
        once); a sweep whose charged spend reached its cap is stopped."""
        typed = from_record(job)
        name = str(typed.job_name)
        described = self._describe(name)
        if described is None:
            return job, None
        trials = self._trials(name)
        known = typed.sweep_trials or {}
        billable: dict[str, int] = {}
        for summary in trials:
            trial = str(summary["TrainingJobName"])
            ended = summary.get("TrainingJobStatus") in ENDED_TRIAL
            if ended and "cost_usd" not in (known.get(trial) or {}) and len(billable) < DESCRIBES:
                billable[trial] = self._billable(trial)
        seen = TunerView(
            status=str(described.get("HyperParameterTuningJobStatus")),
            observed_ms=self.host.now_ms(),
            trials=trials,
            billable=billable,
            best=described.get("BestTrainingJob"),
            failure_reason=described.get("FailureReason"),
        )
        price = typed.price_usd_per_hour
        count = int((typed.sweep or {}).get("trial_instance_count") or typed.instance_count)

        def change(current: Mapping[str, Any]) -> Change:
            return sweep_change(
                from_record(current),
                seen,
                price=None if price is None else float(price),
                trial_count=count,
            )

        job = self.host.write(job, change)
        after = from_record(job)
        if over_cap(after):
            spend, cap = (after.sweep or {}).get("spend_usd"), (after.sweep or {}).get("cap_usd")
            job = self._stop(
                job, f"the sweep's charged spend {spend} USD reached its cap {cap} USD"
            )
        return job, None

    def catch_up(self, job: dict[str, Any]) -> dict[str, Any]:
        return job

    def stop(self, job: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """StopHyperParameterTuningJob: every running trial stops, then the sweep."""
        return self._stop(job, None)

    def positions(self, items: Sequence[Mapping[str, Any]]) -> dict[str, QueueSpot]:
        return {}

    # ---------------------------------------------------------------- helpers
    def _stop(self, job: dict[str, Any], reason: str | None) -> dict[str, Any]:
        name = str(from_record(job).job_name)
        try:
            self.host.rt.sagemaker.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
        except (ClientError, BotoCoreError) as exc:
            # An ended tuning job answers ValidationException: its end is the next refresh's.
            if error_code(exc) != "ValidationException":
                raise self.host.map_error(exc, "StopHyperParameterTuningJob") from None
        also = {"stop_requested": True}
        change = Change.launcher(Status.STOPPING, self.host.now_ms(), also=also, reason=reason)
        return self.host.write(job, change)

    def _describe(self, name: str) -> dict[str, Any] | None:
        try:
            described = self.host.rt.sagemaker.describe_hyper_parameter_tuning_job(
                HyperParameterTuningJobName=name
            )
        except (ClientError, BotoCoreError) as exc:
            if error_code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
                return None
            raise self.host.map_error(exc, "DescribeHyperParameterTuningJob") from None
        return dict(described)

    def _trials(self, name: str) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"HyperParameterTuningJobName": name, "MaxResults": 100}
        out: list[dict[str, Any]] = []
        for _ in range(TRIAL_PAGES):
            try:
                page = self.host.rt.sagemaker.list_training_jobs_for_hyper_parameter_tuning_job(
                    **params
                )
            except (ClientError, BotoCoreError) as exc:
                raise self.host.map_error(
                    exc, "ListTrainingJobsForHyperParameterTuningJob"
                ) from None
            out.extend(page.get("TrainingJobSummaries") or [])
            if not page.get("NextToken"):
                break
            params["NextToken"] = page["NextToken"]
        return out

    def _billable(self, trial: str) -> int:
        try:
            described = self.host.rt.sagemaker.describe_training_job(TrainingJobName=trial)
        except (ClientError, BotoCoreError) as exc:
            raise self.host.map_error(exc, "DescribeTrainingJob") from None
        seconds = described.get("BillableTimeInSeconds")
        if seconds is None:
            seconds = described.get("TrainingTimeInSeconds") or 0
        return int(seconds)

    def _started(self, arn: str) -> Change:
        return Change.launcher(Status.IN_PROGRESS, self.host.now_ms(), once={"job_arn": arn})

    def _adopt(
        self, job: dict[str, Any], described: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        described = described or self._describe(str(from_record(job).job_name))
        if described is None:
            raise Conflict(
                f"tuning job name {from_record(job).job_name} is in use by another job",
                field="job_name",
            )
        return self.host.record_start(job, self._started(described["HyperParameterTuningJobArn"]))


def tuning_request(job: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep's stored CreateHyperParameterTuningJob request (a replay starts with it)."""
    return dict(json.loads(from_record(job).tuning_request or "{}"))
