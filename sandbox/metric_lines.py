"""The deployed functions' fleet-metric lines, short.

The sandbox runs the Lambda code in its own process, so the EMF lines Lambda would send to
CloudWatch Logs land on the sandbox's standard output: a raw JSON object in the middle of the
demo, and after every ``ftl`` call while ``make sandbox`` serves. :class:`MetricLines` shows
each as one short line (``[fleet metrics, EMF] <job>: <metric> <value>, ...``); everything
else passes through.
"""

from __future__ import annotations

import io
import json
import threading
from typing import TextIO


class MetricLines(io.TextIOBase):
    """Standard output for the sandbox: the deployed functions' EMF lines (what Lambda would
    send to CloudWatch Logs, printed here because the sandbox runs them in this process) are
    shown as one short line each; everything else passes through."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._partial = ""
        self._lock = threading.Lock()  # the sandbox's request threads print too

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                self.out.write(metric_summary(line) + "\n")
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def metric_summary(line: str) -> str:
    """One EMF line as one short line; any other line unchanged."""
    try:
        record = json.loads(line) if line.startswith('{"') else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or "_aws" not in record:
        return line
    (spec,) = record["_aws"]["CloudWatchMetrics"]
    values = ", ".join(f"{m['Name']} {record[m['Name']]:g}" for m in spec["Metrics"])
    return f"    [fleet metrics, EMF] {record.get('JobName')}: {values}"
