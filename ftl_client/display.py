"""Text for humans: job tables, job details, the live progress display and a job's outcome.

The formatting primitives are in ``ftl_client.text`` and the templates table in
``ftl_client.templates_view``; both are imported here too, as before."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from ftl_client.client import Progress
from ftl_client.models_view import evaluation_line
from ftl_client.sweeps_view import (
    is_sweep,
    sweep_detail,
    sweep_dry_run,
    sweep_line,
    sweep_started,
)
from ftl_client.tables import jobs_table, queue_table
from ftl_client.templates_view import channels, hyperparameter, templates_table
from ftl_client.text import (
    duration,
    money,
    num,
    number,
    sooner,
    starts_by,
    table,
    waited,
)
from jobmodel.contract.statuses import TERMINAL_STATUSES

__all__ = [
    "ProgressDisplay",
    "channels",
    "duration",
    "dry_run",
    "hyperparameter",
    "job_detail",
    "jobs_table",
    "log_line",
    "money",
    "no_log_lines",
    "number",
    "outcome",
    "progress_line",
    "queue_table",
    "stop_result",
    "stopped_watching",
    "submitted",
    "sweep_dry_run",
    "sweep_line",
    "sweep_started",
    "table",
    "templates_table",
    "waited",
    "whoami",
]


def submitted(job: dict[str, Any], watch_hint: str | None = None) -> str:
    """What ``submit`` started: template, hardware, estimate, status and where to look."""
    kind = "spot" if job.get("spot") else "on-demand"
    if job.get("replayed"):
        first = (
            f"already submitted {job['job_name']} (its client_token was used before: this is "
            "that job, nothing new was started)"
        )
    else:
        first = f"submitted {job['job_name']}"
    lines = [
        first,
        f"  template: {job.get('template')}, {job.get('instance_count')} x "
        f"{job.get('instance_type')} ({kind})",
        f"  estimated max cost: {money(job.get('estimated_max_cost_usd'))}",
        f"  status: {job.get('status')}",
        f"  output: {job.get('output_s3_uri')}",
        f"  console: {job.get('console_url')}",
    ]
    if watch_hint:
        lines.append(f"  {watch_hint}")
    return "\n".join(lines)


def stop_result(job: dict[str, Any], before: str | None = None) -> str:
    """What ``stop`` did, from the job's status before the call (``before``) and after it:
    asked SageMaker to stop, stopped a queued job at once, or nothing (it had already ended)."""
    name, status = job["job_name"], job.get("status")
    if status == "Stopping" and is_sweep(job):
        return f"{name}: stopping the sweep (its running trials stop; no new trial starts)"
    if status == "Stopping":
        return f"{name}: stopping (SageMaker saves the last checkpoint first)"
    if before is not None and before not in TERMINAL_STATUSES and status in TERMINAL_STATUSES:
        if status != "Stopped":
            return f"{name} ended {status} before the stop arrived; nothing to stop"
        if before == "Queued":
            return f"{name}: stopped while queued (it never started; its place is given back)"
        return f"{name}: stopped"
    return f"{name} is already {status}; nothing to stop"


def no_log_lines(job: dict[str, Any]) -> str:
    """Why ``logs`` printed nothing: the job has not started, has ended without lines, or its
    lines have not arrived yet."""
    name, status = job.get("job_name"), job.get("status")
    if status in TERMINAL_STATUSES:
        return (
            f"no log lines for {name}: it ended {status} and CloudWatch Logs has none for it "
            "(streams JOB/... in /aws/sagemaker/TrainingJobs)"
        )
    if status in ("Queued", "Submitting"):
        return f"no log lines for {name} yet: it is {status} and has not started"
    return f"no log lines for {name} yet (status {status}); try again, or --follow"


def stopped_watching(name: str, prefix: str) -> str:
    """After Ctrl-C: the job keeps running, and how to watch it again or stop it."""
    return (
        f"stopped watching {name}; the job keeps running.\n"
        f"  watch again: {prefix} wait {name}\n"
        f"  stop the job: {prefix} stop {name}"
    )


def log_line(event: dict[str, Any]) -> str:
    """``[algo-1-1700000000] message``: a log event with the host part of its stream name."""
    return f"[{event['stream'].split('/', 1)[-1]}] {event['message']}"


DETAIL_ORDER = (
    "job_name",
    "template",
    "status",
    "secondary_status",
    "failure_reason",
    "instance_type",
    "instance_count",
    "spot",
    "capacity",
    "created_at",
    "requested_by",
    "training_seconds",
    "billable_seconds",
    "spot_savings_percent",
    "team",
    "estimated_max_cost_usd",
    "cost_usd",
    "kind",
    "sweep",
    "worst_case_usd",
    "cap_usd",
    "checkpoint_s3_uri",
    "output_s3_uri",
    "job_arn",
    "console_url",
)


def job_detail(job: dict[str, Any]) -> str:
    """``key: value`` lines for one job, the contract's fields in a useful order."""
    keys = [k for k in DETAIL_ORDER if k in job] + [k for k in job if k not in DETAIL_ORDER]
    width = max((len(k) for k in keys), default=0)
    lines = []
    for key in keys:
        value = job[key]
        if value is None or key == "attempts":
            continue
        if key in ("training_seconds", "billable_seconds"):
            value = f"{value} ({duration(value)})"
        elif key == "spot_savings_percent":
            value = f"{float(value):.1f}%"
        elif key in ("estimated_max_cost_usd", "cost_usd", "worst_case_usd", "cap_usd"):
            value = money(value)
        elif key == "sweep" and isinstance(value, dict):  # issue 37: the rest below
            value = sweep_line(value)
        elif key == "estimated_start_by":
            value = f"{value} ({starts_by(value)})"
        elif key == "sooner":
            value = sooner(value)
        elif key == "tracking":  # the MLflow run (issue 27)
            value = "run {run_name} in {experiment_name} on {mlflow_resource_arn}".format(**value)
        elif key == "evaluation" and isinstance(value, dict):  # issue 36
            value = evaluation_line(value)
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        elif isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        lines.append(f"{key.ljust(width)}  {value}")
    if job.get("attempts"):
        lines.append(attempts_table(job["attempts"]))
    if isinstance(job.get("sweep"), dict):
        lines.append(sweep_detail(job["sweep"]))
    return "\n".join(lines)


def attempts_table(attempts: Sequence[dict[str, Any]]) -> str:
    """A capacity chain's attempts: type, count, kind, start, end, billable time, cost."""
    rows = [("#", "TYPE", "COUNT", "CAPACITY", "STATUS", "START", "END", "BILLABLE", "COST")]
    for a in attempts:
        billable = a.get("billable_seconds")
        rows.append(
            (
                str(a.get("attempt")),
                str(a.get("instance_type")),
                str(a.get("instance_count")),
                str(a.get("capacity")),
                str(a.get("status")),
                a.get("started_at") or "-",
                a.get("ended_at") or "-",
                "-" if billable is None else f"{billable}s",
                money(a.get("cost_usd")),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["attempts:"]
    lines += [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    return "\n".join(lines)


def dry_run(result: dict[str, Any]) -> str:
    """What a dry run checked and what the job would cost at most."""
    lines = [
        f"dry run: {result.get('job_name')} would start (nothing was started or recorded)",
        f"  {result.get('instance_count')} x {result.get('instance_type')}, "
        f"estimated max cost {money(result.get('estimated_max_cost_usd'))}",
    ]
    if result.get("estimate_unknown_reason"):
        lines.append(f"  estimate unknown: {result['estimate_unknown_reason']}")
    for check in result.get("checks", []):
        mark = "ok" if check.get("ok") else "NO"
        extra = ""
        if "limit" in check:
            used, asked = num(check["current"]), num(check["requested"])
            extra = f": {used} used + {asked} of {num(check['limit'])}"
        lines.append(f"  [{mark}] {check.get('check')}{extra}")
    return "\n".join(lines)


def whoami(me: dict[str, Any]) -> str:
    lines = [f"principal: {me.get('principal')}", f"team: {me.get('team') or '-'}"]
    lines.append(f"admin: {'yes' if me.get('admin') else 'no'}")
    for key, value in sorted((me.get("limits") or {}).items()):
        lines.append(f"limit {key}: {num(value)}")
    usage = me.get("usage")
    if usage:
        lines.append(f"instances in use: {usage.get('instances')}")
        lines.append(
            f"{usage.get('month')}: spent {money(usage.get('month_spend_usd'))}, reserved by "
            f"running jobs {money(usage.get('month_reserved_usd'))}"
        )
    return "\n".join(lines)


def progress_line(progress: Progress, now: datetime | None = None) -> str:
    """``[0:12:03] InProgress / Training  spot interruptions: 0  job-name``; a sweep's shows
    its progress line instead of spot interruptions."""
    state = progress.status
    if progress.secondary_status and progress.secondary_status != progress.status:
        state += f" / {progress.secondary_status}"
    sweep = progress.job.get("sweep")
    if is_sweep(progress.job) and isinstance(sweep, dict):
        return f"[{duration(progress.elapsed(now))}] {state}  {sweep_line(sweep)}  {progress.name}"
    return (
        f"[{duration(progress.elapsed(now))}] {state}  "
        f"spot interruptions: {progress.interruptions}  {progress.name}"
    )


class ProgressDisplay:
    """Shows a watched job: one line redrawn in place on a terminal (the clock ticks every
    second), one line per change of status otherwise."""

    def __init__(
        self,
        stream: TextIO,
        tty: bool | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleeper: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.sleeper = sleeper
        self.progress: Progress | None = None
        self._drawn = False

    def update(self, progress: Progress) -> None:
        self.progress = progress
        if self.tty:
            self._redraw()
        elif progress.changed:
            self.stream.write(progress_line(progress, self.clock()) + "\n")
            self.stream.flush()

    def sleep(self, seconds: float) -> None:
        """Wait between polls; on a terminal redraw the elapsed clock once a second."""
        if not self.tty:
            self.sleeper(seconds)
            return
        remaining = seconds
        while remaining > 0:
            step = min(1.0, remaining)
            self.sleeper(step)
            remaining -= step
            self._redraw()

    def finish(self) -> None:
        """End the in-place line so what follows starts on its own line."""
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False

    def _redraw(self) -> None:
        if self.progress is None:
            return
        self.stream.write("\r\x1b[2K" + progress_line(self.progress, self.clock()))
        self.stream.flush()
        self._drawn = True


def outcome(progress: Progress, metrics: dict[str, float] | None = None) -> str:
    """How the job ended: status, failure reason, final metrics, billable time, spot savings."""
    job = progress.job
    lines = [f"{progress.status}: {progress.name}"]
    if job.get("failure_reason"):
        lines.append(f"  failure reason: {job['failure_reason']}")
    if is_sweep(job) and isinstance(job.get("sweep"), dict):
        lines.append(f"  {sweep_line(job['sweep'])}")
        lines += sweep_detail(job["sweep"]).splitlines()[1:]  # indented as these lines
        return "\n".join(lines)
    if metrics:
        shown = "  ".join(f"{k}={number(v)}" for k, v in sorted(metrics.items()))
        lines.append(f"  final metrics: {shown}")
    if job.get("billable_seconds") is not None:
        text = f"  billable time: {duration(job['billable_seconds'])}"
        if job.get("training_seconds") is not None:
            text += f" of {duration(job['training_seconds'])} training"
        lines.append(text)
    if job.get("spot_savings_percent") is not None:
        lines.append(f"  spot savings: {float(job['spot_savings_percent']):.1f}%")
    if job.get("spot"):
        lines.append(f"  spot interruptions: {progress.interruptions}")
    if progress.succeeded and job.get("output_s3_uri"):
        lines.append(f"  output: {job['output_s3_uri']}")
    return "\n".join(lines)
