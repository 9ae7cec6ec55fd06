"""An evaluation job's end, read (issue 36): what it measured, and what its parent job shows.

Standard library only. An evaluation job is a job record of kind :data:`EVALUATION_KIND`
naming the job it evaluates (:data:`PARENT`); its request is rendered where a training job's
is. Its end owes one effect, :data:`RESULTS` (deduplication id ``<parent>/evaluated``), done by
either function (``ftl_ledger.evaluation``):

1. the results: ``evaluation.json`` from the job's ``output/output.tar.gz``
   (:func:`read_result`; ``training/ftl_eval/main.py`` writes it), turned into an
   :class:`Outcome`. An evaluation job that failed or was stopped, or left no readable file,
   is a failed evaluation with the reason;
2. the gate (``gate.verdict``) with the policy the evaluation ran (:func:`policy_of`) and the
   baseline (the group's latest ``Approved`` version's ``eval.<metric>`` entries,
   ``evaluation.version``);
3. the parent's version updated (``evaluation.version``), the parent's ``evaluation``
   attribute given ``metrics``, ``verdict``, ``reason`` and ``failed_checks``
   (:func:`parent_view`); that write owes the parent's ``evaluated`` notice
   (``jobs.notifications``).
"""

from __future__ import annotations

import io
import json
import math
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..contract import names
from ..contract.errors import TemplateError
from ..contract.statuses import Status
from ..jobs.job import Job
from ..templates.evaluation_policy import EvaluationPolicy
from .gate import Verdict, verdict

__all__ = [
    "ATTRIBUTE",
    "EVALUATE",
    "EVALUATION_KIND",
    "KIND",
    "PARENT",
    "POLICY_ATTRIBUTE",
    "RESULTS",
    "RESULT_FILE",
    "Outcome",
    "ResultError",
    "is_evaluation",
    "judge",
    "outcome",
    "output_archive_url",
    "parent_name",
    "parent_view",
    "policy_of",
    "read_result",
    "results_dedup",
]

# The evaluation job's record: its kind and the job it evaluates (written by its claim).
KIND = names.JOB_KIND
EVALUATION_KIND = names.EVALUATION_KIND
PARENT = names.EVALUATION_OF
# The policy the evaluation ran (``EvaluationPolicy.to_dict`` as JSON), on the evaluation
# job's record; failing that, ``policy`` in the parent's ``evaluation``.
POLICY_ATTRIBUTE = names.EVALUATION_POLICY
# The parent's attribute: {job_name, status, ...} from the start; metrics and verdict here.
ATTRIBUTE = names.EVALUATION
# The parent's end effect that starts the evaluation (its registration names ModelMetrics).
EVALUATE = "evaluate"
# The evaluation job's end effect (``jobs.effects.RESULTS``): results read, version gated,
# parent written.
RESULTS = "evaluation_results"
RESULT_FILE = "evaluation.json"
OUTPUT_ARCHIVE = "output.tar.gz"  # SageMaker's archive of /opt/ml/output/data
NAME_SUFFIX = "-eval"
MAX_RESULT_BYTES = 1024 * 1024  # evaluation.json inside the archive
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024  # output.tar.gz read into memory


class ResultError(ValueError):
    """The evaluation's output holds no readable ``evaluation.json``."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What an evaluation found: ``status`` ``Completed`` (``metrics`` measured) or ``Failed``
    (``reason`` says why)."""

    evaluation_job: str
    status: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    reason: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != Status.COMPLETED


def is_evaluation(job: Job) -> bool:
    """Whether ``job`` is an evaluation job's record."""
    return job.kind == EVALUATION_KIND


def parent_name(job: Job) -> str | None:
    """The job an evaluation job evaluates (None when the record names none)."""
    return job.evaluation_of or None


def results_dedup(parent: str) -> str:
    """The results effect's and the ``evaluated`` notice's one id: ``<parent>/evaluated``."""
    return f"{parent}/evaluated"


def _rendered(job: Job) -> dict[str, Any]:
    raw = job.rendered
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return dict(value) if isinstance(value, Mapping) else {}


def output_archive_url(job: Job) -> str:
    """Where SageMaker put the evaluation job's output data:
    ``<S3OutputPath>/<training job>/output/output.tar.gz``."""
    rendered = _rendered(job)
    path = str((rendered.get("OutputDataConfig") or {}).get("S3OutputPath", "")).rstrip("/")
    if not path:
        path = str(job.output_s3_uri or "").rstrip("/")
    training = job.training_job_name or rendered.get("TrainingJobName") or job.job_name
    return f"{path}/{training}/output/{OUTPUT_ARCHIVE}"


def read_result(data: bytes) -> dict[str, Any]:
    """``evaluation.json`` from an ``output.tar.gz``'s bytes (``ResultError`` when absent,
    too large or not a JSON object)."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise ResultError(f"output.tar.gz is over {MAX_ARCHIVE_BYTES} bytes")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.rsplit("/", 1)[-1] == RESULT_FILE:
                    if member.size > MAX_RESULT_BYTES:
                        raise ResultError(f"{RESULT_FILE} is over {MAX_RESULT_BYTES} bytes")
                    handle = archive.extractfile(member)
                    body = json.loads(handle.read() if handle else b"")
                    if not isinstance(body, dict):
                        raise ResultError(f"{RESULT_FILE} is not a JSON object")
                    return body
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        if isinstance(exc, ResultError):
            raise
        raise ResultError(f"output.tar.gz cannot be read: {exc}") from None
    raise ResultError(f"no {RESULT_FILE} in output.tar.gz")


def _metrics(raw: Any) -> dict[str, float]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, float] = {}
    for name, value in raw.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                out[str(name)] = float(value)
    return out


def outcome(job: Job, result: Mapping[str, Any] | None, problem: str | None = None) -> Outcome:
    """The outcome of the evaluation job ``job`` (as its record ended) with its
    ``evaluation.json`` (None: not read, ``problem`` says why)."""
    name = str(job.job_name)
    status = str(job.status or "")
    said = str(result.get("reason") or "") if result else ""
    if result is not None and result.get("status") == Status.FAILED and said:
        return Outcome(evaluation_job=name, status=Status.FAILED, reason=said)
    if status != Status.COMPLETED:
        why = job.failure_reason or job.batch_status_reason or "no reason given"
        return Outcome(
            evaluation_job=name, status=Status.FAILED, reason=f"evaluation job {status}: {why}"
        )
    if result is None:
        return Outcome(
            evaluation_job=name,
            status=Status.FAILED,
            reason=f"no results: {problem or f'no {RESULT_FILE}'}",
        )
    if result.get("status") != Status.COMPLETED:
        return Outcome(
            evaluation_job=name,
            status=Status.FAILED,
            reason=f"{RESULT_FILE} says {result.get('status')!r}",
        )
    return Outcome(
        evaluation_job=name, status=Status.COMPLETED, metrics=_metrics(result.get("metrics"))
    )


def policy_of(job: Job, parent: Job) -> EvaluationPolicy:
    """The policy the evaluation ran: the evaluation record's :data:`POLICY_ATTRIBUTE`, else
    ``policy`` in the parent's ``evaluation``; with neither (or a bad one), a policy without
    a gate (the version is left for review)."""
    raw: Any = job.evaluation_policy
    if raw is None:
        raw = (parent.evaluation or {}).get("policy")
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
        return EvaluationPolicy.from_dict(data) if isinstance(data, Mapping) else EvaluationPolicy()
    except (ValueError, TemplateError):  # not JSON, or not a policy: read as no gate
        return EvaluationPolicy()


def judge(found: Outcome, policy: EvaluationPolicy, baseline: Mapping[str, float]) -> Verdict:
    """The gate's verdict on ``found``."""
    if found.failed:
        return verdict(None, policy, baseline, failure=found.reason or "failed")
    return verdict(found.metrics, policy, baseline)


def parent_view(
    previous: Mapping[str, Any] | None, found: Outcome, judged: Verdict
) -> dict[str, Any]:
    """The parent's ``evaluation`` after the results: what the start wrote, with the
    evaluation job's name, ``metrics``, ``verdict``, ``reason`` and ``failed_checks``."""
    out = dict(previous or {})
    out.update(
        job_name=out.get("job_name") or found.evaluation_job,
        metrics=dict(found.metrics),
        verdict=judged.status,
        reason=judged.reason,
        failed_checks=list(judged.failed),
    )
    return out
