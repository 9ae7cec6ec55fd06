"""A chained job's later attempt, rendered whole by the job model from its record.

A job is its attempts: a plain job has one (its request's own capacity,
``jobmodel.capacity.chain.plain_step``), a chained job one per step. Admission renders attempt
1 (``jobmodel.admission.claim``); the capacity chain renders each later one here from the
record (the stored request, its step). Both go through ``jobmodel.admission.attempt_request``
(``render.render_attempt`` with the runtime's templates, platform, team roles and MLflow
servers), and nothing patches the request afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ftl_ledger.job_codec import from_record
from jobmodel.admission import RenderSettings, attempt_request
from jobmodel.requests.submit import SubmitRequest

__all__ = ["record_attempt_request"]


def record_attempt_request(
    settings: RenderSettings, record: Mapping[str, Any], attempt: int
) -> dict[str, Any]:
    """A chained job's attempt ``attempt`` from its ledger record (read through the codec):
    the stored request and the attempt's step."""
    job = from_record(record)
    if not job.chain or not job.request:
        raise ValueError(f"job {job.job_name} has no chain to render attempt {attempt} of")
    estimate = job.estimated_max_cost_usd
    return attempt_request(
        settings,
        SubmitRequest.from_dict(json.loads(job.request)),
        job.chain[attempt - 1],
        job_name=str(job.job_name),
        attempt=attempt,
        team=job.team,
        requested_by=job.requested_by,
        estimate=None if estimate is None else float(estimate),
    )
