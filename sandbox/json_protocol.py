"""What the sandbox's stand-ins of AWS JSON-protocol APIs share (the Price List API, Service
Quotas, SageMaker's capacity and tuner): which service and region a request is signed for, its
body (and the same body again for the next app when a stand-in lets a request pass), and an
answer in the protocol's shape (timestamps as epoch seconds; errors as ``__type`` and
``Message`` with HTTP 400 and ``x-amzn-ErrorType``, which botocore turns into the
``ClientError`` AWS would raise)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

__all__ = ["SCOPE", "Replay", "answer", "jsonable", "read_json", "signed_for"]

# The credential scope of a SigV4 Authorization header: .../<date>/<region>/<service>/aws4_request
SCOPE = re.compile(r"Credential=[^/]+/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request")


def signed_for(environ: dict[str, Any]) -> tuple[str, str] | None:
    """The ``(service, region)`` a request is signed for; None when it is not SigV4-signed."""
    scope = SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return None if scope is None else (scope.group("service"), scope.group("region"))


def read_json(environ: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The request's body, raw (to hand on when another app answers) and parsed."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) or b"{}"
    return raw, json.loads(raw)


def answer(start_response: Any, out: dict[str, Any], *, error: bool = False) -> list[bytes]:
    """A JSON 1.1 answer: ``out``, or (``error``) an error body ``{"__type", "Message"}``."""
    data = json.dumps(out).encode()
    headers = [("Content-Type", "application/x-amz-json-1.1")]
    if error:
        headers.append(("x-amzn-ErrorType", str(out["__type"])))
    start_response(
        "400 Bad Request" if error else "200 OK", [*headers, ("Content-Length", str(len(data)))]
    )
    return [data]


def jsonable(value: Any) -> Any:
    """``value`` with every ``datetime`` as the JSON protocol's timestamp (epoch seconds)."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


class Replay:
    """A request body already read (``read_json``), for the next app to read again."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self, size: int = -1) -> bytes:
        out = self._data if size is None or size < 0 else self._data[:size]
        self._data = self._data[len(out) :]
        return out
