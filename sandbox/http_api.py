"""A local stand-in for the deployed job HTTP API (moto does not deploy API Gateway v2).

It does what the deployed API does for the trigger: checks the caller's SigV4 signature
(IAM authorisation, service ``execute-api``), routes only the contract's routes, hands
the trigger a payload-format-2.0 event with the caller's IAM identity, and returns the
function's status, headers and body. The trigger runs as deployed, through moto's
``lambda.invoke``.

    with Sandbox() as sb, LocalHttpApi(sb.endpoint, function_name) as api:
        ... requests signed for ``api.url`` ...
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from jobmodel.contract.routes import match
from sandbox.deploy import ACCOUNT, REGION

SERVICE = "execute-api"
MAX_SKEW_S = 15 * 60
_AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/,\s]+)/"
    r"(?P<service>[^/,\s]+)/aws4_request,\s*SignedHeaders=(?P<signed>[a-z0-9;\-]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)


class LocalHttpApi:
    """The job HTTP API on ``127.0.0.1:<free port>``, in front of the deployed trigger."""

    def __init__(
        self,
        endpoint: str,
        function_name: str,
        *,
        credentials: dict[str, str] | None = None,
        identities: dict[str, str] | None = None,
        region: str = REGION,
        qualifier: str = "http",
    ) -> None:
        self.endpoint = endpoint
        self.function_name = function_name
        self.region = region
        # access key -> secret key of the callers IAM knows (the sandbox's fake ones).
        self.credentials = credentials or {"testing": "testing"}
        # access key -> the caller's IAM ARN (default: a user named after the key).
        self.identities = identities or {}
        # The API's integration invokes the trigger's ``http`` alias, as the deployed one does.
        self.qualifier = qualifier
        self._lambda = boto3.client(
            "lambda",
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        api = self

        class Handler(_Handler):
            owner = api

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> LocalHttpApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------ API Gateway
    def handle(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """One request: route, authorise, invoke; returns status, headers and body."""
        split = urlsplit(target)
        route = _route(method, split.path)
        if route is None:
            return _message(404, "Not Found")
        access_key = self.verify(method, target, headers, body)
        if access_key is None:
            return _message(403, "Forbidden")
        route_key, path_parameters = route
        event = self.event(method, split, headers, body, route_key, path_parameters, access_key)
        reply = self._lambda.invoke(
            FunctionName=self.function_name,
            Qualifier=self.qualifier,
            Payload=json.dumps(event).encode("utf-8"),
        )
        raw = reply["Payload"].read()
        if reply.get("FunctionError"):
            return _message(500, "Internal Server Error")
        result = json.loads(raw or b"null")
        if not isinstance(result, dict) or "statusCode" not in result:
            # Payload format 2.0: anything else is a 200 JSON body.
            return 200, {"content-type": "application/json"}, json.dumps(result).encode()
        out_body = result.get("body") or ""
        data = base64.b64decode(out_body) if result.get("isBase64Encoded") else out_body.encode()
        return int(result["statusCode"]), dict(result.get("headers") or {}), data

    def verify(self, method: str, target: str, headers: dict[str, str], body: bytes) -> str | None:
        """The caller's access key when the SigV4 signature is valid, else None."""
        match = _AUTH_RE.match(headers.get("authorization", ""))
        amz_date = headers.get("x-amz-date", "")
        if match is None or match["service"] != SERVICE or match["region"] != self.region:
            return None
        secret = self.credentials.get(match["key"])
        signed = match["signed"].split(";")
        if secret is None or "host" not in signed or "x-amz-date" not in signed:
            return None
        try:
            stamp = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            return None
        if amz_date[:8] != match["date"] or abs(time.time() - stamp.timestamp()) > MAX_SKEW_S:
            return None
        if any(name not in headers for name in signed):
            return None
        request = AWSRequest(
            method=method,
            url=f"http://{headers['host']}{target}",
            headers={name: headers[name] for name in signed},
            data=body or None,
        )
        request.context["timestamp"] = amz_date
        auth = SigV4Auth(Credentials(match["key"], secret), SERVICE, self.region)
        canonical = auth.canonical_request(request)
        if auth.signed_headers(auth.headers_to_sign(request)) != match["signed"]:
            return None
        expected = auth.signature(auth.string_to_sign(request, canonical), request)
        return match["key"] if hmac.compare_digest(expected, match["signature"]) else None

    def event(
        self,
        method: str,
        split: Any,
        headers: dict[str, str],
        body: bytes,
        route_key: str,
        path_parameters: dict[str, str],
        access_key: str,
    ) -> dict[str, Any]:
        """The payload-format-2.0 event API Gateway sends after IAM authorisation."""
        query: dict[str, str] = {}
        for key, value in parse_qsl(split.query, keep_blank_values=True):
            query[key] = f"{query[key]},{value}" if key in query else value
        now = datetime.now(UTC)
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route_key,
            "rawPath": split.path,
            "rawQueryString": split.query,
            "headers": dict(headers),
            "requestContext": {
                "accountId": ACCOUNT,
                "apiId": "local",
                "authorizer": {
                    "iam": {
                        "accessKey": access_key,
                        "accountId": ACCOUNT,
                        "callerId": f"AIDA{access_key.upper()}",
                        "principalOrgId": None,
                        "userArn": self.identities.get(
                            access_key, f"arn:aws:iam::{ACCOUNT}:user/sandbox-{access_key}"
                        ),
                        "userId": f"AIDA{access_key.upper()}",
                    }
                },
                "domainName": headers.get("host", "127.0.0.1"),
                "domainPrefix": "local",
                "http": {
                    "method": method,
                    "path": split.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": str(uuid.uuid4()),
                "routeKey": route_key,
                "stage": "$default",
                "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now.timestamp() * 1000),
            },
            "isBase64Encoded": False,
        }
        if query:
            event["queryStringParameters"] = query
        if path_parameters:
            event["pathParameters"] = path_parameters
        if body:
            try:
                event["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"] = base64.b64encode(body).decode("ascii")
                event["isBase64Encoded"] = True
        return event


class _Handler(BaseHTTPRequestHandler):
    owner: LocalHttpApi
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        try:
            status, out_headers, data = self.owner.handle(self.command, self.path, headers, body)
        except Exception:  # what API Gateway says when the integration fails
            status, out_headers, data = _message(500, "Internal Server Error")
        self.send_response(status)
        for name, value in out_headers.items():
            if name.lower() not in ("content-length", "connection"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    def log_message(self, format: str, *args: Any) -> None:
        return


def _route(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    """The route key and path parameters of the contract's route for this request, if any."""
    if not path.startswith("/"):
        return None
    found = match(method, path[1:].split("/"))
    return None if found is None else (found[0].key, found[1])


def _message(status: int, message: str) -> tuple[int, dict[str, str], bytes]:
    return status, {"content-type": "application/json"}, json.dumps({"message": message}).encode()
