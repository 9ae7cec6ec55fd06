"""The client's errors: the contract's error object as :class:`LauncherError`, and the
failures before the launcher answered. Statuses and which types a caller can fix come from
the contract's one table (``jobmodel.contract.errors``).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError, NoCredentialsError

from jobmodel.contract.errors import ERROR_TYPES, HTTP_STATUS

# Errors the caller can fix by changing the request or the client's configuration.
CLIENT_ERRORS = frozenset(
    {name for name, error in ERROR_TYPES.items() if error.caller_fixable} | {"ConfigError"}
)


class LauncherError(Exception):
    """A failure reported by the launcher (the contract's error object) or by the client.

    ``type`` is the contract's error type (``ValidationError``, ``NotFound``, ...) or, for
    failures before the launcher answered, ``ConfigError`` (the launcher cannot be found or
    called as configured), ``AwsError`` (an AWS call failed), ``ConnectionError``,
    ``Forbidden`` (the HTTP API refused the signature) or ``FunctionError`` (the function
    crashed instead of answering).
    """

    def __init__(
        self,
        type: str,
        message: str,
        field: str | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.type = type
        self.message = message
        self.field = field
        self.http_status = http_status if http_status is not None else HTTP_STATUS.get(type)

    @property
    def is_client_error(self) -> bool:
        """True when the caller can fix it (bad request, unknown name, configuration)."""
        return self.type in CLIENT_ERRORS

    def to_dict(self) -> dict[str, Any]:
        """The contract's error object's inside: ``type``, ``message`` and, when known,
        ``field`` and ``http_status``."""
        body: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.field:
            body["field"] = self.field
        if self.http_status is not None:
            body["http_status"] = self.http_status
        return body

    def line(self) -> str:
        """One line: ``error: <type>: <message> (field: <field>)``."""
        text = f"error: {self.type}: {self.message}"
        if self.field:
            text += f" (field: {self.field})"
        return text

    def __str__(self) -> str:
        return self.line()[len("error: ") :]

    def __repr__(self) -> str:
        return (
            f"LauncherError(type={self.type!r}, message={self.message!r}, "
            f"field={self.field!r}, http_status={self.http_status!r})"
        )

    @classmethod
    def from_body(cls, body: Any, http_status: int | None = None) -> LauncherError | None:
        """The error in a contract response body, or None when the body is not an error."""
        if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
            return None
        err = body["error"]
        return cls(
            str(err.get("type") or "UpstreamError"),
            str(err.get("message") or "the launcher gave no message"),
            err.get("field"),
            http_status,
        )


def aws_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def aws_message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", ""))


def no_credentials() -> LauncherError:
    return LauncherError(
        "ConfigError", "no AWS credentials found; configure a profile or set AWS_PROFILE"
    )


def aws_error(exc: Exception, call: str) -> LauncherError:
    if isinstance(exc, NoCredentialsError):
        return no_credentials()
    if isinstance(exc, ClientError):
        return LauncherError("AwsError", f"{call} failed: {aws_code(exc)}: {aws_message(exc)}")
    return LauncherError("AwsError", f"{call} failed: {exc}")
