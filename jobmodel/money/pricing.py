"""On-demand prices of SageMaker training instances, and the two money figures built on them.

Standard library only (the trigger and the job-events function both use it).

* ``estimated_max_cost_usd`` = instance count x on-demand hourly price x max runtime hours.
  Spot can only be cheaper: SageMaker bills spot jobs for ``BillableTimeInSeconds``, which
  never exceeds ``MaxRuntimeInSeconds`` (the wait for capacity is not billed).
* ``cost_usd`` = ``BillableTimeInSeconds`` x instance count x price / 3600. SageMaker's billable
  time already reflects spot savings. (With managed spot, savings % = 1 - billable/training.)

Prices, each source over the one before: ``jobmodel/money/prices.json`` (its ``date`` and ``source``
say where they come from); the prices the price-refresh function loaded from the AWS Price List
API for the deployment's region (``jobmodel.money.price_list``; the ledger item records their date
and source; :meth:`PriceTable.with_listed`); the deployment's override, context
``ftl:prices`` -> env ``FTL_PRICES``, shape ``{"<region>": {"<instance type>": <USD per hour>,
...}}``. A price in none of them is unknown: reported as ``null`` with a reason, never guessed
and never zero.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..contract.names import ENV_PRICES

__all__ = [
    "PRICES_FILE",
    "PriceTable",
    "cost_usd",
    "estimate_max_cost_usd",
    "parse_prices",
    "spot_savings_usd",
]

PRICES_FILE = Path(__file__).resolve().parent / "prices.json"
_REGION_RE = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
_TYPE_RE = re.compile(r"ml\.[a-z0-9-]{2,20}\.[a-z0-9]{4,12}")
MAX_PRICE = 10_000.0  # USD per instance-hour; anything above is a typo


def parse_prices(raw: Any, key: str = "ftl:prices") -> dict[str, dict[str, float]]:
    """Validate a price table; a problem raises ``ValueError`` naming ``key[region][type]``."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"'{key}': an object of region -> {{instance type: USD per hour}}")
    out: dict[str, dict[str, float]] = {}
    for region, types in raw.items():
        if not isinstance(region, str) or not _REGION_RE.fullmatch(region):
            raise ValueError(f"'{key}': {region!r} is not an AWS region name")
        if not isinstance(types, Mapping):
            raise ValueError(f"'{key}.{region}': an object of instance type -> USD per hour")
        out[region] = {}
        for itype, price in types.items():
            where = f"'{key}.{region}.{itype}'"
            if not isinstance(itype, str) or not _TYPE_RE.fullmatch(itype):
                raise ValueError(f"{where}: not a SageMaker instance type (ml.<family>.<size>)")
            if (
                isinstance(price, bool)
                or not isinstance(price, int | float)
                or not math.isfinite(price)
                or not 0 < price <= MAX_PRICE
            ):
                raise ValueError(f"{where}: a price in USD per hour above 0, got {price!r}")
            out[region][itype] = float(price)
    return out


@dataclass(frozen=True)
class PriceTable:
    """Hourly on-demand training prices per region and instance type."""

    regions: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    source: str = ""
    date: str = ""
    overrides: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # ftl:prices

    def __post_init__(self) -> None:
        for name in ("regions", "overrides"):
            frozen = {r: MappingProxyType(dict(t)) for r, t in getattr(self, name).items()}
            object.__setattr__(self, name, MappingProxyType(frozen))

    def with_listed(
        self, region: str, listed: Mapping[str, float], *, source: str, date: str
    ) -> PriceTable:
        """This table with the Price List API's prices for ``region`` over the shipped ones;
        the ``ftl:prices`` override still wins. ``source`` and ``date`` become the listed
        prices' (the shipped file's stay when nothing was listed)."""
        if not listed:
            return self
        regions = {r: dict(t) for r, t in self.regions.items()}
        merged = regions.setdefault(region, {})
        merged.update(parse_prices({region: dict(listed)}, key="price list")[region])
        merged.update(self.overrides.get(region, {}))
        return PriceTable(regions=regions, source=source, date=date, overrides=self.overrides)

    def table(self) -> PriceTable:
        """The table itself (the trigger's ``LivePrices.table`` reads the stored prices over
        it): what admission is given, read before it runs."""
        return self

    def hourly(self, region: str, instance_type: str) -> tuple[float | None, str | None]:
        """``(price, None)``, or ``(None, reason)`` when the price is unknown."""
        price = self.regions.get(region, {}).get(instance_type)
        if price is None:
            return None, (
                f"no on-demand price for {instance_type} in {region} in the platform's price "
                "table (the Price List refresh, prices.json or ftl:prices)"
            )
        return price, None

    @classmethod
    def load(cls, override: str | None = None, path: Path = PRICES_FILE) -> PriceTable:
        """The shipped file with ``override`` (``FTL_PRICES`` JSON) merged over it."""
        shipped = json.loads(path.read_text())
        regions = parse_prices(shipped.get("regions", {}), key=path.name)
        overrides: dict[str, dict[str, float]] = {}
        if override:
            try:
                extra = json.loads(override)
            except ValueError as exc:
                raise ValueError(f"environment variable {ENV_PRICES} is not JSON: {exc}") from None
            overrides = parse_prices(extra, key=ENV_PRICES)
            for region, types in overrides.items():
                regions.setdefault(region, {}).update(types)
        return cls(
            regions=regions,
            source=str(shipped.get("source", "")),
            date=str(shipped.get("date")),
            overrides=overrides,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PriceTable:
        return cls.load(env.get(ENV_PRICES) or None)


def estimate_max_cost_usd(
    price: float | None, count: int, max_runtime_seconds: int
) -> float | None:
    """Instance count x hourly price x max runtime hours (None when the price is unknown)."""
    if price is None:
        return None
    return round(count * price * max_runtime_seconds / 3600, 4)


def cost_usd(price: float | None, count: int, billable_seconds: int | None) -> float | None:
    """Billable seconds x instance count x hourly price / 3600 (None when either is unknown)."""
    if price is None or billable_seconds is None:
        return None
    return round(billable_seconds * count * price / 3600, 4)


def spot_savings_usd(
    price: float | None, count: int, billable_seconds: int | None, training_seconds: int | None
) -> float | None:
    """What managed spot saved: the on-demand price of the training time not billed
    ((training - billable) seconds x instance count x hourly price / 3600); None when unknown."""
    if price is None or billable_seconds is None or training_seconds is None:
        return None
    return round(max(0, training_seconds - billable_seconds) * count * price / 3600, 4)
