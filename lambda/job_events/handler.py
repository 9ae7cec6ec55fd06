"""Job-events Lambda entry point: EventBridge -> the job ledger, fleet metrics and SNS.

EventBridge delivers SageMaker's ``SageMaker Training Job State Change`` and AWS Batch's
``Batch Service Job State Change`` events for this platform's jobs; each updates its job's
ledger item (docs/API.md, "Job events"). The work is in the ``ftl_events`` package; the
ledger code is the trigger's (``ftl_trigger``), the rules the job model's (``jobmodel``),
both shipped in this function's asset. Clients are created once per container, at import.
"""

from __future__ import annotations

from typing import Any

from ftl_events.runtime import EventsRuntime

RUNTIME = EventsRuntime.from_environment()


def handler(event: Any, context: Any) -> dict[str, Any]:
    return RUNTIME.handle(event)
