"""The launcher's two doors as the client uses them: Lambda Invoke, and the HTTP API signed
with SigV4 (service ``execute-api``). Both return the response object or raise
:class:`~ftl_client.errors.LauncherError`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from ftl_client.errors import LauncherError, aws_code, aws_error, no_credentials


def invoke(lambda_client: Any, name: str, region: str | None, event: dict[str, Any]) -> Any:
    """Invoke the function ``name`` with ``event``; its response object."""
    try:
        reply = lambda_client.invoke(FunctionName=name, Payload=json.dumps(event).encode("utf-8"))
        raw = reply["Payload"].read()
    except ClientError as exc:
        if aws_code(exc) == "ResourceNotFoundException":
            raise LauncherError(
                "ConfigError", f"launcher function {name} not found in {region}"
            ) from None
        raise aws_error(exc, "lambda:Invoke") from None
    except NoCredentialsError:
        raise no_credentials() from None
    except BotoCoreError as exc:
        raise aws_error(exc, "lambda:Invoke") from None
    try:
        body = json.loads(raw or b"null")
    except ValueError:
        body = None
    if reply.get("FunctionError"):
        detail = body if isinstance(body, dict) else {}
        raise LauncherError(
            "FunctionError",
            f"the launcher function {name} failed: "
            f"{detail.get('errorType', 'Unhandled')}: {detail.get('errorMessage', raw[:200])}",
        )
    error = LauncherError.from_body(body)
    if error is not None:
        raise error
    if not isinstance(body, dict):
        raise LauncherError("UpstreamError", f"the launcher answered with {raw[:200]!r}")
    return body


def http(
    credentials: Any, url: str, region: str, method: str, path: str, body: dict[str, Any] | None
) -> Any:
    """Send ``method path`` (with ``body``) to the API at ``url``, signed for ``region``."""
    url = url.rstrip("/") + path
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {"content-type": "application/json"} if data is not None else {}
    if credentials is None:
        raise no_credentials()
    request = AWSRequest(method=method, url=url, data=data, headers=headers)
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    prepared = request.prepare()
    http_request = urllib.request.Request(
        url, data=data, headers=dict(prepared.headers.items()), method=method
    )
    try:
        with urllib.request.urlopen(http_request, timeout=120) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LauncherError("ConnectionError", f"could not reach {url}: {reason}") from None
    try:
        parsed = json.loads(raw or b"null")
    except ValueError:
        parsed = None
    if 200 <= status < 300 and isinstance(parsed, dict):
        return parsed
    error = LauncherError.from_body(parsed, status)
    if error is not None:
        raise error
    message = parsed.get("message") if isinstance(parsed, dict) else None
    message = message or raw[:200].decode("utf-8", "replace") or "no body"
    kind = {403: "Forbidden", 401: "Forbidden", 404: "NotFound"}.get(status, "UpstreamError")
    where = path.split("?")[0]
    raise LauncherError(kind, f"HTTP {status} from {method} {where}: {message}", None, status)
