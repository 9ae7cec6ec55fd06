"""The typed job record (issue 35): the marks that replace the hand-kept field lists, the first
record a submit claims, and the ledger's codec."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

from ftl_ledger.job_codec import from_record, to_record
from jobmodel import PlatformConfig, shipped_catalog, validate_submit
from jobmodel.capacity import chain as C
from jobmodel.jobs import effects as E
from jobmodel.jobs import notifications as N
from jobmodel.jobs.attempts import first_attempt
from jobmodel.jobs.job import DESCRIBE_FIELDS, Attempt, Job
from jobmodel.render import request_hash

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1"
CATALOG = {n: s.with_image(IMAGE) for n, s in shipped_catalog().items()}
PLATFORM = PlatformConfig(
    region="us-east-1",
    role_arn="arn:aws:iam::123456789012:role/r",
    data_bucket="ftl-data",
    checkpoint_bucket="ftl-ck",
    artifact_bucket="ftl-art",
    source_s3_uri="s3://ftl-art/source/sourcedir.tar.gz",
)
NOW = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
RENDERED = {"TrainingJobName": "j"}

# The three lists the marks replace, as they were before issue 35.
PUBLIC_BEFORE = {
    "status", "secondary_status", "failure_reason", "billable_seconds", "training_seconds",
    "spot_savings_percent", "cost_usd", "final_metrics", "spot_interruptions", "queue_reason",
    "batch_job_id", "training_job_name", "team", "template", "updated_at",
}  # fmt: skip
ENDED_BEFORE = {
    "status", "secondary_status", "failure_reason", "billable_seconds", "training_seconds",
    "spot_savings_percent", "cost_usd", "final_metrics", "spot_interruptions", "batch_job_id",
    "attempt", "instance_type", "instance_count", "updated_at",
}  # fmt: skip
DESCRIBE_BEFORE = (
    "failure_reason", "billable_seconds", "training_seconds", "spot_savings_percent",
    "final_metrics", "spot_interruptions", "model_package_arn", "model_package_group",
    "model_package_version", "model_approval_status",
    # issue 36: an evaluation job's kind and evaluated job; a job's evaluation
    "kind", "evaluation_of", "evaluation",
    # issue 37: a sweep's definition and progress
    "sweep",
)  # fmt: skip


def test_the_marks_give_the_lists_they_replace() -> None:
    assert set(E.PUBLIC_FIELDS) == PUBLIC_BEFORE and len(E.PUBLIC_FIELDS) == len(PUBLIC_BEFORE)
    assert set(N.ENDED_FIELDS) == ENDED_BEFORE and len(N.ENDED_FIELDS) == len(ENDED_BEFORE)
    assert DESCRIBE_FIELDS == DESCRIBE_BEFORE


def _claim(template: str, steps: list[dict[str, Any]] | None = None, **fields: Any) -> Job:
    req = validate_submit({"template": template, **fields}, CATALOG, PLATFORM)
    return Job.claim(
        req,
        job_name="nlp-x-20260301-1230-abcd",
        rendered=RENDERED,
        rendered_hash=request_hash(RENDERED),
        platform=PLATFORM,
        requested_by="arn:aws:iam::123456789012:user/me",
        team="nlp",
        now=NOW,
        price=1.5,
        estimate=3.0,
        price_reason=None,
        steps=steps or (),
    )


def test_the_first_record_of_a_plain_job_is_the_claims_25_attributes() -> None:
    job = _claim("distilbert-spot", client_token="tok-1")
    req = validate_submit(
        {"template": "distilbert-spot", "client_token": "tok-1"}, CATALOG, PLATFORM
    )
    assert to_record(job) == {
        "job_name": "nlp-x-20260301-1230-abcd",
        "template": "distilbert-spot",
        "status": "Submitting",
        "instance_type": req.instance_type,
        "instance_count": req.instance_count,
        "spot": req.spot,
        "checkpoint_s3_uri": "s3://ftl-ck/nlp/nlp-x-20260301-1230-abcd/",
        "output_s3_uri": "s3://ftl-art/nlp/nlp-x-20260301-1230-abcd/",
        "requested_by": "arn:aws:iam::123456789012:user/me",
        "team": "nlp",
        "created_at": "2026-03-01T12:30:00.000Z",
        "updated_at": "2026-03-01T12:30:00.000Z",
        "client_token": "tok-1",
        "request": json.dumps(req.to_dict(), sort_keys=True),
        "request_fingerprint": req.fingerprint(),
        "rendered": json.dumps(RENDERED, sort_keys=True),
        "rendered_hash": request_hash(RENDERED),
        "price_usd_per_hour": 1.5,
        "estimated_max_cost_usd": 3.0,
        "price_unknown_reason": None,
        "priority": None,
        "care": "care",
    }


def test_a_chained_job_claims_its_chain_and_attempt_one() -> None:
    spec = CATALOG["distilbert-chain"]
    req = validate_submit({"template": spec.name}, CATALOG, PLATFORM)
    steps, _ = C.plan_chain(
        spec, instance_type=req.instance_type, count=1, chosen=None, spot=True, plan=None
    )
    chain = [{**s.to_dict(), "prices": {t: 1.0 for t in s.instance_types}} for s in steps]
    record = to_record(_claim(spec.name, steps=chain))
    assert record["chain"] == chain and record["attempt"] == 1
    assert record["attempts"] == [first_attempt(chain[0], "nlp-x-20260301-1230-abcd")]
    assert record["spot"] is (chain[0]["kind"] == "spot")
    assert record["instance_type"] == chain[0]["instance_types"][0]


def test_the_codec_round_trips_what_the_writers_leave() -> None:
    record = to_record(_claim("distilbert-chain", steps=[]))
    later = {
        **record,
        "status": "Completed",
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/x",
        "final_metrics": {"loss": 0.25},
        "billable_seconds": 120,
        "chain": [{"kind": "spot", "instance_types": ["ml.g5.xlarge"], "instance_count": 1}],
        "attempt": 2,
        "attempts": [
            {
                "attempt": 1,
                "training_job_name": "x",
                "capacity": "spot",
                "instance_type": "ml.g5.xlarge",
                "instance_types": ["ml.g5.xlarge"],
                "instance_count": 1,
                "status": "Failed",
                "ended_ms": 5,
                "cost_usd": 0.1,
                "reason": "no capacity",
            }
        ],
        "owed_effects": {"announce": "x/announce"},
        "revision": 7,
    }
    job = from_record({**later, "pk": "job#x", "gsi_pk": "job", "gsi_sk": "t#x"})
    assert isinstance(job.attempts[0], Attempt) and job.attempts[0].instance_types == (
        "ml.g5.xlarge",
    )
    assert job.final_metrics == {"loss": 0.25} and job.revision == 7
    assert to_record(job) == later
    assert dataclasses.replace(job, status="Stopped").status == "Stopped"
