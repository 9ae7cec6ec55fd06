"""SageMaker training prices from the AWS Price List API (``pricing:GetProducts``).

Standard library only: the price-refresh function parses with it, the trigger reads what it
stored, and the tests and the sandbox's stand-in share its names.

``GetProducts`` answers ``PriceList``, a list of JSON *strings*, one product each:
``product.attributes`` (``usagetype`` such as ``USE1-Train:ml.g5.xlarge``, ``regionCode``)
and ``terms.OnDemand.<offer>.priceDimensions.<rate>`` (``unit`` ``Hrs``, ``pricePerUnit.USD``).
A training instance-hour is a product whose usage type is ``<region code>-Train:<instance
type>`` (not ``Train-Spot`` or other variants) in the deployment's region. A product with no
single positive hourly USD price is skipped, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "PRICE_ITEM_PK",
    "PRICING_API_REGION",
    "SERVICE_CODE",
    "get_products_request",
    "price_item_key",
    "source_text",
    "training_prices",
]

SERVICE_CODE = "AmazonSageMaker"
# The Price List API is served from us-east-1 (also eu-central-1 and ap-south-1) for every
# region's prices.
PRICING_API_REGION = "us-east-1"
PRICE_ITEM_PK = "prices#"  # the ledger item holding a region's refreshed prices
_USAGE_RE = re.compile(r"[A-Z0-9]+-Train:(ml\.[a-z0-9-]+\.[a-z0-9]+)")
MAX_PRICE = 10_000.0  # as jobmodel.money.pricing: above is not an instance-hour price


def price_item_key(region: str) -> str:
    return PRICE_ITEM_PK + region


def get_products_request(region: str, next_token: str | None = None) -> dict[str, Any]:
    """One ``GetProducts`` page: SageMaker products of the region whose usage type is a
    training one (the usage type is checked again when parsing)."""
    request: dict[str, Any] = {
        "ServiceCode": SERVICE_CODE,
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "CONTAINS", "Field": "usagetype", "Value": "-Train:ml."},
        ],
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
    }
    if next_token:
        request["NextToken"] = next_token
    return request


def source_text(region: str) -> str:
    return (
        f"AWS Price List API (pricing:GetProducts, {SERVICE_CODE}, regionCode={region}, "
        "usage type <code>-Train:<instance type>, OnDemand USD per Hrs)"
    )


def training_prices(price_list: Iterable[str], region: str) -> dict[str, float]:
    """Instance type -> on-demand USD per training instance-hour, from ``PriceList`` entries."""
    prices: dict[str, float] = {}
    for text in price_list:
        entry = json.loads(text) if isinstance(text, str) else text
        attributes = (entry.get("product") or {}).get("attributes") or {}
        match = _USAGE_RE.fullmatch(str(attributes.get("usagetype", "")))
        if match is None or attributes.get("regionCode", region) != region:
            continue
        price = _hourly_usd((entry.get("terms") or {}).get("OnDemand") or {})
        if price is not None:
            prices[match.group(1)] = price
    return dict(sorted(prices.items()))


def _hourly_usd(on_demand: Mapping[str, Any]) -> float | None:
    found = set()
    for offer in on_demand.values():
        for dimension in (offer.get("priceDimensions") or {}).values():
            if dimension.get("unit") != "Hrs":
                continue
            usd = (dimension.get("pricePerUnit") or {}).get("USD")
            try:
                found.add(float(str(usd)))
            except ValueError:
                continue
    if len(found) != 1:
        return None
    (price,) = found
    return price if 0 < price <= MAX_PRICE else None
