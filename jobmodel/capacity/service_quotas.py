"""The account's SageMaker service quotas for training instances (Service Quotas).

Standard library only. SageMaker has one Service Quotas quota per instance type and capacity
kind, named ``<type> for training job usage`` (on-demand) and ``<type> for spot training job
usage`` (managed spot); the value is the instances of that type the account's training jobs
may hold at once in the region. A job that asks for more can never start. Quotas are matched
by ``QuotaName`` from ``ListServiceQuotas(ServiceCode="sagemaker")``, not by hard-coded quota
codes (docs/DECISIONS.md, "SageMaker service quotas"); the code each answer carries is what
an increase request names.

:class:`AccountQuotas` reads a ``ListServiceQuotas`` answer, :func:`shortfall` checks one
request against it, :func:`filter_steps` leaves out the steps of a capacity chain whose quota
is short (training-plan steps run on reserved capacity and are not under these quotas), and
:func:`gate` applies them to one submit (its request, or its chain's steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..contract.errors import ValidationError
from .chain import Step
from .plans import ON_DEMAND, SPOT

__all__ = [
    "MAX_PAGES",
    "SERVICE_CODE",
    "AccountQuotas",
    "Quota",
    "Shortfall",
    "filter_steps",
    "gate",
    "increase_command",
    "quota_name",
    "read_all",
    "shortfall",
]

SERVICE_CODE = "sagemaker"
MAX_PAGES = 50  # 100 quotas a page; SageMaker lists about a thousand
CONSOLE_URL = "https://console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas"


def read_all(list_page: Callable[..., Mapping[str, Any]]) -> list[Any]:
    """Every SageMaker quota entry, page by page. ``list_page``: a Service Quotas client's
    ``list_service_quotas`` (the trigger's and ``ftl doctor``'s); ``ValueError`` past
    :data:`MAX_PAGES` pages."""
    entries: list[Any] = []
    token: str | None = None
    for _ in range(MAX_PAGES):
        params: dict[str, Any] = {"ServiceCode": SERVICE_CODE, "MaxResults": 100}
        if token:
            params["NextToken"] = token
        page = list_page(**params)
        entries += page.get("Quotas") or []
        token = page.get("NextToken")
        if not token:
            return entries
    raise ValueError(f"ListServiceQuotas returned more than {MAX_PAGES} pages")


def quota_name(instance_type: str, *, spot: bool) -> str:
    """The quota's ``QuotaName``: ``ml.p4d.24xlarge for spot training job usage``."""
    kind = "spot training job usage" if spot else "training job usage"
    return f"{instance_type} for {kind}"


@dataclass(frozen=True)
class Quota:
    """One quota as ``ListServiceQuotas`` answers it."""

    name: str
    code: str
    value: float
    adjustable: bool = True

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> Quota | None:
        """A ``Quotas`` entry, or None when it lacks a name, a code or a finite value."""
        name, code, value = entry.get("QuotaName"), entry.get("QuotaCode"), entry.get("Value")
        if not isinstance(name, str) or not isinstance(code, str) or not code:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value) or value < 0:
            return None
        return cls(name, code, float(value), bool(entry.get("Adjustable", True)))


@dataclass(frozen=True)
class AccountQuotas:
    """The account's SageMaker quotas in one region, by quota name."""

    by_name: Mapping[str, Quota]

    @classmethod
    def from_entries(cls, entries: Iterable[Mapping[str, Any]]) -> AccountQuotas:
        """From ``ListServiceQuotas`` pages' ``Quotas`` entries; malformed ones are skipped."""
        found: dict[str, Quota] = {}
        for entry in entries:
            quota = Quota.from_entry(entry) if isinstance(entry, Mapping) else None
            if quota is not None:
                found[quota.name] = quota
        return cls(found)

    def quota(self, instance_type: str, *, spot: bool) -> Quota | None:
        """The quota of the type and capacity kind; None when the account lists none (then
        nothing is known and nothing is refused)."""
        return self.by_name.get(quota_name(instance_type, spot=spot))


def increase_command(quota: Quota, desired: int) -> str:
    """The AWS CLI command that requests ``desired`` for ``quota``."""
    return (
        f"aws service-quotas request-service-quota-increase --service-code {SERVICE_CODE} "
        f"--quota-code {quota.code} --desired-value {desired}"
    )


@dataclass(frozen=True)
class Shortfall:
    """A request for more instances than the account's quota allows."""

    instance_type: str
    count: int
    spot: bool
    quota: Quota

    @property
    def field(self) -> str:
        """The request field to change: the type when its quota is 0, else the count."""
        return "instance_type" if self.quota.value < 1 else "instance_count"

    def message(self) -> str:
        kind = "spot" if self.spot else "on-demand"
        value = int(self.quota.value)
        where = (
            f"request an increase in the Service Quotas console ({CONSOLE_URL}) or with "
            f"`{increase_command(self.quota, self.count)}`"
            if self.quota.adjustable
            else "the quota is not adjustable"
        )
        return (
            f"{self.count} x {self.instance_type} ({kind}) can never start: the account's "
            f"SageMaker quota '{self.quota.name}' ({self.quota.code}) is {value}; {where}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "instance_count": self.count,
            "spot": self.spot,
            "quota_name": self.quota.name,
            "quota_code": self.quota.code,
            "quota_value": self.quota.value,
            "message": self.message(),
        }


def shortfall(
    quotas: AccountQuotas, instance_type: str, count: int, *, spot: bool
) -> Shortfall | None:
    """The shortfall of ``count`` x ``instance_type`` against its quota, or None when the
    quota allows it or the account lists no such quota."""
    quota = quotas.quota(instance_type, spot=spot)
    if quota is None or count <= quota.value:
        return None
    return Shortfall(instance_type, count, spot, quota)


def filter_steps(
    steps: Sequence[Any], quotas: AccountQuotas
) -> tuple[list[Any], list[str], list[Shortfall]]:
    """A chain's steps (``jobmodel.capacity.chain.Step``) without what the quotas rule out: an
    on-demand step keeps the preference types whose on-demand quota holds the count (dropped
    when none is left), a spot step needs its type's spot quota, a training-plan step is kept.
    Returns the kept steps, why any was changed or left out, and the shortfalls."""
    kept: list[Any] = []
    skipped: list[str] = []
    shorts: list[Shortfall] = []
    for step in steps:
        if step.kind not in (SPOT, ON_DEMAND):
            kept.append(step)
            continue
        spot = step.kind == SPOT
        found = [shortfall(quotas, t, step.instance_count, spot=spot) for t in step.instance_types]
        short = [s for s in found if s is not None]
        shorts += short
        usable = tuple(t for t, s in zip(step.instance_types, found, strict=True) if s is None)
        for s in short:
            skipped.append(f"{step.kind} {s.instance_type}: {s.message()}")
        if usable:
            kept.append(replace(step, instance_types=usable) if short else step)
    return kept, skipped, shorts


def gate(
    quotas: AccountQuotas | None,
    unread: str,
    *,
    instance_type: str,
    count: int,
    spot: bool,
    steps: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    """The quotas applied to one submit: the chain's steps within them (``steps`` empty: the
    job is not chained), why any was changed, and the dry run's ``service_quota`` check.
    ``quotas`` None: not read (``unread`` says why), nothing refused. Raises
    ``ValidationError`` when the job could never start."""
    check: dict[str, Any] = {"check": "service_quota", "ok": True}
    if quotas is None:
        return [dict(s) for s in steps], [], {**check, "skipped": f"not checked: {unread}"}
    if not steps:
        short = shortfall(quotas, instance_type, count, spot=spot)
        if short is not None:
            raise ValidationError(short.field, short.message())
        quota = quotas.quota(instance_type, spot=spot)
        if quota is None:
            return [], [], {**check, "skipped": "the account lists no such quota"}
        return [], [], {**check, "quota_name": quota.name, "quota_value": quota.value}
    kept, skipped, shorts = filter_steps([Step.from_dict(s) for s in steps], quotas)
    if not kept:
        fields = {s.field for s in shorts}
        raise ValidationError(
            "instance_type" if fields == {"instance_type"} else "instance_count",
            "no step of the capacity chain is within the account's SageMaker quotas: "
            + "; ".join(skipped),
        )
    by_kind = {s["kind"]: s for s in steps}
    out = []
    for step in kept:
        prices = by_kind[step.kind].get("prices", {})
        out.append({**step.to_dict(), "prices": {t: prices.get(t) for t in step.instance_types}})
    if shorts:
        check["shortfalls"] = [s.to_dict() for s in shorts]
    return out, skipped, check
