"""EventBridge events -> what one of them says about one ledger job, or ``Malformed``.

Two sources (docs/API.md, "Job events"):

* ``aws.sagemaker`` / ``SageMaker Training Job State Change``: the detail is the training
  job's description; ``jobmodel.jobs.training_state`` maps it. A training job that AWS Batch
  created is named ``AWSBatch<job name><32 hex>``; it maps to the ledger job its
  ``ftl:job-name`` tag names (queue mode tags the payload), else to ``<job name>``.
* ``aws.batch`` / ``Batch Service Job State Change``: the detail is the service job's
  description (DescribeServiceJob without tags and payload); ``jobmodel.jobs.queue_state`` maps
  it. Its ``jobName`` is the ledger's job name (the trigger submits with it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ftl_events.ownership import owner_of
from jobmodel._rules import JOB_NAME_RE
from jobmodel.capacity.chain import ledger_job_of_attempt
from jobmodel.contract.names import JOB_NAME_TAG_KEY
from jobmodel.contract.statuses import Status
from jobmodel.jobs import queue_state, training_state
from jobmodel.jobs.attempts import ATTEMPT_HINT

SAGEMAKER = ("aws.sagemaker", training_state.EVENT_DETAIL_TYPE)
# A sweep's tuning job (issue 37): its own state changes, and its trials' (training jobs that
# name it in ``TuningJobArn``) move the sweep on through the trigger's ``refresh``.
TUNING = ("aws.sagemaker", "SageMaker HyperParameter Tuning Job State Change")
BATCH = ("aws.batch", queue_state.EVENT_DETAIL_TYPE)
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")


class Malformed(ValueError):
    """The event is not a well-formed state change from one of the two sources."""


@dataclass(frozen=True)
class Observation:
    """One event in ledger terms: the job it is about and the fields it reports."""

    job_name: str
    update: dict[str, Any]
    event_id: str | None = None
    # Who the event's job belongs to, as far as the event says (``ownership.owner_of``).
    owner: dict[str, str] = field(default_factory=dict)
    # A sweep's tuning job or trial: the sweep (``job_name``) is refreshed, nothing recorded.
    sweep: bool = False

    @property
    def source(self) -> str:
        return str(self.update["status_source"])


def parse(event: Any) -> Observation:
    """The observation a well-formed event carries; ``Malformed`` (naming why) otherwise."""
    if not isinstance(event, dict):
        raise Malformed("the event is not an object")
    kind = (event.get("source"), event.get("detail-type"))
    if kind not in (SAGEMAKER, BATCH, TUNING):
        raise Malformed(
            f"not a {SAGEMAKER[1]!r} ({SAGEMAKER[0]}), {TUNING[1]!r} or {BATCH[1]!r} "
            f"({BATCH[0]}) event"
        )
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise Malformed("no detail object")
    when = event.get("time")
    if when is not None and (not isinstance(when, str) or not _TIME_RE.fullmatch(when)):
        raise Malformed("time is not an ISO 8601 UTC timestamp")
    event_id = event.get("id") if isinstance(event.get("id"), str) else None
    try:
        if kind == TUNING or (kind == SAGEMAKER and detail.get("TuningJobArn")):
            return _sweep(detail, event_id)
        if kind == SAGEMAKER:
            return _sagemaker(detail, _ms(when), event_id)
        return _batch(detail, event_id)
    except ValueError as err:
        raise Malformed(str(err)) from None


def _sweep(detail: dict[str, Any], event_id: str | None) -> Observation:
    """A tuning job's event (its name) or a trial's (its ``TuningJobArn``'s last part); the
    owner from the trial, or from the tuning job's definition."""
    name = detail.get("HyperParameterTuningJobName")
    if not isinstance(name, str):
        arn = detail.get("TuningJobArn")
        name = arn.rsplit("/", 1)[-1] if isinstance(arn, str) and "/" in arn else None
    if not isinstance(name, str) or not JOB_NAME_RE.fullmatch(name):
        raise ValueError("no valid tuning job name")
    owner_detail = dict(detail)
    definition = detail.get("TrainingJobDefinition")
    if "RoleArn" not in owner_detail and isinstance(definition, dict):
        owner_detail["RoleArn"] = definition.get("RoleArn")
    update = {"status_source": "sagemaker"}
    return Observation(
        job_name=name, update=update, event_id=event_id, owner=owner_of(owner_detail), sweep=True
    )


def _sagemaker(detail: dict[str, Any], when_ms: int | None, event_id: str | None) -> Observation:
    update = training_state.from_training_job(detail, fallback_ms=when_ms)
    name = update["training_job_name"]
    job_name = queue_state.ledger_job_name(name)
    if job_name == name:  # a capacity chain's later attempt: <job>-a<n>
        job_name, _ = ledger_job_of_attempt(name)
    if job_name != name:
        # Batch may cut the job's name to fit its own into SageMaker's 63 characters: the
        # payload's ftl:job-name tag names the ledger job whatever Batch called it.
        job_name = _tag(detail.get("Tags"), JOB_NAME_TAG_KEY) or job_name
        # A capacity chain's later attempt is its own service job, tagged <job>-a<n>.
        job_name, update[ATTEMPT_HINT] = ledger_job_of_attempt(job_name)
        # Batch created this training job when it took the job off the queue: its creation
        # time ends the wait when SageMaker's event arrives before Batch's SCHEDULED one.
        created = training_state.epoch_ms(detail.get("CreationTime"))
        if created is not None:
            update["dequeued_ms"] = created
    if job_name != name and update["status"] == Status.FAILED:
        # Batch may retry a failed attempt with a new training job: Batch's own FAILED ends
        # the job, SageMaker's Failed of one attempt does not (docs/API.md, "Job events").
        update["status"] = str(Status.IN_PROGRESS)
    return Observation(job_name=job_name, update=update, event_id=event_id, owner=owner_of(detail))


def _batch(detail: dict[str, Any], event_id: str | None) -> Observation:
    name = detail.get("jobName")
    if not isinstance(name, str) or not JOB_NAME_RE.fullmatch(name):
        raise ValueError("jobName is not a job name of this platform")
    update = queue_state.from_service_job(detail).fields()
    # A capacity chain's later attempt is a service job of its own, named <job>-a<n>.
    name, update[ATTEMPT_HINT] = ledger_job_of_attempt(name)
    return Observation(job_name=name, update=update, event_id=event_id, owner=owner_of(detail))


def _tag(tags: Any, key: str) -> str | None:
    """A job name from the event's ``Tags`` (an object in SageMaker's events; a list of
    ``Key``/``Value`` pairs accepted too), or None when absent or not a job name."""
    if isinstance(tags, list):
        tags = {t.get("Key"): t.get("Value") for t in tags if isinstance(t, dict)}
    value = tags.get(key) if isinstance(tags, dict) else None
    return value if isinstance(value, str) and JOB_NAME_RE.fullmatch(value) else None


def _ms(when: str | None) -> int | None:
    if when is None:
        return None
    return int(datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() * 1000)
