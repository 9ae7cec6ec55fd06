"""A stand-in for Service Quotas' ``ListServiceQuotas`` for SageMaker (moto lacks it).

moto 5.2's ``servicequotas`` answers only ``ListAWSDefaultServiceQuotas`` and
``GetServiceQuota`` for ``vpc``; it has no ``ListServiceQuotas`` and no SageMaker quotas. The
stand-in holds one on-demand and one spot training quota per instance type of the job model's
catalog (``jobmodel.instances``), named as SageMaker names them (``<type> for training job
usage``, ``<type> for spot training job usage``), and answers ``ListServiceQuotas`` with the
API's response shape: ``Quotas`` entries (``ServiceCode``, ``ServiceName``, ``QuotaArn``,
``QuotaCode``, ``QuotaName``, ``Value``, ``Unit``, ``Adjustable``, ``GlobalQuota``) and
``NextToken`` while pages remain (``MaxResults`` a page, 100 by default). Requests are checked
against botocore's input shape; another service code is ``NoSuchResourceException``;
``deny`` makes every request ``AccessDeniedException`` (a caller without the right).

Defaults (:data:`DEFAULT_VALUE`, :data:`DEFAULT_OVERRIDES`): every type may hold 16 instances
on-demand and 16 on spot, except ``ml.p5.48xlarge``, 0 for both, so a dry run and
``ftl doctor`` show a shortfall. ``set(type, on_demand=..., spot=...)`` changes a value. The
quota codes are the stand-in's own (``L-`` and 8 hex digits of the name), not AWS's.
``quotas_layer`` mounts it on the sandbox's endpoint for requests whose SigV4 scope names
``servicequotas`` (``sandbox/batch_api.py``'s ``BatchSandbox``).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from jobmodel.capacity.service_quotas import SERVICE_CODE, quota_name
from jobmodel.instances import INSTANCE_TYPES
from sandbox.json_protocol import answer, read_json, signed_for

TARGET_PREFIX = "ServiceQuotasV20190624."
ACCOUNT = "123456789012"
DEFAULT_VALUE = 16.0
DEFAULT_OVERRIDES: dict[str, tuple[float, float]] = {"ml.p5.48xlarge": (0.0, 0.0)}
# A SageMaker quota that is not per instance type: callers must ignore it.
OTHER_QUOTAS = {"Number of instances across all training jobs": 32.0}


class QuotasError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def quota_code(name: str) -> str:
    return "L-" + hashlib.sha256(name.encode()).hexdigest()[:8].upper()


class ServiceQuotasStandIn:
    def __init__(self) -> None:
        self.values: dict[str, float] = dict(OTHER_QUOTAS)
        for itype in sorted(INSTANCE_TYPES):
            on_demand, spot = DEFAULT_OVERRIDES.get(itype, (DEFAULT_VALUE, DEFAULT_VALUE))
            self.values[quota_name(itype, spot=False)] = on_demand
            self.values[quota_name(itype, spot=True)] = spot
        self.deny = False
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def set(
        self, instance_type: str, *, on_demand: float | None = None, spot: float | None = None
    ) -> None:
        with self._lock:
            if on_demand is not None:
                self.values[quota_name(instance_type, spot=False)] = float(on_demand)
            if spot is not None:
                self.values[quota_name(instance_type, spot=True)] = float(spot)

    def entry(self, name: str, region: str) -> dict[str, Any]:
        code = quota_code(name)
        return {
            "ServiceCode": SERVICE_CODE,
            "ServiceName": "Amazon SageMaker",
            "QuotaArn": f"arn:aws:servicequotas:{region}:{ACCOUNT}:{SERVICE_CODE}/{code}",
            "QuotaCode": code,
            "QuotaName": name,
            "Value": self.values[name],
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }

    def list_service_quotas(self, request: dict[str, Any], region: str) -> dict[str, Any]:
        _validate("ListServiceQuotas", request)
        with self._lock:
            self.requests.append(request)
            if self.deny:
                raise QuotasError(
                    "AccessDeniedException",
                    "not authorized to perform: servicequotas:ListServiceQuotas",
                )
            if request["ServiceCode"] != SERVICE_CODE:
                raise QuotasError(
                    "NoSuchResourceException",
                    f"the stand-in lists only {SERVICE_CODE} quotas",
                )
            names = sorted(self.values)
            start = int(request.get("NextToken") or 0)
            size = int(request.get("MaxResults") or 100)
            answer: dict[str, Any] = {
                "Quotas": [self.entry(n, region) for n in names[start : start + size]]
            }
        if start + size < len(names):
            answer["NextToken"] = str(start + size)
        return answer


def _validate(operation: str, request: dict[str, Any]) -> None:
    import botocore.session
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("service-quotas")
    try:
        validate_parameters(request, model.operation_model(operation).input_shape)
    except ParamValidationError as exc:
        raise QuotasError("ValidationException", str(exc)) from None


def quotas_layer(app: Any, standin: ServiceQuotasStandIn) -> Any:
    """Route requests signed for ``servicequotas`` to the stand-in; the rest to ``app``."""

    def layer(environ: dict[str, Any], start_response: Any) -> Any:
        signed = signed_for(environ)
        if signed is None or signed[0] != "servicequotas":
            return app(environ, start_response)
        _, body = read_json(environ)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        try:
            if target != TARGET_PREFIX + "ListServiceQuotas":
                raise QuotasError("ValidationException", f"the stand-in does not answer {target}")
            return answer(start_response, standin.list_service_quotas(body, signed[1]))
        except QuotasError as exc:
            return answer(start_response, {"__type": exc.kind, "Message": str(exc)}, error=True)

    return layer
