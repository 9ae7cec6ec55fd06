"""Job-events Lambda entry point: EventBridge -> the job ledger, fleet metrics and SNS.

EventBridge delivers SageMaker's ``SageMaker Training Job State Change`` and AWS Batch's
``Batch Service Job State Change`` events for this platform's jobs (docs/API.md, "Job
events"). Each is parsed (``ftl_events.parse``), recorded in its job's ledger item
(``ftl_events.apply``), and a write that was applied prints its fleet metrics (the one writer
of the job record, ``ftl_ledger.writer``, does) and announces the job's end
(``ftl_events.publish``). The ledger code is ``ftl_ledger`` (the trigger ships it too), the
rules the job model's (``jobmodel``), both in this function's asset. Clients are created once
per container, at import (``ftl_events.dependencies``).
"""

from __future__ import annotations

import logging
from typing import Any

from ftl_events.dependencies import Runtime
from ftl_events.parse import Malformed, parse
from ftl_events.publish import announcement, public_view

# No level of its own: Lambda sets the root logger from the function's application log
# level and writes every record as JSON with the request id (PlatformFunction).
LOG = logging.getLogger("ftl.job_events")

RUNTIME = Runtime.from_environment()


def handler(event: Any, context: Any) -> dict[str, Any]:
    try:
        observation = parse(event)
    except Malformed as err:
        event_id = event.get("id") if isinstance(event, dict) else None
        LOG.warning("dropped a malformed event %s: %s", event_id, err)
        return {"updated": False, "dropped": str(err)}
    # Failures (DynamoDB, a job that kept changing) raise: EventBridge retries the event.
    outcome = RUNTIME.recorder.record(observation)
    if outcome.applied:
        LOG.info(
            "job %s: %s -> %s (%s event %s)",
            outcome.job_name,
            outcome.old_status,
            outcome.new_status,
            observation.source,
            observation.event_id,
        )
    # The write that applied printed its fleet-metrics line (ftl_ledger.writer).
    message = announcement(outcome)
    if message is not None:
        RUNTIME.sns.publish(TopicArn=RUNTIME.topic_arn, **message)
    return {"updated": outcome.applied, "job_name": outcome.job_name, **public_view(outcome.after)}
