"""The contract's error types that come from AWS rather than from the request."""

from __future__ import annotations

from jobmodel import JobModelError


class Conflict(JobModelError):
    type = "Conflict"


class Throttled(JobModelError):
    type = "Throttled"


class CapacityError(JobModelError):
    type = "CapacityError"


class UpstreamError(JobModelError):
    type = "UpstreamError"
