"""``ftl models`` and ``ftl review``: a team's model versions with their lineage and their
evaluation's verdict and metrics, and an admin's approval or rejection of a job's version
(docs/CLIENT.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ftl_client.text import table

# The lineage entries shown in the table; ``--json`` gives every entry.
SHOWN = ("job_name", "template", "base_model", "source_hash", "cost_usd", "attempts")


def models_table(models: Sequence[dict[str, Any]]) -> str:
    rows = []
    for m in models:
        lineage = m.get("lineage") or {}
        metrics = ", ".join(
            f"{k[7:]}={v}" for k, v in sorted(lineage.items()) if k.startswith("metric.")
        )
        evaluation = m.get("evaluation") or {}
        scores = ", ".join(
            f"{k}={v:g}" for k, v in sorted((evaluation.get("metrics") or {}).items())
        )
        rows.append(
            [
                str(m.get("model_package_group") or "-"),
                str(m.get("model_package_version") or "-"),
                str(m.get("model_approval_status") or "-"),
                *[str(lineage.get(k, "-")) for k in SHOWN],
                metrics or "-",
                _verdict(evaluation),
                scores or "-",
            ]
        )
    header = ["GROUP", "VERSION", "APPROVAL", "JOB", "TEMPLATE", "BASE MODEL", "SOURCE",
              "COST USD", "ATTEMPTS", "METRICS", "EVALUATION", "EVAL METRICS"]  # fmt: skip
    return table(header, rows)


def _verdict(evaluation: dict[str, Any]) -> str:
    """A version's evaluation in a word: the gate's verdict, the failed checks, or a failure
    (issue 36); ``-`` when it was never evaluated."""
    if not evaluation:
        return "-"
    if evaluation.get("status") == "Failed":
        return "failed"
    failed = evaluation.get("failed_checks") or []
    verdict = str(evaluation.get("verdict") or "-")
    return f"{verdict} ({', '.join(failed)})" if failed else verdict


def evaluation_line(evaluation: dict[str, Any]) -> str:
    """A job's evaluation: its job and status, then the gate's verdict, reason and metrics."""
    parts = [f"{evaluation.get('job_name', '-')} {evaluation.get('status') or ''}".rstrip()]
    if evaluation.get("verdict"):
        parts.append(f"verdict {evaluation['verdict']}: {evaluation.get('reason') or ''}".rstrip())
    metrics = evaluation.get("metrics") or {}
    if metrics:
        parts.append(", ".join(f"{k}={v:g}" for k, v in sorted(metrics.items())))
    return "; ".join(parts)


def listed_status(job: dict[str, Any]) -> str:
    """``ftl list``'s status of a job (issue 36): an evaluated job's adds its evaluation's,
    the gate's verdict once there is one, else the evaluation job's status (or ``Refused``)."""
    status = str(job.get("status", "-"))
    evaluation = job.get("evaluation")
    if not isinstance(evaluation, dict):
        return status
    return f"{status}; eval {evaluation.get('verdict') or evaluation.get('status') or '-'}"


def listed_template(job: dict[str, Any]) -> str:
    """``ftl list``'s template of a job; an evaluation job, listed on its own line like any
    job, is marked as the evaluation (of the job its name extends), and a sweep as a sweep
    (issue 37)."""
    template = str(job.get("template", "-"))
    kind = job.get("kind")
    return f"{template} ({kind})" if kind in ("evaluation", "sweep") else template


def reviewed(answer: dict[str, Any]) -> str:
    text = (
        f"{answer.get('job_name')}: version {answer.get('model_package_version')} of "
        f"{answer.get('model_package_group')} is {answer.get('model_approval_status')}"
    )
    if answer.get("approval_description"):
        text += f" ({answer['approval_description']})"
    return text
