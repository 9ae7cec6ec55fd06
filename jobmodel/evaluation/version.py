"""The registered version after its evaluation (issue 36): metadata, approval and ModelMetrics.

Standard library only. What the results effect (``ftl_ledger.evaluation``) asks SageMaker:

* **the baseline**: the ``eval.<metric>`` entries of the group's latest ``Approved`` version
  (:func:`baseline`); a version never evaluated gives none;
* **the update** (:func:`update_request`): ``UpdateModelPackage`` with the evaluation's
  entries in ``CustomerMetadataProperties`` (:func:`entries`: ``eval.job``, ``eval.status``,
  ``eval.verdict``, ``eval.failed`` and ``eval.<metric>``, gated metrics first), lineage entries
  removed where the 50 entries would not hold them (:func:`metadata_change`: the
  hyperparameters first, from the last), ``ApprovalDescription`` = the reason and
  ``ModelApprovalStatus`` only when it changes. A version an admin has already reviewed keeps
  its status and description; it gets only the entries;
* **ModelMetrics**: ``UpdateModelPackage`` cannot set them, so the registration of a job that
  owes an evaluation names, in ``ModelMetrics.ModelQuality.Statistics``, the JSON the results
  effect writes later (``after_training.registry.model_metrics``; :func:`metrics_document`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..after_training.registry import (
    MAX_KEY,
    MAX_METADATA,
    MAX_VALUE,
    PENDING,
    client_token,
    safe_text,
)
from .gate import Verdict
from .results import Outcome

__all__ = [
    "EVAL_PREFIX",
    "baseline",
    "entries",
    "evaluation_view",
    "is_recorded",
    "metadata_change",
    "metrics_document",
    "update_request",
]

EVAL_PREFIX = "eval."
# Lineage entries (``after_training.registry.lineage``) that make room, first to go first.
_DROPPABLE = ("hp.", "metric.", "input.")
OMITTED = "omitted"


def baseline(properties: Mapping[str, str] | None) -> dict[str, float]:
    """The metrics an Approved version's ``eval.<metric>`` entries hold."""
    out: dict[str, float] = {}
    for key, raw in (properties or {}).items():
        name = key[len(EVAL_PREFIX) :] if key.startswith(EVAL_PREFIX) else ""
        if not name or name in ("job", "status", "verdict", "failed"):
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            out[name] = value
    return out


def evaluation_view(properties: Mapping[str, str] | None) -> dict[str, Any] | None:
    """``models``' ``evaluation`` of a version: the evaluation job, its status, the gate's
    verdict, the failed checks and the metrics, from its ``eval.*`` entries (None: never
    evaluated)."""
    props = properties or {}
    if not props.get("eval.job"):
        return None
    return {
        "job_name": props["eval.job"],
        "status": props.get("eval.status"),
        "verdict": props.get("eval.verdict"),
        "failed_checks": (props.get("eval.failed") or "").split(),
        "metrics": baseline(props),
    }


def entries(found: Outcome, judged: Verdict, gated: tuple[str, ...] = ()) -> dict[str, str]:
    """The evaluation's metadata entries, in order of importance (safe keys and values)."""
    out = {
        "eval.job": found.evaluation_job,
        "eval.status": found.status,
        "eval.verdict": judged.status,
    }
    if judged.failed:
        out["eval.failed"] = " ".join(judged.failed)
    names = [n for n in dict.fromkeys(gated) if n in found.metrics]
    names += sorted(n for n in found.metrics if n not in names)
    for name in names:
        out[f"{EVAL_PREFIX}{name}"] = repr(float(found.metrics[name]))
    return {safe_text(k, MAX_KEY): safe_text(v, MAX_VALUE) for k, v in out.items()}


def is_recorded(properties: Mapping[str, str] | None, evaluation_job: str) -> bool:
    """Whether the version already carries this evaluation's entries (a repeat)."""
    props = properties or {}
    return props.get("eval.job") == safe_text(evaluation_job, MAX_VALUE) and bool(
        props.get("eval.verdict")
    )


def _drop_order(key: str) -> tuple[int, str]:
    for rank, prefix in enumerate(_DROPPABLE):
        if key.startswith(prefix):
            return rank, "".join(chr(0x10FFFF - ord(c)) for c in key)  # last name first
    return len(_DROPPABLE), key


def metadata_change(
    current: Mapping[str, str] | None, wanted: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """(entries to set, keys to remove) so the version holds ``wanted`` within the 50
    entries: earlier ``eval.*`` entries not wanted now are removed, then lineage entries
    (:data:`_DROPPABLE`, the hyperparameters first) while too many are left, counted in
    ``omitted``; ``wanted`` entries that still do not fit are left out from the end."""
    have = dict(current or {})
    remove = [k for k in have if k.startswith(EVAL_PREFIX) and k not in wanted]
    kept = {k: v for k, v in have.items() if k not in remove}
    droppable = sorted(
        (k for k in kept if k.startswith(_DROPPABLE) and k not in wanted), key=_drop_order
    )
    fixed = [k for k in kept if k not in wanted and k not in droppable and k != OMITTED]
    take = dict(list(wanted.items())[: max(MAX_METADATA - len(fixed) - 1, 0)])  # 1: omitted
    dropped: list[str] = []

    def size() -> int:
        return len({**kept, **take}) + (1 if dropped and OMITTED not in kept else 0)

    while size() > MAX_METADATA and droppable:
        key = droppable.pop(0)
        kept.pop(key)
        dropped.append(key)
    to_set = {k: v for k, v in take.items() if have.get(k) != v}
    if dropped:
        before = str(have.get(OMITTED, "0"))
        to_set[OMITTED] = str((int(before) if before.isdigit() else 0) + len(dropped))
    return to_set, remove + dropped


def update_request(
    described: Mapping[str, Any], judged: Verdict, wanted: Mapping[str, str], dedup: str
) -> dict[str, Any]:
    """``UpdateModelPackage`` for the version as ``described`` (DescribeModelPackage):
    entries, and, while it is still ``PendingManualApproval``, the reason and the verdict's
    status when that is a change."""
    to_set, remove = metadata_change(described.get("CustomerMetadataProperties"), wanted)
    request: dict[str, Any] = {
        "ModelPackageArn": described["ModelPackageArn"],
        "ClientToken": client_token(dedup),
    }
    if to_set:
        request["CustomerMetadataProperties"] = to_set
    if remove:
        request["CustomerMetadataPropertiesToRemove"] = remove
    if described.get("ModelApprovalStatus", PENDING) == PENDING:
        request["ApprovalDescription"] = judged.reason
        if judged.status != PENDING:
            request["ModelApprovalStatus"] = judged.status
    return request


def metrics_document(found: Outcome, judged: Verdict) -> dict[str, Any]:
    """The JSON at ``after_training.registry.model_metrics_uri``."""
    return {
        "version": 1,
        "evaluation_job": found.evaluation_job,
        "status": found.status,
        "verdict": judged.status,
        "reason": judged.reason,
        "failed_checks": list(judged.failed),
        "metrics": {k: {"value": v} for k, v in sorted(found.metrics.items())},
    }
