"""Errors raised by the job model.

``JobModelError`` and its subclasses are *caller* errors: the launcher turns
them into the contract's error object (``to_dict()``) and an HTTP status.
``TemplateError`` is a *platform* error found at synth time (or when the
deployed catalog is loaded): a template that breaks a rule never deploys.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Forbidden",
    "JobModelError",
    "NotFound",
    "QuotaExceeded",
    "TemplateError",
    "ValidationError",
]


class JobModelError(Exception):
    """Base of the errors a caller can cause; maps to the contract's error object."""

    type: str = "JobModelError"

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

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field)


class NotFound(JobModelError):
    """An unknown template or job."""

    type = "NotFound"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field)


class Forbidden(JobModelError):
    """The caller may not use the launcher this way (no team, several teams, wrong door)."""

    type = "Forbidden"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field)


class QuotaExceeded(JobModelError):
    """A team limit would be exceeded; the error names the limit, its value and current use."""

    type = "QuotaExceeded"

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


class TemplateError(Exception):
    """A template breaks a platform rule (raised at synth time or catalog load)."""

    def __init__(self, template: str, rule: str, message: str) -> None:
        self.template = template
        self.rule = rule
        self.message = message
        super().__init__(f"template {template!r} breaks rule {rule!r}: {message}")
