"""The ``evaluation_results`` end effect's performer (``jobmodel.evaluation.results``), for both
functions.

An evaluation job's end: its ``evaluation.json`` read from S3 (``output/output.tar.gz``),
the baseline read from the group's latest ``Approved`` version, the gate's verdict, the
metrics JSON the version's ``ModelMetrics`` names written, the evaluated job's version
updated (``jobmodel.evaluation.version``), and the evaluated job's record given the metrics
and verdict through the one writer; that write owes the job's ``evaluated`` notice, sent at
once by ``follow`` (the holder's own end effects) or by the job's next holder. Every step is
safe to repeat: the S3 write and the entries are the same each time, the version's status
moves only from ``PendingManualApproval``, and a version that already carries this
evaluation's entries is not updated again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ftl_ledger.job_codec import from_record
from ftl_ledger.writer import JobWriter
from jobmodel.after_training import registry as REG
from jobmodel.evaluation import results as eval_results
from jobmodel.evaluation import version as V
from jobmodel.evaluation.gate import Verdict
from jobmodel.jobs.job import Job
from jobmodel.jobs.record import Change, JobRecord
from jobmodel.templates.evaluation_policy import EvaluationPolicy

__all__ = ["EvaluationResults", "split_s3_uri"]

LOG = logging.getLogger("ftl.ledger")
BASELINE_PAGE = 10  # the newest Approved versions looked through (the job's own is skipped)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key)."""
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"not an S3 object URI: {uri!r}")
    bucket, key = uri[5:].split("/", 1)
    return bucket, key


class EvaluationResults:
    """The performer. ``sagemaker`` and ``s3`` give the clients when called (``sagemaker``
    None: no registry, only the record and the notice); ``follow`` completes what the
    evaluated job's record owes after the write (its ``evaluated`` notice)."""

    def __init__(
        self,
        *,
        writer: JobWriter,
        s3: Callable[[], Any],
        sagemaker: Callable[[], Any] | None,
        platform: str,
        follow: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.writer = writer
        self.s3 = s3
        self.sagemaker = sagemaker
        self.platform = platform
        self.follow = follow

    def __call__(self, job: Mapping[str, Any], dedup: str) -> Mapping[str, Any] | None:
        evaluation = from_record(job)
        name = eval_results.parent_name(evaluation)
        if not eval_results.is_evaluation(evaluation) or name is None:
            return None
        record = self.writer.ledger.get_job(name)
        parent = from_record(record) if record is not None else None
        if record is None or parent is None or parent.team != evaluation.team:
            LOG.warning("evaluation %s: no job %s of its team", evaluation.job_name, name)
            return None
        found = self.outcome(evaluation)
        policy = eval_results.policy_of(evaluation, parent)
        described = self._version(parent)
        judged = eval_results.judge(found, policy, self._baseline(parent, described))
        status = parent.model_approval_status
        if described is not None:
            status = self._update(parent, described, found, judged, policy, dedup)
        elif parent.output_s3_uri:
            self._write_metrics(parent, found, judged)

        def write(current: JobRecord) -> Change:
            previous = from_record(current).evaluation
            also: dict[str, Any] = {
                eval_results.ATTRIBUTE: eval_results.parent_view(previous, found, judged)
            }
            if status:
                also["model_approval_status"] = status
            return Change(also=also)

        after = dict(self.writer.apply(record, write).after)  # type: ignore[arg-type]
        LOG.info("job %s: evaluation %s: %s", name, evaluation.job_name, judged.status)
        if self.follow is not None:
            self.follow(after)
        return None

    # ------------------------------------------------------------------ the results
    def outcome(self, job: Job) -> eval_results.Outcome:
        """What the evaluation found (its ``evaluation.json``, or why there is none)."""
        try:
            bucket, key = split_s3_uri(eval_results.output_archive_url(job))
            body = self.s3().get_object(Bucket=bucket, Key=key)["Body"].read()
            return eval_results.outcome(job, eval_results.read_result(body))
        except (ClientError, BotoCoreError, ValueError) as exc:
            return eval_results.outcome(job, None, _why(exc))

    # ------------------------------------------------------------------ the version
    def _version(self, parent: Job) -> dict[str, Any] | None:
        if self.sagemaker is None or not parent.model_package_arn:
            return None
        described: dict[str, Any] = self.sagemaker().describe_model_package(
            ModelPackageName=parent.model_package_arn
        )
        return described

    def _baseline(self, parent: Job, described: Mapping[str, Any] | None) -> dict[str, float]:
        """The ``eval.*`` metrics of the group's latest Approved version other than the job's."""
        if self.sagemaker is None:
            return {}
        client = self.sagemaker()
        group = parent.model_package_group or REG.group_name(
            self.platform, parent.template, parent.team
        )
        own = (described or {}).get("ModelPackageArn") or parent.model_package_arn
        page = client.list_model_packages(
            ModelPackageGroupName=group,
            ModelApprovalStatus="Approved",
            SortBy="CreationTime",
            SortOrder="Descending",
            MaxResults=BASELINE_PAGE,
        )
        for summary in page.get("ModelPackageSummaryList", []):
            if summary.get("ModelPackageArn") != own:
                base = client.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
                return V.baseline(base.get("CustomerMetadataProperties"))
        return {}

    def _update(
        self,
        parent: Job,
        described: Mapping[str, Any],
        found: eval_results.Outcome,
        judged: Verdict,
        policy: EvaluationPolicy,
        dedup: str,
    ) -> str:
        """The version updated (once); its approval status after."""
        current = str(described.get("ModelApprovalStatus") or REG.PENDING)
        props = described.get("CustomerMetadataProperties")
        if V.is_recorded(props, found.evaluation_job):
            return current
        self._write_metrics(parent, found, judged)
        gated = tuple(g.metric for g in policy.gate)
        request = V.update_request(described, judged, V.entries(found, judged, gated), dedup)
        assert self.sagemaker is not None  # a described version has a client
        self.sagemaker().update_model_package(**request)
        return str(request.get("ModelApprovalStatus") or current)

    def _write_metrics(self, parent: Job, found: eval_results.Outcome, judged: Verdict) -> None:
        """The JSON the version's ModelMetrics names (the same bytes on a repeat)."""
        if not parent.output_s3_uri:
            return
        bucket, key = split_s3_uri(REG.model_metrics_uri(parent.output_s3_uri))
        body = json.dumps(V.metrics_document(found, judged), indent=2, sort_keys=True)
        self.s3().put_object(
            Bucket=bucket, Key=key, Body=body.encode(), ContentType="application/json"
        )


def _why(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')} reading the output: {error.get('Message', '')}"
    return str(exc)
