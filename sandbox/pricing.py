"""A stand-in for the AWS Price List API's ``GetProducts`` (moto has no ``pricing`` service).

``PricingStandIn`` holds products in the Price List's shape (``product.attributes``,
``terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD``) and answers
``GetProducts`` as AWS does: ``FormatVersion``, ``PriceList`` as a list of JSON *strings*, and
``NextToken`` while more pages remain (``MaxResults`` a page, 100 by default). Each request is
validated against botocore's ``GetProducts`` input shape, and its filters are applied to the
product attributes (``TERM_MATCH``/``EQUALS`` exact, ``CONTAINS`` substring, ``ANY_OF`` and
``NONE_OF`` over a comma-separated list). ``pricing_layer`` mounts it on the sandbox's endpoint
for requests whose SigV4 scope names ``pricing`` (``sandbox/batch_api.py``'s ``BatchSandbox``).

The sample prices are the sandbox's own, not AWS's: they exist to show the refresh at work.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sandbox.json_protocol import answer, read_json, signed_for

TARGET = "AWSPriceListService.GetProducts"
_REGION_CODES = {"us-east-1": "USE1", "us-west-2": "USW2", "eu-west-1": "EU"}

# Sandbox prices (USD per instance-hour): illustrative only, not AWS's.
SAMPLE_PRICES = {
    "us-east-1": {"ml.g5.xlarge": 1.5, "ml.g5.2xlarge": 2.0, "ml.p4d.24xlarge": 40.0},
    "us-west-2": {"ml.g5.xlarge": 1.6},
}


def product(region: str, usage_type: str, usd: float, *, unit: str = "Hrs") -> dict[str, Any]:
    """One Price List entry (as a dict; the API sends it as a JSON string)."""
    sku = f"SKU{abs(hash((region, usage_type))) % 10**12:012d}"
    offer = f"{sku}.JRTCKXETXF"
    return {
        "product": {
            "productFamily": "ML Instance",
            "attributes": {
                "servicecode": "AmazonSageMaker",
                "regionCode": region,
                "usagetype": usage_type,
                "operation": "RunInstance",
                "servicename": "Amazon SageMaker",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonSageMaker",
        "terms": {
            "OnDemand": {
                offer: {
                    "priceDimensions": {
                        f"{offer}.6YS6EN2CT7": {
                            "unit": unit,
                            "endRange": "Inf",
                            "description": f"${usd} per {usage_type}",
                            "appliesTo": [],
                            "rateCode": f"{offer}.6YS6EN2CT7",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": f"{usd:.10f}"},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2026-11-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            }
        },
        "version": "20261101000000",
        "publicationDate": "2026-11-01T00:00:00Z",
    }


def sample_products() -> list[dict[str, Any]]:
    """Training instance-hours for the sample prices, plus what a training refresh must skip:
    hosting and notebook instance-hours of the same types."""
    out = []
    for region, prices in SAMPLE_PRICES.items():
        code = _REGION_CODES[region]
        for itype, usd in prices.items():
            out.append(product(region, f"{code}-Train:{itype}", usd))
            out.append(product(region, f"{code}-Host:{itype}", usd * 1.25))
        out.append(product(region, f"{code}-Notebk:ml.t3.medium", 0.05))
    return out


class PricingError(Exception):
    """The Price List API's InvalidParameterException (HTTP 400)."""


class PricingStandIn:
    def __init__(self, products: Iterable[Mapping[str, Any]] | None = None) -> None:
        self.products = list(sample_products() if products is None else products)
        self.requests: list[dict[str, Any]] = []

    def get_products(self, request: dict[str, Any]) -> dict[str, Any]:
        _validate(request)
        self.requests.append(request)
        matching = [
            p
            for p in self.products
            if p.get("serviceCode") == request["ServiceCode"]
            and all(_matches(p, f) for f in request.get("Filters", []))
        ]
        start = int(request.get("NextToken") or 0)
        size = int(request.get("MaxResults") or 100)
        page = matching[start : start + size]
        answer: dict[str, Any] = {
            "FormatVersion": request.get("FormatVersion", "aws_v1"),
            "PriceList": [json.dumps(p) for p in page],
        }
        if start + size < len(matching):
            answer["NextToken"] = str(start + size)
        return answer


def _validate(request: dict[str, Any]) -> None:
    import botocore.session
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("pricing")
    try:
        validate_parameters(request, model.operation_model("GetProducts").input_shape)
    except ParamValidationError as exc:
        raise PricingError(str(exc)) from None


def _matches(entry: Mapping[str, Any], flt: Mapping[str, str]) -> bool:
    value = str(entry["product"]["attributes"].get(flt["Field"], ""))
    wanted = flt["Value"]
    kind = flt["Type"]
    if kind in ("TERM_MATCH", "EQUALS"):
        return value == wanted
    if kind == "CONTAINS":
        return wanted in value
    options = [w.strip() for w in wanted.split(",")]
    return (value in options) if kind == "ANY_OF" else (value not in options)


def pricing_layer(app: Any, standin: PricingStandIn) -> Any:
    """Route ``GetProducts`` signed for ``pricing`` to the stand-in; the rest to ``app``."""

    def layer(environ: dict[str, Any], start_response: Any) -> Any:
        signed = signed_for(environ)
        if signed is None or signed[0] != "pricing":
            return app(environ, start_response)
        _, body = read_json(environ)
        if environ.get("HTTP_X_AMZ_TARGET") != TARGET:
            return answer(start_response, _error(f"the stand-in answers only {TARGET}"), error=True)
        try:
            return answer(start_response, standin.get_products(body))
        except PricingError as exc:
            return answer(start_response, _error(str(exc)), error=True)

    return layer


def _error(message: str) -> dict[str, str]:
    return {"__type": "InvalidParameterException", "Message": message}


def stack_complete_event(stack_id: str, status: str = "UPDATE_COMPLETE") -> dict[str, Any]:
    """CloudFormation's ``CloudFormation Stack Status Change`` event, as EventBridge delivers
    it after a deploy (``detail.stack-id``, ``detail.status-details.status``)."""
    return {
        "version": "0",
        "id": f"cfn-{status.lower()}",
        "detail-type": "CloudFormation Stack Status Change",
        "source": "aws.cloudformation",
        "account": stack_id.split(":")[4],
        "time": "2026-11-24T10:00:00Z",
        "region": stack_id.split(":")[3],
        "resources": [stack_id],
        "detail": {
            "stack-id": stack_id,
            "status-details": {"status": status, "status-reason": ""},
            "client-request-token": "",
        },
    }


def refresh_after_deploy(sandbox: Any, stack_name: str) -> list[Any]:
    """What EventBridge does after a deploy of ``stack_name``: deliver the stack-complete
    event to the rules deployed into moto, so the deployed price refresh runs (a
    ``BatchSandbox``: its event pump and Price List stand-in). The deliveries, for checks."""
    import boto3

    from sandbox.event_pump import EventPump

    cfn = boto3.client("cloudformation", endpoint_url=sandbox.endpoint, region_name="us-east-1")
    stack_id = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]["StackId"]
    return EventPump(sandbox.batch, sandbox.endpoint).deliver(stack_complete_event(stack_id))
