"""The contract's error types that come from AWS rather than from the request.

They live with the others, each with its HTTP status, in ``jobmodel.contract.errors``; this name
stays for the modules that import them from here.
"""

from __future__ import annotations

from jobmodel.contract.errors import CapacityError, Conflict, Throttled, UpstreamError

__all__ = ["CapacityError", "Conflict", "Throttled", "UpstreamError"]
