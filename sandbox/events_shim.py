"""moto's EventBridge shim: a scheduled rule matches no event.

In EventBridge a rule has a schedule or an event pattern; events put on the bus reach only
the rules whose pattern matches. moto 5.2 treats a scheduled rule's missing pattern as
matching every event, then fails the whole ``PutEvents`` (500) because the schedule's target
(a Lambda function) is not one it delivers to. The platform's schedules (the sweep, the price
refresh) are such rules, so without this every notification's ``PutEvents`` would fail in the
sandbox.
"""

from __future__ import annotations

from typing import Any


def scheduled_rules_match_no_event() -> None:
    from moto.events.models import Rule

    send = Rule.send_to_targets

    def send_to_targets(self: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(self, "scheduled_expression", None):
            return None
        return send(self, *args, **kwargs)

    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]
