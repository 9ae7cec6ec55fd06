"""The trigger's prices with the Price List prices the refresh stored (issue 18, point 12)."""

from __future__ import annotations

import json

from ftl_trigger.prices import CACHE_SECONDS, LivePrices
from jobmodel.money.pricing import PriceTable

REGION = "us-east-1"


class Items:
    def __init__(self, item=None):
        self.item, self.reads = item, 0

    def __call__(self, pk):
        self.reads += 1
        assert pk == f"prices#{REGION}"
        return self.item


def _item(prices) -> dict:
    return {"prices": json.dumps(prices), "source": "price list", "refreshed_at": "2026-11-24"}


def test_without_a_refresh_the_price_is_unknown_and_every_lookup_reads_again():
    items = Items()
    prices = LivePrices(PriceTable(), items, REGION)
    for _ in range(2):
        price, reason = prices.hourly(REGION, "ml.g5.xlarge")
        assert price is None and "Price List" in reason
    assert items.reads == 2


def test_stored_prices_are_used_and_kept_for_a_while():
    now = [0.0]
    items = Items(_item({"ml.g5.xlarge": 1.5}))
    prices = LivePrices(PriceTable(), items, REGION, clock=lambda: now[0])
    assert prices.hourly(REGION, "ml.g5.xlarge") == (1.5, None)
    items.item = _item({"ml.g5.xlarge": 2.0})
    assert prices.hourly(REGION, "ml.g5.xlarge") == (1.5, None)  # kept
    now[0] = CACHE_SECONDS + 1
    assert prices.hourly(REGION, "ml.g5.xlarge") == (2.0, None)  # read again
    assert items.reads == 2


def test_the_override_wins_over_stored_prices():
    base = PriceTable.load(json.dumps({REGION: {"ml.g5.xlarge": 3.0}}))
    prices = LivePrices(base, Items(_item({"ml.g5.xlarge": 1.5, "ml.g5.2xlarge": 2.0})), REGION)
    assert prices.hourly(REGION, "ml.g5.xlarge") == (3.0, None)
    assert prices.hourly(REGION, "ml.g5.2xlarge") == (2.0, None)


def test_a_malformed_item_is_ignored_not_a_failed_submit(caplog):
    prices = LivePrices(PriceTable(), Items(_item({"ml.g5.xlarge": -4})), REGION)
    price, _ = prices.hourly(REGION, "ml.g5.xlarge")
    assert price is None and "ignoring the Price List prices item" in caplog.text
