"""The trigger's prices: the deployment's table with the Price List API's prices over it.

The price-refresh function stores the region's training prices from the AWS Price List API in
the ledger item ``prices#<region>`` (``jobmodel.money.price_list``). :class:`LivePrices` answers
``hourly`` as a :class:`jobmodel.money.pricing.PriceTable` does, from that table with the stored
prices over the shipped ones and under the ``ftl:prices`` override
(:meth:`PriceTable.with_listed`). A found item is kept for ``CACHE_SECONDS`` per warm
function; until the first refresh every lookup reads again. A malformed item is logged and
ignored, never a failed submit.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobmodel.money.price_list import price_item_key
from jobmodel.money.pricing import PriceTable

LOG = logging.getLogger("ftl.trigger")
CACHE_SECONDS = 600.0


class LivePrices:
    def __init__(
        self,
        base: PriceTable,
        read_item: Callable[[str], Mapping[str, Any] | None],
        region: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = base
        self.read_item = read_item
        self.region = region
        self.clock = clock
        self._kept: tuple[float, PriceTable] | None = None

    def table(self) -> PriceTable:
        if self._kept is not None and self.clock() - self._kept[0] < CACHE_SECONDS:
            return self._kept[1]
        item = self.read_item(price_item_key(self.region))
        if not item or not isinstance(item.get("prices"), str):
            return self.base
        try:
            table = self.base.with_listed(
                self.region,
                json.loads(item["prices"]),
                source=str(item.get("source", "")),
                date=str(item.get("refreshed_at", "")),
            )
        except ValueError as exc:
            LOG.warning("ignoring the Price List prices item: %s", exc)
            return self.base
        self._kept = (self.clock(), table)
        return table

    def hourly(self, region: str, instance_type: str) -> tuple[float | None, str | None]:
        return self.table().hourly(region, instance_type)
