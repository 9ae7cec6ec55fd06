"""The contract's error types (docs/API.md, "Errors"), each with its HTTP status.

``JobModelError`` and its subclasses are what the launcher answers with: the error object
(``to_dict()``) and, on the HTTP door, ``status``. ``caller_fixable`` says whether the caller
can fix it by changing the request (the ``ftl`` client reads both from ``ERROR_TYPES``).
``TemplateError`` is a *platform* error found at synth time (or when the deployed catalog is
loaded): a template that breaks a rule never deploys. ``SettingsError`` is the other platform
error: a setting (cdk.json context, or a function's environment) that breaks its rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

__all__ = [
    "ERROR_TYPES",
    "HTTP_STATUS",
    "THROTTLE_CODES",
    "CapacityError",
    "Conflict",
    "Forbidden",
    "JobModelError",
    "NotFound",
    "QuotaExceeded",
    "SettingsError",
    "TemplateError",
    "Throttled",
    "UpstreamError",
    "ValidationError",
    "aws_error",
]


class JobModelError(Exception):
    """Base of the errors a caller can cause; maps to the contract's error object."""

    type: str = "JobModelError"
    status: int = 500
    caller_fixable: bool = False

    def __init__(self, message: str, field: str | None = None) -> None:
        message = _printable(message)
        super().__init__(message)
        self.message = message
        # Fields and messages may echo what the caller sent; keep them encodable as UTF-8
        # (a lone surrogate would make the Lambda runtime fail to return the response).
        self.field = None if field is None else _printable(field)

    def to_dict(self) -> dict[str, Any]:
        """The contract's error object: ``{"error": {"type", "message", "field"?}}``."""
        body: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return {"error": body}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(field={self.field!r}, message={self.message!r})"


def _printable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class ValidationError(JobModelError):
    """A request breaks a rule; ``field`` names the offending field (``a`` or ``a.b``)."""

    type = "ValidationError"
    status = 400
    caller_fixable = True

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field)


class NotFound(JobModelError):
    """An unknown template, job (or another team's job), or HTTP route."""

    type = "NotFound"
    status = 404
    caller_fixable = True

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field)


class Forbidden(JobModelError):
    """The caller may not use the launcher this way (no team, several teams, wrong door)."""

    type = "Forbidden"
    status = 403
    caller_fixable = True

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field)


class QuotaExceeded(JobModelError):
    """A team limit would be exceeded; the error names the limit, its value and current use."""

    type = "QuotaExceeded"
    status = 429
    caller_fixable = True

    def __init__(
        self, message: str, *, limit: str, value: float, current: float, requested: float
    ) -> None:
        super().__init__(message, None)
        self.limit = limit
        self.value = value
        self.current = current
        self.requested = requested

    def to_dict(self) -> dict[str, Any]:
        body = super().to_dict()
        body["error"].update(
            limit=self.limit,
            limit_value=self.value,
            current_use=self.current,
            requested=self.requested,
        )
        return body


class Conflict(JobModelError):
    """A ``client_token`` reused with another request, a job name in use, a stop too early."""

    type = "Conflict"
    status = 409
    caller_fixable = True


class Throttled(JobModelError):
    """AWS kept throttling after retries."""

    type = "Throttled"
    status = 429


class CapacityError(JobModelError):
    """SageMaker reports a quota or capacity limit (``ResourceLimitExceeded``)."""

    type = "CapacityError"
    status = 503


class UpstreamError(JobModelError):
    """Any other AWS failure, or the launcher's own internal error."""

    type = "UpstreamError"
    status = 502


# The contract's error types by name, in the order docs/API.md lists them.
ERROR_TYPES: Mapping[str, type[JobModelError]] = MappingProxyType(
    {
        cls.type: cls
        for cls in (
            ValidationError,
            Forbidden,
            NotFound,
            Conflict,
            Throttled,
            QuotaExceeded,
            CapacityError,
            UpstreamError,
        )
    }
)
# Each error type's HTTP status (the same for both doors).
HTTP_STATUS: Mapping[str, int] = MappingProxyType({t: c.status for t, c in ERROR_TYPES.items()})


# AWS error codes (and transaction cancellation reasons) that mean "throttled".
THROTTLE_CODES: frozenset[str] = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottlingError",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    }
)


def aws_error(
    call: str, code: str, message: str, *, cancellation_codes: Iterable[str | None] = ()
) -> JobModelError:
    """The contract's error for an AWS failure of ``call`` (the message names the call).

    ``code`` is AWS's error code; ``cancellation_codes`` are a cancelled DynamoDB
    transaction's per-item reasons, which say when a transaction was throttled.
    """
    if code in THROTTLE_CODES or THROTTLE_CODES.intersection(c for c in cancellation_codes if c):
        return Throttled(f"{call} was throttled by AWS after retries: {message}")
    if code == "ResourceLimitExceeded":
        return CapacityError(f"{call} hit a SageMaker quota or capacity limit: {message}")
    if code == "ResourceInUse":
        return Conflict(f"{call}: resource in use: {message}")
    return UpstreamError(f"{call} failed: {code}: {message}")


class TemplateError(Exception):
    """A template breaks a platform rule (raised at synth time or catalog load)."""

    def __init__(self, template: str, rule: str, message: str) -> None:
        self.template = template
        self.rule = rule
        self.message = message
        super().__init__(f"template {template!r} breaks rule {rule!r}: {message}")


class SettingsError(ValueError):
    """A platform setting breaks its rule: ``key`` names it (``ftl:teams[1].limits``,
    ``trainingPlans[0].end``), ``rule`` says what it must be, ``got`` is the value found
    (``None``: nothing to show). Each kind of setting has its subclass (``TeamsError``,
    ``CapacityError``, ``TrackingError``; the app's ``ContextError``); ``where`` is what the
    message says before the key."""

    where = ""

    def __init__(self, key: str, rule: str, got: Any = None) -> None:
        shown = "" if got is None else f", got {got!r}"
        super().__init__(f"{self.where}'{key}': {rule}{shown}")
        self.key = key
        self.rule = rule
        self.got = got
