"""The ``register`` end effect's performer (``jobmodel.after_training.registry``), for both
functions.

A job that ended ``Completed`` gets exactly one model package version in its team's and
template's group: the group's versions of the job's lifetime are looked through first (newest
first, ListModelPackages, stopping at versions older than the job), so a create that succeeded
before its done mark failed to be written is found, not repeated; only when none is found is
one created (CreateModelPackage with the client token of the effect's deduplication id), and
then described for its version number. What it found or created is answered, so the one writer
records it on the job with the done mark. A job that ended otherwise registers nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ftl_ledger.job_codec import from_record
from jobmodel.after_training import registry as model_registry
from jobmodel.contract.statuses import Status
from jobmodel.jobs.job import Job

__all__ = ["find_version", "registrar"]

PAGE = 100
MAX_PAGES = 20  # 2,000 versions newer than the job: far more than a group gets in a job's life


def registrar(sagemaker: Callable[[], Any] | None, platform: str) -> Callable[..., Any]:
    """The performer: ``sagemaker`` gives the SageMaker client when called (None: this
    deployment has no registry, and the effect is done trivially)."""

    def register(record: Mapping[str, Any], dedup: str) -> dict[str, Any] | None:
        job = from_record(record)
        if sagemaker is None or job.status != Status.COMPLETED:
            return None
        if job.model_package_arn:
            return None  # recorded by an earlier holder of the record
        client = sagemaker()
        group = model_registry.group_name(platform, str(job.template), job.team)
        found = find_version(client, group, job)
        if found is None:
            # issue 36: a job that owes an evaluation names its metrics
            metrics = model_registry.model_metrics(job.output_s3_uri, job.owed_effects)
            request = model_registry.create_request(job, group, dedup, metrics=metrics)
            created = client.create_model_package(**request)
            found = client.describe_model_package(ModelPackageName=created["ModelPackageArn"])
        return model_registry.recorded(group, found)

    return register


def find_version(client: Any, group: str, job: Job) -> dict[str, Any] | None:
    """The version of ``job`` in ``group`` (its ListModelPackages summary), or None."""
    since = _created(job)
    token: str | None = None
    for _ in range(MAX_PAGES):
        page = client.list_model_packages(
            ModelPackageGroupName=group,
            SortBy="CreationTime",
            SortOrder="Descending",
            MaxResults=PAGE,
            **({"NextToken": token} if token else {}),
        )
        for summary in page.get("ModelPackageSummaryList", []):
            if model_registry.is_version_of(summary, str(job.job_name)):
                return dict(summary)
            created = summary.get("CreationTime")
            if since is not None and isinstance(created, datetime) and created < since:
                return None  # older than the job: its version is not further down
        token = page.get("NextToken")
        if not token:
            return None
    return None


def _created(job: Job) -> datetime | None:
    raw = job.created_at
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
