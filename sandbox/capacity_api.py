"""The capacity stand-in (``sandbox/capacity.py``) on the sandbox's endpoint.

``capacity_layer`` sits in front of moto's app in a ``BatchSandbox``. While the stand-in is
switched on (``CapacityLayer.enable``: the rules, which types have no spot or on-demand
capacity, how many instances there are, which training plans exist), SageMaker's
``CreateTrainingJob`` requests (JSON protocol, ``X-Amz-Target: SageMaker.CreateTrainingJob``,
SigV4 scope ``sagemaker``) go to the stand-in, and ``DescribeTrainingJob`` and
``StopTrainingJob`` of the jobs it created do too, as does a ``ListTrainingJobs`` whose
``NameContains`` matches one of them (the trigger's look for a claimed job). Everything
else, and every request while it is off (the default), goes to moto unchanged. Errors come
back in SageMaker's JSON error shape (``__type`` and ``Message``, HTTP 400), so boto3 raises
the ``ClientError`` AWS would; a request that breaks botocore's model is a
``ValidationException``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError, ParamValidationError

from sandbox.capacity import CapacityStandIn
from sandbox.json_protocol import Replay, answer, jsonable, read_json, signed_for

__all__ = ["CapacityLayer", "capacity_layer"]

_TARGETS = {
    "SageMaker.CreateTrainingJob": "create",
    "SageMaker.DescribeTrainingJob": "describe",
    "SageMaker.StopTrainingJob": "stop",
    "SageMaker.ListTrainingJobs": "list",
}


class CapacityLayer:
    """The sandbox's switch for the stand-in: off until :meth:`enable`."""

    def __init__(self, standin: CapacityStandIn | None = None) -> None:
        self.standin = standin or CapacityStandIn()
        self.enabled = False

    def enable(
        self,
        *,
        no_spot: set[str] | None = None,
        no_on_demand: set[str] | None = None,
        plans: Mapping[str, tuple[str, int]] | None = None,
        instances: Mapping[str, int] | None = None,
    ) -> CapacityStandIn:
        """Switch the stand-in on with these rules (and no jobs)."""
        self.standin.configure(
            no_spot=no_spot, no_on_demand=no_on_demand, plans=plans, instances=instances
        )
        self.enabled = True
        return self.standin

    def disable(self) -> None:
        """Back to moto's SageMaker for every request."""
        self.enabled = False


def _answer(layer: CapacityLayer, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    standin = layer.standin
    if operation == "create":
        return standin.create_training_job(**body)
    if operation == "describe":
        return jsonable(standin.describe_training_job(**body))
    if operation == "list":
        return jsonable(standin.list_training_jobs(**body))
    return standin.stop_training_job(**body)


def capacity_layer(app: Any, layer: CapacityLayer) -> Any:
    """Route SageMaker's training-job calls to the stand-in while it is on (module docstring)."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        operation = _TARGETS.get(environ.get("HTTP_X_AMZ_TARGET", ""))
        signed = signed_for(environ)
        if not layer.enabled or operation is None or signed is None or signed[0] != "sagemaker":
            return app(environ, start_response)
        raw, body = read_json(environ)
        if operation == "list":
            mine = layer.standin.list_training_jobs(NameContains=body.get("NameContains", ""))
            theirs = not mine["TrainingJobSummaries"]
        else:
            theirs = operation != "create" and body.get("TrainingJobName") not in layer.standin.jobs
        if theirs:
            environ["wsgi.input"] = Replay(raw)  # a job moto holds: moto answers
            return app(environ, start_response)
        try:
            return answer(start_response, _answer(layer, operation, body))
        except ParamValidationError as exc:
            out = {"__type": "ValidationException", "Message": str(exc)}
        except ClientError as exc:
            out = {
                "__type": exc.response["Error"]["Code"],
                "Message": exc.response["Error"]["Message"],
            }
        return answer(start_response, out, error=True)

    return wsgi
