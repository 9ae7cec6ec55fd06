"""Job-events Lambda entry point: EventBridge -> the job ledger, fleet metrics and SNS.

EventBridge delivers SageMaker's ``SageMaker Training Job State Change`` and AWS Batch's
``Batch Service Job State Change`` events for this platform's jobs (docs/API.md, "Job
events"). Each is parsed (``ftl_events.parse``), recorded in its job's ledger item
(``ftl_events.apply``), and a write that was applied prints its fleet metrics (the one writer
of the job record, ``ftl_ledger.writer``, does). The write that ends a job marks its end
effects owed (``jobmodel.jobs.effects``); every event of the job, new or repeated, then does what
the record still owes (``ftl_events.publish``: the announcement), so an announcement that
failed is made by EventBridge's retry of the event. The ledger code is ``ftl_ledger`` (the
trigger ships it too), the rules the job model's (``jobmodel``), both in this function's
asset. Clients are created once per container, at import (``ftl_events.events_runtime``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ftl_events.apply import Outcome
from ftl_events.events_runtime import Runtime
from ftl_events.ownership import foreign_reason
from ftl_events.parse import Malformed, Observation, parse
from ftl_events.publish import complete_effects
from ftl_ledger.job_codec import from_record
from jobmodel.contract.names import SWEEP_KIND
from jobmodel.jobs import effects as E
from jobmodel.jobs.batch_end_hold import held_end
from jobmodel.jobs.effects import public_view

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
    if observation.sweep:
        return _sweep(observation)
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
    if outcome.applied and (from_record(outcome.after).chain_pending or _newly_held(outcome)):
        _ask(outcome.job_name, "advance")
    # The write that applied printed its fleet-metrics line (ftl_ledger.writer). The end
    # effects the job still owes, whichever write owed them: a failure raises, so EventBridge
    # retries the event and the retry does what is still owed.
    after = from_record(complete_effects(RUNTIME, outcome.after))
    if E.EVALUATE in E.owed(after):
        _ask(outcome.job_name, "evaluate")
    return {"updated": outcome.applied, "job_name": outcome.job_name, **public_view(after)}


def _sweep(observation: Observation) -> dict[str, Any]:
    """A sweep's tuning job or one of its trials changed (issue 37): the trigger refreshes
    the sweep (its trials' costs are read with DescribeTrainingJob, which only it may call).
    An event whose job is not a sweep of this ledger, or that another team's job sent, is
    dropped."""
    name = observation.job_name
    job = RUNTIME.recorder.ledger.get_job(name)
    sweep = None if job is None else from_record(job)
    if sweep is None or sweep.kind != SWEEP_KIND:
        LOG.warning("tuning event names %s, which is no sweep of this platform; ignored", name)
        return {"updated": False, "job_name": name}
    foreign = foreign_reason(sweep, observation.owner)
    if foreign is not None:
        LOG.warning("tuning event about sweep %s ignored: %s", name, foreign)
        return {"updated": False, "job_name": name}
    _ask(name, "refresh")
    return {"updated": False, "job_name": name, "refresh": True}


def _newly_held(outcome: Outcome) -> bool:
    """This write held Batch's end of a chained attempt that nothing yet says why
    (``jobmodel.jobs.batch_end_hold``): the launcher is asked to look."""
    return held_end(from_record(outcome.after)) and not held_end(from_record(outcome.before))


def _ask(job_name: str, action: str) -> None:
    """Ask the trigger's ``chain`` alias, asynchronously, to do for the job what only it can:
    ``advance`` (a capacity chain's attempt ended for want of capacity, or Batch ended it and
    nothing recorded says why: start the next attempt, or look at the ended one first) or
    ``evaluate`` (a Completed job owes its evaluation job, issue 36) or ``refresh`` (a
    sweep's tuning job or trial changed, issue 37). A failure is logged:
    describe, list and the scheduled sweep do both too, SageMaker's own event of the end
    judges a held end, and a stop stops the job between the attempts (docs/API.md,
    Capacity)."""
    if not RUNTIME.chain_function or RUNTIME.lambda_client is None:
        return
    try:
        RUNTIME.lambda_client.invoke(
            FunctionName=RUNTIME.chain_function,
            InvocationType="Event",
            Payload=json.dumps({"action": action, "job_name": job_name}).encode(),
        )
    except Exception as err:  # noqa: BLE001 - the ledger holds what is owed
        LOG.warning("job %s: could not ask the trigger to %s: %s", job_name, action, err)
