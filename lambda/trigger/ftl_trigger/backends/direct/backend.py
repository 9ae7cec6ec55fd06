"""The direct backend (``FTL_SCHEDULER=direct``): SageMaker ``CreateTrainingJob``,
``DescribeTrainingJob`` and ``StopTrainingJob``.

``start_job`` is the one call that starts a job; everything else here is what its failures
mean: a name SageMaker already has is the claimed job itself (a peer finished the same claim),
an answer that never came may hide a job SageMaker did create (look before calling it
failed), and any other failure is recorded as ``FailedToStart``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from ftl_ledger.job_codec import from_record
from ftl_trigger.remote import error_code
from jobmodel.contract.errors import Conflict, JobModelError, UpstreamError
from jobmodel.contract.statuses import Status
from jobmodel.jobs.attempts import change_for, current_training_job
from jobmodel.jobs.record import Change
from jobmodel.jobs.training_state import from_training_job
from jobmodel.jobs.view import queued_job

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_trigger.backends import Host
    from ftl_trigger.backends.queue.places import QueueSpot
    from ftl_trigger.identity import Caller

__all__ = ["DirectBackend", "start_job"]

LIST_PAGES = 50  # pages of ListTrainingJobs one look for a claimed job reads at most


def start_job(sagemaker: Any, rendered: Mapping[str, Any]) -> str:
    """Start the rendered job on SageMaker; returns its ARN."""
    return str(sagemaker.create_training_job(**rendered)["TrainingJobArn"])


class DirectBackend:
    name = "direct"

    def __init__(self, host: Host) -> None:
        self.host = host

    def owns(self, job: Mapping[str, Any]) -> bool:
        # A job claimed in queue mode carries a Batch priority (or job) from its claim on.
        return not queued_job(from_record(job))

    def check(self, job: Mapping[str, Any], rendered: Mapping[str, Any]) -> None:
        """Nothing beyond the job model's validation."""

    def start(self, job: dict[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
        host = self.host
        name = current_training_job(from_record(job))  # the job's name, or its current attempt's
        try:
            arn = start_job(host.rt.sagemaker, rendered)
        except (ClientError, BotoCoreError) as exc:
            if error_code(exc) == "ResourceInUse":
                # Only a peer completing the same claimed job can have taken this name.
                return self._adopt(job)
            error = host.map_error(exc, "CreateTrainingJob")
            if host.ambiguous(exc):
                # A timeout or 5xx may hide a job SageMaker did create: look before failing.
                try:
                    described = host.describe_remote(name) if self._exists(name) else None
                except JobModelError:
                    # Cannot tell: keep the claim, so a replay of the token finishes it with
                    # the same job name (and never starts a second job).
                    raise error from None
                if described is not None:
                    return self._adopt(job, described)
            host.record_failed(job, error)
            raise error from None
        return host.record_start(job, self._started(arn))

    def recover(self, job: dict[str, Any]) -> dict[str, Any]:
        name = current_training_job(from_record(job))
        # Listed first: the role may describe only the platform's (tagged) jobs, so of a job
        # that does not exist DescribeTrainingJob answers AccessDenied, not "no such job".
        if not self._exists(name):
            return job
        described = self.host.describe_remote(name)
        if described is None:
            return job
        # Recorded as started; the refresh that follows records where SageMaker is now, so
        # the start and an end are each written (and published) once.
        return self.host.record_start(job, self._started(described["TrainingJobArn"]))

    def refresh(self, job: dict[str, Any]) -> tuple[dict[str, Any], None]:
        """DescribeTrainingJob of the current attempt, recorded (a job SageMaker does not
        describe is left as the ledger has it)."""
        described = self.host.describe_remote(current_training_job(from_record(job)))
        if described is not None:
            update = from_training_job(described)
            job = self.host.write(job, lambda current: change_for(from_record(current), update))
        return job, None

    def catch_up(self, job: dict[str, Any]) -> dict[str, Any]:
        """SageMaker's job events say an attempt's end as it happens: nothing to catch up."""
        return job

    def stop(self, job: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """StopTrainingJob on the current attempt, then ``Stopping``."""
        try:
            name = current_training_job(from_record(job))
            self.host.rt.sagemaker.stop_training_job(TrainingJobName=name)
        except (ClientError, BotoCoreError) as exc:
            raise self.host.map_error(exc, "StopTrainingJob") from None
        # By the order rules: the job may have ended (and its end been recorded and published
        # by another writer) while the stop call was in flight; Stopping never replaces it.
        return self.host.write(job, Change.launcher(Status.STOPPING, self.host.now_ms()))

    def positions(self, items: Sequence[Mapping[str, Any]]) -> dict[str, QueueSpot]:
        """No queue: no places."""
        return {}

    def _exists(self, name: str) -> bool:
        """Whether SageMaker has a training job named ``name`` (ListTrainingJobs by name,
        every page: a page may be short or empty and still carry a ``NextToken``; the
        contract's error when the look-up fails or runs past :data:`LIST_PAGES`)."""
        params: dict[str, Any] = {"NameContains": name, "MaxResults": 100}
        for _ in range(LIST_PAGES):
            try:
                listed = self.host.rt.sagemaker.list_training_jobs(**params)
            except (ClientError, BotoCoreError) as exc:
                raise self.host.map_error(exc, "ListTrainingJobs") from None
            names = {str(j.get("TrainingJobName", "")) for j in listed["TrainingJobSummaries"]}
            if name.lower() in {n.lower() for n in names}:
                return True
            if not listed.get("NextToken"):
                return False
            params["NextToken"] = listed["NextToken"]
        raise UpstreamError(f"ListTrainingJobs for {name} ran past {LIST_PAGES} pages")

    def _started(self, arn: str) -> Change:
        """The launcher's word that SageMaker has the job."""
        return Change.launcher(Status.IN_PROGRESS, self.host.now_ms(), once={"job_arn": arn})

    def _adopt(
        self, job: dict[str, Any], described: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        typed = from_record(job)
        described = described or self.host.describe_remote(current_training_job(typed))
        if described is None:
            raise Conflict(f"job name {typed.job_name} is in use by another job", field="job_name")
        # What SageMaker says of the job, as a describe would record it.
        update = from_training_job(described)
        return self.host.record_start(job, change_for(typed, update))
