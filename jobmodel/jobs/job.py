"""The job record as types (issue 35): a job and its attempts.

Standard library only. :class:`Job` is the ledger's job item, one typed attribute per item
attribute; :class:`Attempt` is one attempt of it (a capacity chain's step; a plain job is a
chain of one step, ``jobmodel.capacity.chain.plain_step``). Each attribute is marked once with
where it shows (:func:`shown`): ``public`` (the end announcement and the job-events function's
answer), ``described`` (describe and list add it when set) and ``notified`` (an ended notice's
message); :data:`PUBLIC_FIELDS`, :data:`DESCRIBE_FIELDS` and :data:`ENDED_FIELDS` are read from
the marks. ``claimed`` marks what the first record always holds (None included).
:meth:`Job.claim` builds that first record; the ledger's codec (``ftl_ledger.job_codec``) turns
a :class:`Job` into an item and back.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..capacity.chain import attempt_name
from ..capacity.plans import SPOT
from ..contract.statuses import Status
from ..locations import checkpoint_s3_uri, output_s3_uri
from ..platform import PlatformConfig
from ..requests.submit import SubmitRequest

__all__ = [
    "CARE_VALUE",
    "CLAIMED_FIELDS",
    "DESCRIBE_FIELDS",
    "ENDED_FIELDS",
    "PUBLIC_FIELDS",
    "Attempt",
    "Job",
    "shown",
]


# ``care``'s value while a job is in the sweep's index (``claims``: claimed, or owing effects).
CARE_VALUE = "care"


def shown(
    *,
    public: bool = False,
    described: bool = False,
    notified: bool = False,
    claimed: bool = False,
) -> Any:
    """An attribute of the record with its marks (None until written)."""
    marks = {"public": public, "described": described, "notified": notified, "claimed": claimed}
    return field(default=None, metadata=marks)


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One attempt of a job: a training job on one step's capacity."""

    attempt: int
    training_job_name: str
    capacity: str  # the step's kind: spot, on-demand or training-plan
    instance_type: str  # the type it runs on (the first preference until SageMaker says)
    instance_types: tuple[str, ...]
    instance_count: int
    status: str  # Pending, Starting, then the training job's status
    started_ms: int | None = None
    ended_ms: int | None = None
    billable_seconds: int | None = None
    cost_usd: float | None = None
    reason: str | None = None

    @classmethod
    def first(cls, step: Mapping[str, Any], job_name: str) -> Attempt:
        """Attempt 1 of a chain, as the claim writes it (``step``: the chain's first)."""
        types = tuple(step["instance_types"])
        return cls(
            attempt=1,
            training_job_name=attempt_name(job_name, 1),
            capacity=str(step["kind"]),
            instance_type=types[0],
            instance_types=types,
            instance_count=int(step["instance_count"]),
            status="Pending",
        )


@dataclass(frozen=True, kw_only=True)
class Job:
    """A ledger job item (``pk = "job#<job_name>"``); None: never written."""

    # the claim (submit)
    job_name: str = shown(claimed=True)
    template: str = shown(public=True, claimed=True)
    status: str = shown(public=True, notified=True, claimed=True)  # a Status
    instance_type: str = shown(notified=True, claimed=True)
    instance_count: int = shown(notified=True, claimed=True)
    spot: bool = shown(claimed=True)
    checkpoint_s3_uri: str = shown(claimed=True)
    output_s3_uri: str = shown(claimed=True)
    requested_by: str | None = shown(claimed=True)
    team: str | None = shown(public=True, claimed=True)
    created_at: str = shown(claimed=True)
    updated_at: str = shown(public=True, notified=True, claimed=True)
    client_token: str | None = shown(claimed=True)
    request: str = shown(claimed=True)  # the SubmitRequest's form, JSON
    request_fingerprint: str = shown(claimed=True)
    rendered: str = shown(claimed=True)  # the current attempt's request, JSON
    rendered_hash: str = shown(claimed=True)
    price_usd_per_hour: float | None = shown(claimed=True)
    estimated_max_cost_usd: float | None = shown(claimed=True)
    price_unknown_reason: str | None = shown(claimed=True)
    priority: int | None = shown(claimed=True)  # queue mode only
    # what the backend and the launcher learned since
    job_arn: str | None = shown()
    error_type: str | None = shown()
    secondary_status: str | None = shown(public=True, notified=True)
    failure_reason: str | None = shown(public=True, described=True, notified=True)
    billable_seconds: int | None = shown(public=True, described=True, notified=True)
    training_seconds: int | None = shown(public=True, described=True, notified=True)
    spot_savings_percent: float | None = shown(public=True, described=True, notified=True)
    cost_usd: float | None = shown(public=True, notified=True)
    final_metrics: Mapping[str, float] | None = shown(public=True, described=True, notified=True)
    spot_interruptions: int | None = shown(public=True, described=True, notified=True)
    training_job_name: str | None = shown(public=True)
    training_job_arn: str | None = shown()
    # the model registry's version of a Completed job (after_training.registry, issue 27)
    model_package_arn: str | None = shown(described=True)
    model_package_group: str | None = shown(described=True)
    model_package_version: int | None = shown(described=True)
    model_approval_status: str | None = shown(described=True)
    # evaluation (issue 36; ``contract.names``): an evaluation job's kind, the job it
    # evaluates and the policy it runs; an evaluated job's ``evaluation`` (the evaluation
    # job's name and status, then its metrics, the gate's verdict and reason)
    kind: str | None = shown(described=True)
    evaluation_of: str | None = shown(described=True)
    evaluation_policy: str | None = shown()
    evaluation: Mapping[str, Any] | None = shown(described=True)
    # sweeps (issue 37; ``contract.names``): the sweep's definition and progress, its trials,
    # the instances its claim holds (its parallel trials'; a job holds its instance count)
    sweep: Mapping[str, Any] | None = shown(described=True)
    sweep_trials: Mapping[str, Any] | None = shown()
    instances_held: int | None = shown()
    tuning_request: str | None = shown()  # the CreateHyperParameterTuningJob request, JSON
    # queue mode
    batch_job_id: str | None = shown(public=True, notified=True)
    batch_job_arn: str | None = shown()
    batch_status: str | None = shown()
    batch_status_reason: str | None = shown()
    queue_reason: str | None = shown(public=True)
    queued_ms: int | None = shown()
    dequeued_ms: int | None = shown()
    queued_at: str | None = shown()
    # capacity chains (``attempts``)
    chain: tuple[Mapping[str, Any], ...] | None = shown()
    attempt: int | None = shown(notified=True)
    attempts: tuple[Attempt, ...] | None = shown()
    chain_pending: bool | None = shown()
    stop_requested: bool | None = shown()
    prior_cost_usd: float | None = shown()
    # settlement (``jobs.settlement.settle``)
    usage_released: bool | None = shown()
    usage_spend_usd: float | None = shown()
    # end effects and notices still owed (``effects``): name -> deduplication id
    owed_effects: Mapping[str, str] | None = shown()
    care: str | None = shown()  # in the sweep's index (``claims``)
    # bookkeeping
    revision: int | None = shown()
    status_source: str | None = shown()
    status_observed_ms: int | None = shown()
    sagemaker_observed_ms: int | None = shown()
    batch_observed_ms: int | None = shown()

    @classmethod
    def claim(
        cls,
        req: SubmitRequest,
        *,
        job_name: str,
        rendered: Mapping[str, Any],
        rendered_hash: str,
        platform: PlatformConfig,
        requested_by: str | None,
        team: str | None,
        now: datetime,
        price: float | None,
        estimate: float | None,
        price_reason: str | None,
        steps: Sequence[Mapping[str, Any]] = (),
        evaluation_policy: Any = None,
    ) -> Job:
        """The first record of a job a submit claims (``Submitting``, in the sweep's index
        until it starts or ends); a chained job (``steps``) with its chain and attempt 1,
        whose capacity is the job's top-level type and spot flag."""
        created_at = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        form, fingerprint = req.recorded()
        job = cls(
            job_name=job_name,
            template=req.template,
            status=Status.SUBMITTING,
            instance_type=req.instance_type,
            instance_count=req.instance_count,
            spot=req.spot,
            checkpoint_s3_uri=checkpoint_s3_uri(platform, job_name, team),
            output_s3_uri=output_s3_uri(platform, job_name, team),
            requested_by=requested_by,
            team=team,
            created_at=created_at,
            updated_at=created_at,
            client_token=req.client_token,
            request=json.dumps(form, sort_keys=True),
            request_fingerprint=fingerprint,
            rendered=json.dumps(rendered, sort_keys=True),
            rendered_hash=rendered_hash,
            price_usd_per_hour=price,
            estimated_max_cost_usd=estimate,
            price_unknown_reason=price_reason,
            priority=req.priority,
            care=CARE_VALUE,
            # issue 36: ``EvaluationPolicy`` (its ``to_dict``), kept so the end owes it
            evaluation_policy=None
            if evaluation_policy is None
            else json.dumps(evaluation_policy.to_dict(), sort_keys=True),
        )
        if not steps:
            return job
        first = steps[0]
        return dataclasses.replace(
            job,
            chain=tuple(dict(s) for s in steps),
            attempt=1,
            attempts=(Attempt.first(first, job_name),),
            spot=first["kind"] == SPOT,
            instance_type=str(first["instance_types"][0]),
        )


def _marked(mark: str) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(Job) if f.metadata.get(mark))


# The record's attributes by where they show, read from the marks above.
PUBLIC_FIELDS = _marked("public")
DESCRIBE_FIELDS = _marked("described")
ENDED_FIELDS = _marked("notified")
CLAIMED_FIELDS = _marked("claimed")
