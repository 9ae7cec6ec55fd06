"""The queue backend (``FTL_SCHEDULER=queue``, docs/QUEUE.md): an AWS Batch service job.

The claimed job's rendered ``CreateTrainingJob`` request becomes a ``SubmitServiceJob`` on the
platform's job queue (``service_jobs``); Batch creates the training job when capacity frees.
The 10 KiB payload limit is checked before the claim (:meth:`QueueBackend.check`). Describe,
stop and list reach Batch through the queue flow (``flow.QueueFlow``), given by the host.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ftl_ledger.job_codec import from_record
from ftl_trigger.backends.host import record_pending

# Aliased: the trimmed-model test reads ``batch.<call>(...)`` as a call on a Batch client.
from ftl_trigger.backends.queue import service_jobs
from jobmodel import TERMINAL_STATUSES
from jobmodel.contract.errors import JobModelError, UpstreamError
from jobmodel.contract.names import timestamp
from jobmodel.contract.statuses import Status
from jobmodel.jobs.queue_state import classify_reason
from jobmodel.jobs.record import Change
from jobmodel.jobs.view import current_training_job, queued_job

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_trigger.backends import Host
    from ftl_trigger.backends.queue.places import QueueSpot
    from ftl_trigger.identity import Caller

__all__ = ["QueueBackend", "epoch_ms", "is_queued_job"]

LOG = logging.getLogger("ftl.trigger")


def epoch_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def is_queued_job(job: Mapping[str, Any]) -> bool:
    """A job claimed in queue mode (it carries a Batch priority from its claim on)."""
    return queued_job(from_record(job))


class QueueBackend:
    name = "queue"

    def __init__(self, host: Host) -> None:
        self.host = host

    def owns(self, job: Mapping[str, Any]) -> bool:
        return is_queued_job(job)

    def check(self, job: Mapping[str, Any], rendered: Mapping[str, Any]) -> None:
        self._service_request(job, rendered)  # ValidationError when over 10 KiB

    def start(self, job: dict[str, Any], rendered: Mapping[str, Any]) -> dict[str, Any]:
        """Queue a claimed job; a failure frees its token as a failed create does."""
        host = self.host
        client = self._client(job)
        try:
            queued = service_jobs.submit(client, self._service_request(job, rendered))
        except service_jobs.SubmitUncertain as error:
            try:
                queue = str(host.rt.scheduler.job_queue_arn)
                found = service_jobs.find_by_name(
                    client, queue, current_training_job(from_record(job))
                )
            except JobModelError:
                # Cannot tell: keep the claim, so a replay of the token resubmits with the
                # same clientToken (Batch then answers with the job it may have queued).
                raise error from None
            if found is None:
                host.record_failed(job, error)
                raise error from None
            queued = found
        except JobModelError as error:
            host.record_failed(job, error)
            raise
        return self._record_queued(job, queued)

    def recover(self, job: dict[str, Any]) -> dict[str, Any]:
        if self.host.rt.batch is None:
            return job
        queue = str(self.host.rt.scheduler.job_queue_arn)
        name = current_training_job(from_record(job))
        found = service_jobs.find_by_name(self.host.rt.batch, queue, name)
        return job if found is None else self._record_queued(job, found)

    def refresh(self, job: dict[str, Any]) -> tuple[dict[str, Any], QueueSpot | None]:
        """From Batch while the job waits (with its place), then from SageMaker
        (``flow.QueueFlow.refresh_queued``)."""
        refreshed: tuple[dict[str, Any], QueueSpot | None] = self.host.queue.refresh_queued(job)
        return refreshed

    def catch_up(self, job: dict[str, Any]) -> dict[str, Any]:
        """A live chained job with no attempt pending: Batch's end of its attempt may be held
        (``jobmodel.jobs.batch_end_hold``), so DescribeServiceJob and DescribeTrainingJob say
        whether it ended for want of capacity (the next attempt then starts) or ends the job."""
        seen = from_record(job)
        if seen.status in TERMINAL_STATUSES or not seen.chain or seen.chain_pending:
            return job
        looked: dict[str, Any] = self.host.queue.refresh_queued(job)[0]
        return looked

    def stop(self, job: dict[str, Any], caller: Caller) -> dict[str, Any]:
        """TerminateServiceJob (``flow.QueueFlow.stop_queued``)."""
        stopped: dict[str, Any] = self.host.queue.stop_queued(job, caller)
        return stopped

    def positions(self, items: Sequence[Mapping[str, Any]]) -> dict[str, QueueSpot]:
        """One look at the queue for a page that holds a waiting job."""
        places: dict[str, QueueSpot] = self.host.queue.positions(items)
        return places

    def _client(self, job: Mapping[str, Any]) -> Any:
        if self.host.rt.batch is None:
            name = from_record(job).job_name
            raise UpstreamError(
                f"job {name} was claimed for the job queue but this platform no "
                "longer queues jobs (ftl:scheduler); submit again with a new client_token"
            )
        return self.host.rt.batch

    def _service_request(
        self, job: Mapping[str, Any], rendered: Mapping[str, Any]
    ) -> dict[str, Any]:
        """SubmitServiceJob's parameters for a job; ``ValidationError`` on ``request`` when
        the payload is over Batch's 10 KiB (checked before the job is claimed)."""
        sched = self.host.rt.scheduler
        seen = from_record(job)
        return service_jobs.service_job_request(
            rendered,
            job_queue=str(sched.job_queue_arn),
            job_name=current_training_job(seen),
            # The caller's token, or (none given) one derived from the job's name in a space
            # of its own: a replay of the same claim resubmits with the same clientToken, so
            # Batch queues one job. A chain's later attempts: derived from the attempt's name.
            client_token=seen.client_token if int(seen.attempt or 1) == 1 else None,
            team=seen.team,
            priority=int(seen.priority),  # type: ignore[arg-type]  # queue mode claims one
            tags={t["Key"]: t["Value"] for t in rendered.get("Tags", [])},
            share_policy=sched.share_policy,
        )

    def _record_queued(self, job: dict[str, Any], queued: Mapping[str, Any]) -> dict[str, Any]:
        """Record that Batch queued the job (``queued``: ``{"jobId", "jobArn"}``); a ledger
        failure is logged, not raised: the job is queued whatever happens here, and the
        answer says the record is still being written (``host.record_pending``)."""
        now = self.host.rt.now()
        update = {
            "batch_job_id": queued["jobId"],
            "queued_ms": epoch_ms(now),
            "queue_reason": classify_reason(None),
        }
        once = {"batch_job_arn": queued.get("jobArn") or None, "queued_at": timestamp(now)}
        change = Change.launcher(Status.QUEUED, epoch_ms(now), once=once)
        change = Change({**change.observation, **update}, once)
        try:
            return self.host.write(job, change)
        except JobModelError as err:
            name = from_record(job).job_name
            LOG.warning("job %s queued but the ledger update failed: %s", name, err)
            learned = {"batch_job_id": queued["jobId"], "batch_job_arn": queued.get("jobArn")}
            return record_pending(job, learned)
