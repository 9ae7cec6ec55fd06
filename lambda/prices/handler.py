"""Price-refresh Lambda: SageMaker training prices from the AWS Price List API into the ledger.

Runs once a day and after each deploy of the launcher stack (EventBridge rules,
``ftl_constructs/price_refresh.py``); any event starts a refresh. It pages through
``pricing:GetProducts`` (``jobmodel.money.price_list.get_products_request``) for the function's
region, keeps the on-demand USD per training instance-hour of each instance type, and writes
them with the time and the source into the ledger item ``prices#<region>`` (through the
ledger package ``ftl_ledger``, the one writer of DynamoDB items), which the trigger
reads over the shipped table and under the ``ftl:prices`` override (``jobmodel.money.pricing``).
Nothing is written when the answer holds no price: the last good prices stay.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3

from ftl_ledger.ledger import Ledger
from jobmodel.money.price_list import (
    PRICING_API_REGION,
    get_products_request,
    price_item_key,
    source_text,
    training_prices,
)

LOG = logging.getLogger("ftl.prices")
MAX_PAGES = 200  # 100 products a page; a region's SageMaker training products fit many times


def refresh(
    pricing: Any, dynamodb: Any, table: str, region: str, now: Callable[[], datetime]
) -> dict[str, Any]:
    """Read the region's training prices and store them; what was done, for the log."""
    entries: list[str] = []
    token = None
    for _ in range(MAX_PAGES):
        page = pricing.get_products(**get_products_request(region, token))
        entries += page.get("PriceList", [])
        token = page.get("NextToken")
        if not token:
            break
    prices = training_prices(entries, region)
    if not prices:
        LOG.warning("no training prices for %s in %d products; kept the last", region, len(entries))
        return {"written": False, "products": len(entries), "prices": 0}
    refreshed_at = now().strftime("%Y-%m-%dT%H:%M:%SZ")
    Ledger(dynamodb, table).put_prices(
        price_item_key(region),
        json.dumps(prices, sort_keys=True, separators=(",", ":")),
        source=source_text(region),
        refreshed_at=refreshed_at,
    )
    LOG.info("stored %d training prices for %s at %s", len(prices), region, refreshed_at)
    return {"written": True, "products": len(entries), "prices": len(prices)}


def handler(event: Any, context: Any) -> dict[str, Any]:
    region = os.environ["AWS_REGION"]
    return refresh(
        boto3.client("pricing", region_name=PRICING_API_REGION),
        boto3.client("dynamodb", region_name=region),
        os.environ["FTL_JOB_TABLE"],
        region,
        lambda: datetime.now(UTC),
    )
