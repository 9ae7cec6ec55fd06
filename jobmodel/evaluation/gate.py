"""The gate (issue 36): an evaluation's metrics, the policy and the baseline -> a verdict.

Pure. The baseline is the metrics of the group's latest ``Approved`` version (None when the
group has none). The verdict's status is what the registered version becomes:

* the evaluation failed, or left a gated metric without a finite value: the version stays
  ``PendingManualApproval`` and the reason says why (a person decides);
* a gated metric is below its ``min``, above its ``max``, or more than ``max_regression``
  worse than the baseline's: ``Rejected``, every failed check in the reason;
* otherwise ``Approved`` where the policy says ``approve_on_pass``, else
  ``PendingManualApproval``.

A regression check with no baseline value (no Approved version yet, or one without that
metric) passes and says so. An admin's review may still set either status afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..templates.evaluation_policy import EvaluationPolicy, GatedMetric

__all__ = ["APPROVED", "MAX_REASON", "PENDING", "REJECTED", "Verdict", "verdict"]

APPROVED = "Approved"
PENDING = "PendingManualApproval"
REJECTED = "Rejected"
MAX_REASON = 1024  # the model package's ApprovalDescription


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """``status`` (a ModelApprovalStatus) and ``reason`` (fits ApprovalDescription);
    ``failed`` names the gated metrics that failed."""

    status: str
    reason: str
    failed: tuple[str, ...] = ()


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _check(gated: GatedMetric, value: float, baseline: Mapping[str, object] | None) -> str:
    """Why ``value`` fails ``gated`` ("" when it passes)."""
    name = gated.metric
    if gated.min is not None and value < gated.min:
        return f"{name} {value:g} is below the minimum {gated.min:g}"
    if gated.max is not None and value > gated.max:
        return f"{name} {value:g} is above the maximum {gated.max:g}"
    if gated.max_regression is None:
        return ""
    base = _finite((baseline or {}).get(name))
    if base is None:
        return ""
    worse = (base - value) if gated.higher_is_better else (value - base)
    if worse > gated.max_regression:
        return (
            f"{name} {value:g} is {worse:g} worse than the Approved version's {base:g} "
            f"(at most {gated.max_regression:g})"
        )
    return ""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def verdict(
    metrics: Mapping[str, object] | None,
    policy: EvaluationPolicy,
    baseline: Mapping[str, object] | None = None,
    *,
    failure: str | None = None,
) -> Verdict:
    """The gate's verdict for an evaluation's ``metrics`` (None, or ``failure`` given: the
    evaluation failed)."""
    if failure is not None or metrics is None:
        why = failure or "no metrics"
        return Verdict(status=PENDING, reason=_cut(f"evaluation failed: {why}; left for review"))
    missing = list(
        dict.fromkeys(g.metric for g in policy.gate if _finite(metrics.get(g.metric)) is None)
    )
    if missing:
        return Verdict(
            status=PENDING,
            reason=_cut(f"evaluation gave no value for {', '.join(missing)}; left for review"),
        )
    problems: list[tuple[str, str]] = []
    for gated in policy.gate:
        value = _finite(metrics[gated.metric])
        assert value is not None  # checked above
        why = _check(gated, value, baseline)
        if why:
            problems.append((gated.metric, why))
    if problems:
        return Verdict(
            status=REJECTED,
            reason=_cut("gate failed: " + "; ".join(why for _, why in problems)),
            failed=tuple(name for name, _ in problems),
        )
    if not policy.gate:
        return Verdict(status=PENDING, reason="evaluated; no gate: left for review")
    no_base = list(
        dict.fromkeys(
            g.metric
            for g in policy.gate
            if g.max_regression is not None and _finite((baseline or {}).get(g.metric)) is None
        )
    )
    note = f" (no Approved baseline for {', '.join(no_base)})" if no_base else ""
    if policy.approve_on_pass:
        return Verdict(status=APPROVED, reason=_cut(f"gate passed{note}; approved by policy"))
    return Verdict(status=PENDING, reason=_cut(f"gate passed{note}; left for review"))
