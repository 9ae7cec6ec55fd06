"""The tables ``ftl list`` and ``ftl queue`` print: a row per job (a sweep's with its progress
line under it, issue 37) and the queue's order. ``ftl_client.display`` re-exports both."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ftl_client.client import parse_time
from ftl_client.models_view import listed_status, listed_template
from ftl_client.sweeps_view import is_sweep, sweep_line
from ftl_client.text import duration, money, sooner, starts_by, table, waited, when

__all__ = ["jobs_table", "queue_table"]


def jobs_table(jobs: Sequence[dict[str, Any]]) -> str:
    """One row per job; a sweep's row is followed by its progress line, indented."""
    rows = [
        [
            j["job_name"],
            listed_template(j),
            listed_status(j),
            f"{j.get('instance_count', '?')} x {j.get('instance_type', '?')}",
            "yes" if j.get("spot") else "no",
            when(j.get("created_at")),
            duration(j.get("billable_seconds")),
            _savings(j),
            money(_cost(j)),
        ]
        for j in jobs
    ]
    headers = [
        "JOB",
        "TEMPLATE",
        "STATUS",
        "INSTANCES",
        "SPOT",
        "CREATED",
        "BILLABLE",
        "SAVINGS",
        "COST",
    ]
    # Every cell is one line, so the table's lines are its header and then one per job.
    header, *lines = table(headers, rows).splitlines()
    out = [header]
    for job, line in zip(jobs, lines, strict=True):
        out.append(line)
        if is_sweep(job) and isinstance(job.get("sweep"), dict):
            out.append(f"  {sweep_line(job['sweep'])}")
    return "\n".join(out)


def _cost(job: dict[str, Any]) -> Any:
    """A job's cost; a sweep's is its trials' spend until the launcher gives a cost."""
    if "cost_usd" in job:
        return job["cost_usd"]
    if is_sweep(job):
        return (job.get("sweep") or {}).get("spend_usd")
    return None


def _waited_of(job: dict[str, Any], now: datetime) -> float | None:
    """How long a queued job has waited: the launcher's ``queued_seconds`` (no clock skew),
    else the time since ``queued_at``."""
    value = job.get("queued_seconds")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    since = parse_time(job.get("queued_at"))
    return None if since is None else (now - since).total_seconds()


def queue_table(jobs: Sequence[dict[str, Any]], now: datetime | None = None) -> str:
    """The job queue, in the order given: position, job, team, its Batch share, instances,
    wait and reason."""
    now = now or datetime.now(UTC)
    rows = [
        [
            str(j["queue_position"]) if j.get("queue_position") is not None else "-",
            j["job_name"],
            j.get("team") or "-",
            j.get("share") or "-",
            f"{j.get('instance_count', '?')} x {j.get('instance_type', '?')}",
            waited(_waited_of(j, now)),
            j.get("queue_reason") or "-",
            starts_by(j.get("estimated_start_by"), now),
            sooner(j.get("sooner"), now),
        ]
        for j in jobs
    ]
    headers = [
        "POS",
        "JOB",
        "TEAM",
        "SHARE",
        "INSTANCES",
        "WAITED",
        "REASON",
        "STARTS",
        "SOONER WITH",
    ]
    return table(headers, rows)


def _savings(job: dict[str, Any]) -> str:
    value = job.get("spot_savings_percent")
    return "-" if value is None else f"{float(value):.1f}%"
