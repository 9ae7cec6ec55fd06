"""What the sandbox's stand-ins of AWS JSON-protocol APIs share (the Price List API, Service
Quotas, SageMaker's capacity): which service and region a request is signed for, its body, and
an answer in the protocol's shape (errors as ``__type`` and ``Message`` with HTTP 400 and
``x-amzn-ErrorType``, which botocore turns into the ``ClientError`` AWS would raise)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["SCOPE", "answer", "read_json", "signed_for"]

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
