"""The two doors: a direct Invoke event, or an HTTP API (payload format 2.0) event.

Which door a call came through is decided by the invoked alias (see ``identity``), never by
the event's shape. Both become one :class:`Call`; results and errors go back in the door's
own shape.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from ftl_trigger.identity import (
    DIRECT_INVOKE,
    HTTP_ALIAS,
    Caller,
    direct_caller,
    http_caller,
    qualifier_of,
)
from jobmodel import JobModelError, NotFound, UpstreamError, ValidationError
from jobmodel.contract.names import CHAIN_ALIAS, SWEEP_ALIAS
from jobmodel.contract.routes import ACTIONS, match
from jobmodel.teams import TeamsConfig

MAX_BODY_BYTES = 64 * 1024
__all__ = ["DIRECT_INVOKE", "Call", "is_http", "parse"]


@dataclass(frozen=True)
class Call:
    action: str
    params: dict[str, Any]
    caller: Caller
    http: bool = False

    @property
    def requested_by(self) -> str:
        return self.caller.principal


def is_http(event: Any) -> bool:
    return (
        isinstance(event, dict)
        and event.get("version") == "2.0"
        and isinstance(event.get("requestContext"), dict)
        and isinstance(event["requestContext"].get("http"), dict)
    )


def http_door(context: Any) -> bool:
    """True when the function was invoked through the HTTP API's alias."""
    return qualifier_of(str(getattr(context, "invoked_function_arn", "") or "")) == HTTP_ALIAS


def parse(event: Any, context: Any, teams: TeamsConfig | None = None) -> Call:
    """The call and its caller; the door is the invoked alias, not the event's shape."""
    teams = teams or TeamsConfig()
    invoked = str(getattr(context, "invoked_function_arn", "") or "")
    if http_door(context):
        if not is_http(event):
            raise ValidationError(
                "request", "the http alias accepts only HTTP API events (use Invoke directly)"
            )
        return _parse_http(event, teams)
    if is_http(event):
        raise ValidationError("request", "HTTP events are accepted only from the HTTP API")
    if qualifier_of(invoked) == CHAIN_ALIAS:
        return _parse_chain(event, teams)
    if qualifier_of(invoked) == SWEEP_ALIAS:
        return _parse_sweep(event, teams)
    return _parse_direct(event, direct_caller(invoked, teams))


# What the job-events function may ask of the trigger through the ``chain`` alias.
CHAIN_ACTIONS = ("advance", "evaluate", "refresh")


def _parse_chain(event: Any, teams: TeamsConfig) -> Call:
    """The ``chain`` alias: the job-events function asks to start a chained job's next
    attempt (``{"action": "advance", "job_name": ...}``) or a Completed job's evaluation
    (``"evaluate"``, issue 36); IAM lets only it invoke the alias."""
    if not isinstance(event, dict) or event.get("action") not in CHAIN_ACTIONS:
        raise ValidationError(
            "action", "the chain alias takes only the advance, evaluate and refresh actions"
        )
    params = {k: v for k, v in event.items() if k != "action"}
    caller = Caller(principal="capacity chain", admin=teams.enabled, teams_mode=teams.enabled)
    return Call(action=str(event["action"]), params=params, caller=caller)


def _parse_sweep(event: Any, teams: TeamsConfig) -> Call:
    """The ``sweep`` alias: the scheduled sweep (``{"action": "sweep"}``, the schedule's fixed
    input); IAM lets only its EventBridge rule invoke the alias."""
    if not isinstance(event, dict) or event != {"action": "sweep"}:
        raise ValidationError("action", "the sweep alias takes only the sweep action")
    caller = Caller(principal="sweep", admin=teams.enabled, teams_mode=teams.enabled)
    # The schedule's word is ``sweep``; the action it runs is the recovery's (``recover``), not
    # the public ``sweep`` (a hyperparameter sweep, issue 37).
    return Call(action="recover", params={}, caller=caller)


def _parse_direct(event: Any, caller: Caller) -> Call:
    if not isinstance(event, dict):
        raise ValidationError("request", "the request must be a JSON object")
    params = dict(event)
    action = params.pop("action", "submit")
    if action not in ACTIONS:
        raise ValidationError(
            "action", f"action must be one of {', '.join(ACTIONS)}, got {_show(action)}"
        )
    return Call(action=action, params=params, caller=caller)


def _parse_http(event: dict[str, Any], teams: TeamsConfig) -> Call:
    ctx = event["requestContext"]
    method = str(ctx["http"].get("method", "")).upper()
    path = str(event.get("rawPath") or ctx["http"].get("path") or "")
    parts = [p for p in path.split("/") if p]
    stage = ctx.get("stage")
    if stage and stage != "$default" and parts and parts[0] == stage:
        parts = parts[1:]
    action, params = _route(event, method, parts, path)
    return Call(action, params, http_caller(_user_arn(ctx), teams), http=True)


def _route(
    event: dict[str, Any], method: str, parts: list[str], path: str
) -> tuple[str, dict[str, Any]]:
    found = match(method, parts)
    if found is None:
        raise NotFound(f"no route for {_show(method)} {_show(path)}", field="path")
    route, params = found
    if route.params == "body":
        body = _json_body(event)
        if "action" in body:
            raise ValidationError(
                "action", "action is not allowed in an HTTP body; the route chooses it"
            )
        for key, value in params.items():  # a path's parameter (review's job_name) rules
            if key in body and body[key] != value:
                raise ValidationError(key, f"{key} in the body differs from the path's")
        return route.action, {**body, **params}
    if route.params == "query":
        query = dict(event.get("queryStringParameters") or {})
        if "limit" in query:
            query["limit"] = _int_param("limit", query["limit"])
        return route.action, query
    return route.action, dict(params)


def _user_arn(ctx: dict[str, Any]) -> str | None:
    iam = (ctx.get("authorizer") or {}).get("iam") or {}
    if not isinstance(iam, dict):
        return None
    arn = iam.get("userArn") or iam.get("callerId")
    return str(arn) if arn else None


def _json_body(event: dict[str, Any]) -> dict[str, Any]:
    raw = event.get("body")
    if raw is None or raw == "":
        raise ValidationError("body", "the request body must be a JSON object, got nothing")
    if not isinstance(raw, str):
        raise ValidationError("body", "the request body must be a JSON object")
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(raw, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise ValidationError("body", "the request body is not valid base64 UTF-8") from None
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise ValidationError("body", f"the request body must be at most {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValidationError("body", "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ValidationError("body", "the request body must be a JSON object")
    return body


def _int_param(name: str, value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 6):
        raise ValidationError(name, f"{name} must be a whole number, got {_show(value)}")
    return int(value)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def internal_error(request_id: str) -> UpstreamError:
    return UpstreamError(
        f"internal error in the launcher (request {request_id}); its logs have the details"
    )


def success_response(call: Call, result: Any, *, created: bool = False) -> Any:
    """The result as the door expects it; HTTP says 201 for a new job, 200 otherwise. A submit
    that started nothing and is no dry run is an idempotent replay: ``"replayed": true``
    says so on both doors (the direct door has no status code)."""
    if (
        call.action == "submit"
        and not created
        and isinstance(result, dict)
        and not result.get("dry_run")
    ):
        result = {**result, "replayed": True}
    if not call.http:
        return result
    return _http(201 if created else 200, result)


def error_response(event: Any, err: JobModelError, *, http: bool = True) -> dict[str, Any]:
    """The error object; HTTP-shaped only for an HTTP event that came through the HTTP door."""
    body = err.to_dict()
    if http and is_http(event):
        return _http(err.status, body)
    return body


def _http(status: int, body: Any) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json"},
        "body": json.dumps(body, separators=(",", ":"), ensure_ascii=False),
    }
