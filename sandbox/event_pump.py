"""EventBridge for the Batch stand-in: its events, delivered to the deployed rules' Lambdas.

Nothing in moto emits AWS Batch or SageMaker state-change events, and moto's EventBridge
cannot deliver to a Lambda target. The stand-in records both kinds in
``BatchStandIn.outbox`` (``sandbox/batch.py``, ``sandbox/batch_sagemaker.py``); the pump
delivers them the way EventBridge's default bus would:

- each event, in the order it was recorded, is matched against every enabled rule on the
  ``default`` bus as deployed into moto (``ListRules``: the event pattern after
  CloudFormation resolved it, so ``detail.jobQueue`` holds the deployed queue's ARN and
  ``detail.RoleArn`` the deployed training roles), with moto's own pattern matcher;
- for each rule that matches, each Lambda target is invoked with the event as its payload
  (Lambda ``Invoke``; the sandbox runs the deployed function's code), so only the platform
  whose rule matches sees the event.

Differences from EventBridge, on purpose: delivery is synchronous and in order, one event at
a time, and a handler error is recorded (``Delivery.error``) instead of retried and sent to
the dead-letter queue. :meth:`EventPump.deliver` delivers an event again (EventBridge
delivers at least once), so tests can replay and reorder.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import boto3

from sandbox.deploy import REGION


@dataclass(frozen=True)
class Delivery:
    """One event delivered to one target: what the function answered."""

    event: dict[str, Any]
    rule: str
    target: str
    response: Any
    error: bool


class EventPump:
    """Delivers ``standin.outbox`` to the deployed rules' Lambda targets.

    ``drain()`` delivers everything recorded since the last drain (the first: since the pump
    was made); ``start()`` drains in the background (the demo), ``stop()`` ends that.
    ``deliveries`` lists every delivery made.
    """

    def __init__(self, standin: Any, endpoint: str) -> None:
        self.standin = standin
        kwargs = {
            "endpoint_url": endpoint,
            "region_name": REGION,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self._events = boto3.client("events", **kwargs)
        self._lambda = boto3.client("lambda", **kwargs)
        self.deliveries: list[Delivery] = []
        # Events recorded before this pump existed belong to other deploys sharing the
        # stand-in (each deploy has its own pump): start after them.
        self._cursor = len(standin.outbox)
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def drain(self) -> list[Delivery]:
        """Deliver every event recorded since the last drain; returns those deliveries."""
        with self._lock:
            pending = self.standin.outbox[self._cursor :]
            self._cursor += len(pending)
            rules = self._rules() if pending else []
            made: list[Delivery] = []
            for event in pending:
                made += self._deliver(event, rules)
            return made

    def deliver(self, event: dict[str, Any]) -> list[Delivery]:
        """Deliver one event now (again, or out of order), as EventBridge may."""
        with self._lock:
            return self._deliver(event, self._rules())

    def start(self, interval_s: float = 0.5) -> None:
        stop = threading.Event()
        self._stop = stop

        def run() -> None:
            while not stop.wait(interval_s):
                self.drain()

        threading.Thread(target=run, daemon=True, name="event-pump").start()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    # ------------------------------------------------------------------ rules
    def _rules(self) -> list[tuple[str, Any, list[str]]]:
        """Enabled rules of the default bus: (name, pattern, Lambda target ARNs)."""
        from moto.events.models import EventPattern, EventPatternParser

        found = []
        for page in self._events.get_paginator("list_rules").paginate(EventBusName="default"):
            for rule in page["Rules"]:
                raw = rule.get("EventPattern")
                if rule.get("State") == "DISABLED" or not raw:
                    continue
                targets = self._events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
                arns = [t["Arn"] for t in targets if t["Arn"].split(":")[2] == "lambda"]
                found.append(
                    (rule["Name"], EventPattern(raw, EventPatternParser(raw).parse()), arns)
                )
        return found

    def _deliver(
        self, event: dict[str, Any], rules: list[tuple[str, Any, list[str]]]
    ) -> list[Delivery]:
        made = []
        for name, pattern, targets in rules:
            if not pattern.matches_event(event):
                continue
            for arn in targets:
                reply = self._lambda.invoke(FunctionName=arn, Payload=json.dumps(event).encode())
                body = reply["Payload"].read()
                made.append(
                    Delivery(
                        event=event,
                        rule=name,
                        target=arn,
                        response=json.loads(body) if body else None,
                        error="FunctionError" in reply,
                    )
                )
        self.deliveries += made
        return made
