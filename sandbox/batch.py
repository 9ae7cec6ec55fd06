"""A stand-in for AWS Batch service jobs (SageMaker Training), which moto does not have.

It serves the calls the launcher makes, with botocore's request and response shapes, on the
sandbox's own endpoint (``sandbox/batch_api.py`` routes ``POST /v1/<operation>`` requests
signed for the ``batch`` service here; everything else stays with moto): SubmitServiceJob,
DescribeServiceJob, ListServiceJobs, TerminateServiceJob and GetJobQueueSnapshot. It records
``Batch Service Job State Change`` events as EventBridge would deliver them (``events``), and
with them, in ``outbox``, its training jobs' SageMaker state changes (``batch_sagemaker.py``).

Rules (what is modelled; the real service is the reference):

- A queue (:meth:`BatchStandIn.create_queue`) has one service environment with a capacity in
  instances. A job's size is its payload's ``ResourceConfig.InstanceCount`` (or the sum of
  its ``InstanceGroups``). Jobs SCHEDULED or RUNNING hold their instances.
- A submitted job is RUNNABLE at once (Batch sends no event for the submission itself; the
  stand-in records one for RUNNABLE). Its ``statusReason`` says it waits for capacity.
- Dispatch order: fair share with usage decayed over the policy's ``shareDecaySeconds``, by
  ``shareIdentifier`` (``quotaShareName`` on a quota-share queue, an approximation: no
  borrow limits), or first come first served on a ``fifo`` queue (``sandbox/batch_share.py``).
- The head of the order starts when it fits in the free capacity (no backfill). A head job
  needing more than the whole capacity waits with reason ``TOO_BIG``; the time limit
  (``head_timeout_s``, if ``head_reasons`` has it) terminates it: FAILED, ``isTerminated``,
  ``TIME_LIMIT_TERMINATED`` + the reason. A job waiting for capacity other jobs hold is never
  terminated (SageMaker capacity errors and quota-share limits are not modelled).
- Starting a job creates the SageMaker training job in moto from the stored payload, named
  ``AWSBatch<jobName><32 hex>`` as Batch does (the job name cut to fit SageMaker's 63
  characters: an assumption of this stand-in). moto completes a training job at once; the
  stand-in keeps its jobs InProgress until :meth:`BatchStandIn.finish_training_job` (or
  anything else) sets moto's status to Completed, Failed or Stopped. Then the Batch job is
  SUCCEEDED or FAILED (``statusReason`` ``Received status from SageMaker: `` and the training
  job's ``FailureReason``, or ``Training job <status>`` when it has none), its instances are
  freed, and the next jobs start. Batch's own retries (``retryStrategy``) are not modelled.
- TerminateServiceJob: a RUNNABLE job fails with the given reason and starts nothing; a
  started job's training job is marked Stopped in moto (moto has no StopTrainingJob).
- ``clientToken``: the same token with the same parameters returns the first job; with
  different parameters it is a ClientException. A payload over 10 KiB is a ClientException.

Time comes from ``clock`` (seconds; ``sandbox/clock.py`` moves it); :meth:`tick` applies the
rules on every call (and from :meth:`start_ticker` for the demo).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobmodel.jobs.queue_state import HEAD_LIMIT_REASONS, TIME_LIMIT_TERMINATED
from sandbox.batch_share import ACTIVE, ENDED, dispatch_order
from sandbox.deploy import ACCOUNT, REGION

MAX_PAYLOAD = 10 * 1024
TOO_BIG = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
TOO_BIG_TEXT = "Service environment(s) associated with the job queue cannot meet the capacity"
SAGEMAKER_NAME_MAX = 63
_RUNNING = ("Downloading", "Training", "Uploading")  # SageMaker secondary statuses


class BatchClientError(Exception):
    """Batch's ClientException (HTTP 400) with its message."""


@dataclass
class Queue:
    name: str
    arn: str
    capacity: int
    head_timeout_s: float | None
    weight_factors: dict[str, float]
    share_policy: str = "fairshare"  # or quotashare, or fifo (one share: see the rules)
    head_reasons: tuple[str, ...] = HEAD_LIMIT_REASONS  # what the time limit acts on
    share_decay_s: float = 0.0  # the fair-share policy's shareDecaySeconds


@dataclass
class Job:
    job_id: str
    request: dict[str, Any]
    queue: Queue
    share: str
    instances: int
    created: float
    status: str = "RUNNABLE"
    reason: str | None = None
    scheduled: float | None = None
    started: float | None = None
    stopped: float | None = None
    training_arn: str | None = None
    terminated: bool = False
    head_since: float | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def arn(self) -> str:
        return batch_arn("service-job", self.job_id)

    @property
    def name(self) -> str:
        return self.request["jobName"]


class BatchStandIn:
    """The service-job state machine; thread-safe (one lock around every call)."""

    def __init__(self, *, clock: Callable[[], float] = time.time, sagemaker: Any = None) -> None:
        self.clock = clock
        # Every event, in order: Batch's and the SageMaker state changes of the training jobs
        # the stand-in started (sandbox/batch_sagemaker.py); sandbox/event_pump.py reads it.
        self.outbox: list[dict[str, Any]] = []
        if sagemaker is None:
            from sandbox.batch_sagemaker import MotoSageMaker

            sagemaker = MotoSageMaker(clock=clock, on_change=self.outbox.append)
        self.sagemaker = sagemaker
        self.queues: dict[str, Queue] = {}
        self.jobs: dict[str, Job] = {}
        self.tokens: dict[str, tuple[str, str]] = {}
        self.events: list[dict[str, Any]] = []  # Batch state changes
        self.on_event: Callable[[dict[str, Any]], None] | None = None
        self._lock = threading.RLock()
        self._ticker: threading.Event | None = None

    # ------------------------------------------------------------------ set-up
    def create_queue(
        self,
        name: str,
        *,
        capacity: int,
        head_timeout_s: float | None = None,
        weight_factors: dict[str, float] | None = None,
        share_policy: str = "fairshare",
        head_reasons: tuple[str, ...] = HEAD_LIMIT_REASONS,
        share_decay_s: float = 0.0,
    ) -> str:
        arn, factors = batch_arn("job-queue", name), dict(weight_factors or {})
        with self._lock:
            self.queues[name] = Queue(
                name, arn, capacity, head_timeout_s, factors, share_policy, head_reasons,
                share_decay_s,
            )  # fmt: skip
        return arn

    # -------------------------------------------------------------- operations
    def submit(self, req: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            queue = self._queue(req.get("jobQueue"))
            share = self._check_submit(req, queue)
            token = req.get("clientToken")
            fingerprint = json.dumps(
                {k: v for k, v in req.items() if k != "clientToken"}, sort_keys=True
            )
            if token and token in self.tokens:
                job_id, seen = self.tokens[token]
                if seen != fingerprint:
                    raise BatchClientError(
                        f"Idempotent parameter mismatch: clientToken {token} was already "
                        "used with different parameters"
                    )
                return self._submitted(self.jobs[job_id])
            payload = json.loads(req["serviceRequestPayload"])
            job = Job(
                job_id=str(uuid.uuid4()),
                request=dict(req),
                queue=queue,
                share=share,
                instances=_instances(payload),
                created=self.clock(),
                reason=f"Waiting for capacity in the service environment of job queue {queue.name}",
            )
            self.jobs[job.job_id] = job
            if token:
                self.tokens[token] = (job.job_id, fingerprint)
            self._emit(job)
            self._tick()
            return self._submitted(job)

    def describe(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            self._tick()
            return self._view(self._job(job_id), full=True)

    def list(self, req: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._tick()
            queue = self._queue(req.get("jobQueue"))
            from sandbox.batch_api import filter_jobs

            jobs = filter_jobs([j for j in self.jobs.values() if j.queue is queue], req)
            jobs.sort(key=lambda j: j.created, reverse=True)
            start, size = int(req.get("nextToken") or 0), int(req.get("maxResults") or 100)
            page = jobs[start : start + size]
            out: dict[str, Any] = {"jobSummaryList": [self._view(j, full=False) for j in page]}
            if start + size < len(jobs):
                out["nextToken"] = str(start + size)
            return out

    def terminate(self, job_id: str, reason: str) -> dict[str, Any]:
        with self._lock:
            job = self._job(job_id)
            if job.status in ENDED:
                return {}
            if job.status in ACTIVE and job.training_arn:
                self.sagemaker.set_status(job.training_arn.rsplit("/", 1)[-1], "Stopped")
            self._end(job, "FAILED", reason, terminated=True)
            self._tick()
            return {}

    def snapshot(self, queue_name: str) -> dict[str, Any]:
        with self._lock:
            self._tick()
            queue = self._queue(queue_name)
            order = self._order(queue)[:100]
            now_ms = int(self.clock() * 1000)
            return {
                "frontOfQueue": {
                    "jobs": [
                        {"jobArn": j.arn, "earliestTimeAtPosition": int(j.created * 1000)}
                        for j in order
                    ],
                    "lastUpdatedAt": now_ms,
                }
            }

    # ------------------------------------------------------------ test helpers
    def finish_training_job(
        self,
        training_job_name: str,
        status: str = "Completed",
        *,
        secondary: str | None = None,
        reason: str | None = None,
    ) -> None:
        """End a training job the stand-in started, as SageMaker would (``secondary``: its
        secondary status, e.g. a spot wait's ``MaxWaitTimeExceeded``; ``reason``: its
        ``FailureReason``), then reschedule."""
        with self._lock:
            self.sagemaker.set_status(training_job_name, status, secondary, reason=reason)
            self._tick()

    def run_training_job(self, training_job_name: str) -> None:
        """Move a started training job on to Training (Batch: SCHEDULED -> RUNNING)."""
        with self._lock:
            self.sagemaker.set_status(training_job_name, "InProgress", "Training")
            self._tick()

    def tick(self) -> None:
        with self._lock:
            self._tick()

    def start_ticker(self, interval_s: float = 0.5) -> None:
        stop = threading.Event()
        self._ticker = stop

        def run() -> None:
            while not stop.wait(interval_s):
                self.tick()

        threading.Thread(target=run, daemon=True, name="batch-standin").start()

    def stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.set()

    # ---------------------------------------------------------------- the rules
    def _tick(self) -> None:
        for job in list(self.jobs.values()):
            if job.status in ACTIVE and job.training_arn:
                self._follow_training_job(job)
        for queue in self.queues.values():
            self._dispatch(queue)

    def _follow_training_job(self, job: Job) -> None:
        status, secondary = self.sagemaker.status(job.training_arn.rsplit("/", 1)[-1])
        if status == "InProgress" and secondary in _RUNNING and job.status == "SCHEDULED":
            job.status, job.started = "RUNNING", self.clock()
            self._emit(job)
        elif status in ("Completed", "Failed", "Stopped"):
            end = "SUCCEEDED" if status == "Completed" else "FAILED"
            # Batch passes SageMaker's FailureReason on (what retryStrategy rules match).
            why = self.sagemaker.failure_reason(job.training_arn.rsplit("/", 1)[-1])
            self._end(
                job,
                end,
                f"Received status from SageMaker: {why or f'Training job {status.lower()}'}",
            )

    def _dispatch(self, queue: Queue) -> None:
        now = self.clock()
        while True:
            order = self._order(queue)
            if not order:
                return
            head = order[0]
            if head.head_since is None:
                head.head_since = now
            free = queue.capacity - self._held(queue)
            if head.instances <= free:
                self._start(head)
                continue
            if head.instances <= queue.capacity:
                return  # its turn comes when running jobs end: no time limit applies
            head.reason = f"{TOO_BIG} - {TOO_BIG_TEXT} requirement of the job."
            limit = queue.head_timeout_s if TOO_BIG in queue.head_reasons else None
            if limit is None or now - head.head_since < limit:
                return
            self._end(head, "FAILED", TIME_LIMIT_TERMINATED + TOO_BIG, terminated=True)

    def _order(self, queue: Queue) -> list[Job]:
        return dispatch_order(
            [j for j in self.jobs.values() if j.queue is queue],
            now=self.clock(),
            decay_s=queue.share_decay_s,
            weights=queue.weight_factors,
            fifo=queue.share_policy == "fifo",
        )

    def _held(self, queue: Queue) -> int:
        jobs = self.jobs.values()
        return sum(j.instances for j in jobs if j.queue is queue and j.status in ACTIVE)

    def _start(self, job: Job) -> None:
        payload = json.loads(job.request["serviceRequestPayload"])
        room = SAGEMAKER_NAME_MAX - len("AWSBatch") - 32
        name = f"AWSBatch{job.name[:room]}{uuid.uuid4().hex}"
        payload["TrainingJobName"] = name
        job.scheduled, job.head_since, job.reason = self.clock(), None, None
        try:
            job.training_arn = self.sagemaker.create(payload)
        except Exception as exc:  # SageMaker refused the payload: Batch fails the job
            self._end(job, "FAILED", f"Received status from SageMaker: {exc}")
            return
        job.status = "SCHEDULED"
        job.attempts.append(
            {
                "serviceResourceId": {"name": "TrainingJobArn", "value": job.training_arn},
                "startedAt": int(job.scheduled * 1000),
            }
        )
        self._emit(job)

    def _end(self, job: Job, status: str, reason: str, *, terminated: bool = False) -> None:
        job.status, job.reason, job.stopped = status, reason, self.clock()
        job.terminated = terminated
        if job.attempts:
            job.attempts[-1].update(stoppedAt=int(job.stopped * 1000), statusReason=reason)
        self._emit(job)

    # ----------------------------------------------------------------- views
    def _check_submit(self, req: dict[str, Any], queue: Queue) -> str:
        from sandbox.batch_api import check_submit

        return check_submit(req, queue)

    def _queue(self, ref: Any) -> Queue:
        name = str(ref or "").rsplit("/", 1)[-1]
        if name not in self.queues:
            raise BatchClientError(f"Job queue {ref} does not exist")
        return self.queues[name]

    def _job(self, job_id: str) -> Job:
        if job_id not in self.jobs:
            raise BatchClientError(f"Job {job_id} not found")
        return self.jobs[job_id]

    def _submitted(self, job: Job) -> dict[str, Any]:
        return {"jobArn": job.arn, "jobName": job.name, "jobId": job.job_id}

    def _view(self, job: Job, *, full: bool) -> dict[str, Any]:
        from sandbox.batch_api import view

        return view(job, full=full)

    def _emit(self, job: Job) -> None:
        from sandbox.batch_api import state_change_event

        event = state_change_event(job, self.clock())
        self.events.append(event)
        self.outbox.append(event)
        if self.on_event is not None:
            self.on_event(event)


def batch_arn(kind: str, name: str) -> str:
    """The ARN AWS Batch gives a ``job-queue``, ``service-environment``, ``scheduling-policy``
    or ``service-job`` in the sandbox's account and region."""
    return f"arn:aws:batch:{REGION}:{ACCOUNT}:{kind}/{name}"


def _instances(payload: dict[str, Any]) -> int:
    config = payload.get("ResourceConfig") or {}
    groups = config.get("InstanceGroups") or []
    if groups:
        return sum(int(g.get("InstanceCount", 0)) for g in groups)
    return int(config.get("InstanceCount", 1))
