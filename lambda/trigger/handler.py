"""Trigger Lambda entry point: both doors (direct Invoke and the HTTP API) in one handler.

The handler parses the door, calls the launcher, and turns every failure into the contract's
error object. Clients and the catalog are loaded once per container, at import.
"""

from __future__ import annotations

import logging
from typing import Any

from ftl_trigger import adapters, snapstart
from ftl_trigger.actions import Launcher
from ftl_trigger.trigger_runtime import Runtime
from jobmodel import JobModelError

# No level of its own: Lambda sets the root logger from the function's application log
# level and writes every record as JSON with the request id (PlatformFunction).
LOG = logging.getLogger("ftl.trigger")

RUNTIME = Runtime.from_environment()
LAUNCHER = Launcher(RUNTIME)
snapstart.register_restore_hooks()


def handler(event: Any, context: Any) -> dict[str, Any]:
    request_id = getattr(context, "aws_request_id", "local")
    http = adapters.http_door(context)
    try:
        call = adapters.parse(event, context, RUNTIME.teams)
    except JobModelError as err:
        LOG.info("refused at the door: %s %s", err.type, err.message)
        return adapters.error_response(event, err, http=http)
    try:
        result, created = LAUNCHER.dispatch(call)
    except JobModelError as err:
        LOG.info("rejected %s: %s %s", call.action, err.type, err.message)
        return adapters.error_response(event, err, http=http)
    except Exception:  # the contract promises an error object, never a stack trace
        LOG.exception("unexpected failure in %s (request %s)", call.action, request_id)
        return adapters.error_response(event, adapters.internal_error(request_id), http=http)
    return adapters.success_response(call, result, created=created)
