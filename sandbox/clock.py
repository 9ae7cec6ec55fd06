"""Simulated time for the Batch stand-in (``sandbox/batch.py``): tests and the queue benchmark
move it forward instead of sleeping (a head-of-queue time limit, a job's run time).

:class:`SimClock` is a callable returning seconds since the epoch. ``frozen`` (the default)
stands still until :meth:`SimClock.advance`; ``frozen=False`` follows wall time plus what was
advanced, so a stand-in already running on wall time never sees time go backwards.
:func:`use_clock` puts a clock on a stand-in and its SageMaker (both stamp events) for the
length of a ``with`` block. :func:`functions_on_clock` gives the same clock to the deployed
functions the sandbox runs in-process (their ``RUNTIME.now``), so what the trigger stamps
(a job's ``created_at``, an attempt's claimed start) and what a stand-in reports (a training
job's start and end) are read from one clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any


class SimClock:
    """Seconds since the epoch that move when told (and with wall time unless frozen)."""

    def __init__(self, start: float | None = None, *, frozen: bool = True) -> None:
        self._wall0 = time.time()
        self._start = self._wall0 if start is None else float(start)
        self._offset = 0.0
        self.frozen = frozen
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            moved = 0.0 if self.frozen else time.time() - self._wall0
            return self._start + self._offset + moved

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward (never back); returns the new time."""
        if seconds < 0:
            raise ValueError(f"a clock only moves forward, got {seconds}")
        with self._lock:
            self._offset += seconds
        return self()

    def advance_to(self, moment: float) -> float:
        """Move the clock forward to ``moment`` (no change if it is already past it)."""
        return self.advance(max(0.0, moment - self()))


@contextmanager
def use_clock(standin: Any, clock: Callable[[], float]) -> Iterator[Callable[[], float]]:
    """Run ``standin`` (a ``BatchStandIn``) on ``clock`` inside the block, then restore it."""
    before = standin.clock, standin.sagemaker.clock
    standin.clock = standin.sagemaker.clock = clock
    try:
        yield clock
    finally:
        standin.clock, standin.sagemaker.clock = before


# The clock the in-process deployed functions read while ``functions_on_clock`` is on, and the
# wall clock each function's runtime had before (put back when it is off).
_FUNCTION_CLOCK: list[Callable[[], datetime]] = []
_WALL: dict[int, Callable[[], datetime]] = {}


@contextmanager
def functions_on_clock(clock: Callable[[], float]) -> Iterator[None]:
    """Inside the block, every deployed function invoked in-process reads ``clock`` (seconds
    since the epoch) as its runtime's ``now``; the trigger takes all its times from it."""
    _FUNCTION_CLOCK[:] = [lambda: datetime.fromtimestamp(clock(), UTC)]
    try:
        yield
    finally:
        _FUNCTION_CLOCK.clear()


def apply_function_clock(handler: Any) -> None:
    """Before an in-process invoke (``sandbox/server.py``): put the handler module's
    ``RUNTIME.now`` on the clock of :func:`functions_on_clock`, or back on its own."""
    runtime = getattr(handler, "__globals__", {}).get("RUNTIME")
    if runtime is None or not hasattr(runtime, "now"):
        return
    key = id(runtime)
    if _FUNCTION_CLOCK:
        _WALL.setdefault(key, runtime.now)
        runtime.now = _FUNCTION_CLOCK[0]
    elif key in _WALL:
        runtime.now = _WALL.pop(key)
