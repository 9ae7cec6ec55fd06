"""What the sandbox's CloudFormation (moto) does not model, said once instead of per resource.

The demos (``sandbox/demo.py``, ``sandbox/queue_demo.py``) deploy inside
:func:`unsupported_notices` and print :func:`summary` of what it collected.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["summary", "unsupported_notices"]

_UNSUPPORTED = re.compile(r"Tried to parse (\S+) but it's not supported")
_NO_SUPPORT_LOG = "No Moto CloudFormation support for %s"  # moto's log line for the same


@contextmanager
def unsupported_notices() -> Iterator[set[str]]:
    """Collect moto's "Tried to parse <type> but it's not supported" warnings and its "No Moto
    CloudFormation support for <type>" log lines (one per resource, from any thread) into a
    set of resource types instead of printing each one."""
    skipped: set[str] = set()
    shown = warnings.showwarning

    def log_filter(record: logging.LogRecord) -> bool:
        if record.msg == _NO_SUPPORT_LOG and record.args:
            skipped.add(str(record.args[0]))
            return False
        return True

    moto_log = logging.getLogger("moto")
    moto_log.addFilter(log_filter)

    def collect(message: Warning | str, *args: object, **kwargs: object) -> None:
        match = _UNSUPPORTED.search(str(message))
        if match:
            skipped.add(match.group(1))
        else:
            shown(message, *args, **kwargs)  # type: ignore[arg-type]

    warnings.showwarning = collect
    warnings.filterwarnings("always", message="Tried to parse AWS::")
    try:
        yield skipped
    finally:
        moto_log.removeFilter(log_filter)
        warnings.showwarning = shown
        warnings.filterwarnings("ignore", message="Tried to parse AWS::")


def summary(skipped: set[str]) -> str:
    """One line for the resource types the sandbox's CloudFormation does not model."""
    return (
        f"the sandbox (moto) does not model {len(skipped)} resource types, skipped: "
        + ", ".join(sorted(skipped))
    )
