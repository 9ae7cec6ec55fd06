"""Queue mode (``ftl:scheduler=queue``) in the sandbox: deploy, configure the stand-in, pump.

:func:`deploy_queue` deploys the platform with ``ftl:scheduler=queue`` into a
:class:`sandbox.batch_api.BatchSandbox` and creates the stand-in's queues from the
synthesized templates (``configure_from_template``: capacity, head-of-queue time limit,
share policy and fair-share weights), which moto's CloudFormation does not model. It then
checks the sandbox rule of ``sandbox/batch_cfn.py``: the stack's ``JobQueueArn`` output is the
ARN of the stand-in's queue. The deployed trigger reaches the stand-in with its ordinary
boto3 ``batch`` client, because the sandbox runs it with ``AWS_ENDPOINT_URL`` set to the
sandbox's endpoint, where the stand-in serves Batch's service-job operations.

:class:`sandbox.event_pump.EventPump` then delivers the stand-in's events to the deployed
job-events function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandbox.batch_api import BatchSandbox, configure_from_template
from sandbox.deploy import deploy
from sandbox.event_pump import EventPump


@dataclass
class QueueDeployment:
    """A queue-mode deploy: its stack outputs (by stack), the stand-in's queues it created
    (name -> ARN) and an event pump for it."""

    outputs: dict[str, dict[str, str]]
    queues: dict[str, str]
    pump: EventPump
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)

    def output(self, name: str) -> str:
        (value,) = [o[name] for o in self.outputs.values() if name in o]
        return value


def deploy_queue(
    sandbox: BatchSandbox, *, context: dict[str, str] | None = None
) -> QueueDeployment:
    """Deploy with ``ftl:scheduler=queue`` (plus ``context``) and configure the stand-in."""
    templates: dict[str, dict[str, Any]] = {}
    outputs = deploy(
        sandbox.endpoint,
        context={"ftl:scheduler": "queue", **(context or {})},
        synthesized=templates,
    )
    queues: dict[str, str] = {}
    for template in templates.values():
        queues.update(configure_from_template(sandbox.batch, template))
    deployed = [o["JobQueueArn"] for o in outputs.values() if "JobQueueArn" in o]
    if not deployed or any(arn not in queues.values() for arn in deployed):
        raise RuntimeError(
            f"the deployed JobQueueArn {deployed} is not a stand-in queue ({queues}); "
            "see sandbox/batch_cfn.py"
        )
    return QueueDeployment(outputs, queues, EventPump(sandbox.batch, sandbox.endpoint), templates)
