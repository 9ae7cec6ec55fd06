"""The client's formatting primitives: durations, numbers, money, times and plain tables."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ftl_client.client import parse_time

Cell = str | Sequence[str]


def duration(seconds: float | None) -> str:
    """``H:MM:SS`` (days folded into hours); ``-`` when unknown."""
    if seconds is None:
        return "-"
    total = int(round(max(0.0, float(seconds))))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def number(value: float) -> str:
    return f"{value:.6g}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """A plain text table; a cell given as a list of lines spans several lines of its row."""
    cells = [[[c] if isinstance(c, str) else list(c) or [""] for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, lines in enumerate(row):
            widths[i] = max(widths[i], *(len(line) for line in lines))
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in cells:
        for n in range(max(len(lines) for lines in row)):
            parts = [
                (lines[n] if n < len(lines) else "").ljust(w)
                for lines, w in zip(row, widths, strict=True)
            ]
            out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def num(value: Any) -> str:
    if isinstance(value, float):
        return number(value)
    return "" if value is None else str(value)


def waited(seconds: float | None) -> str:
    """A wait, short: ``45s``, ``12m``, ``3h05m``, ``2d04h``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    total = int(max(0.0, float(seconds)))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m"
    if total < 86400:
        return f"{total // 3600}h{total % 3600 // 60:02d}m"
    return f"{total // 86400}d{total % 86400 // 3600:02d}h"


def money(value: Any) -> str:
    """USD as ``$12.34``; ``-`` when unknown."""
    return "-" if value is None else f"${float(value):,.2f}"


def when(text: Any) -> str:
    """``2026-11-22T01:53:00.000Z`` as ``2026-11-22 01:53`` (UTC)."""
    value = parse_time(text)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if value else str(text or "-")


def hours(seconds: Any) -> str:
    """A template limit: ``24h`` when whole hours, else ``H:MM:SS``."""
    if isinstance(seconds, int) and seconds and seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    return duration(seconds)


def starts_by(text: Any, now: datetime | None = None) -> str:
    """A queued job's ``estimated_start_by`` as ``starts by ~14:05 UTC (upper bound)`` (the
    date too when not today), ``starts now``, or ``start unknown`` when null."""
    value = parse_time(text)
    if value is None:
        return "start unknown"
    now = now or datetime.now(UTC)
    value = value.astimezone(UTC)
    if value <= now:
        return "starts now"
    shown = value.strftime("%H:%M" if value.date() == now.date() else "%Y-%m-%d %H:%M")
    return f"starts by ~{shown} UTC (upper bound)"


def sooner(options: Any, now: datetime | None = None) -> str:
    """A queued job's ``sooner`` options in one line, ``-`` when there are none."""
    parts = []
    for option in options or []:
        kind, request = option.get("option"), option.get("request") or {}
        if kind == "fewer_instances":
            n = request.get("instance_count")
            when_ = starts_by(option.get("estimated_start_by"), now).replace(" (upper bound)", "")
            parts.append(f"{n} instance{'s' if n != 1 else ''} ({when_})")
        elif kind == "other_instance_type":
            parts.append("another type: " + ", ".join(option.get("instance_types") or []))
        elif kind == "on_demand":
            parts.append("on-demand (spot off)")
        elif kind:
            parts.append(str(kind))
    return "; ".join(parts) or "-"
