"""Quota-aware submit (docs/API.md, "Service quotas"): the account's SageMaker training quotas.

:class:`LiveQuotas` reads ``ListServiceQuotas(ServiceCode="sagemaker")`` (every page) with the
trigger's own role and keeps the answer for ``CACHE_SECONDS`` per warm container. A failed read
never blocks a submit: it is logged, remembered for ``RETRY_SECONDS`` (so a broken read does
not slow every submit) and the check is skipped, which a dry run says.

:class:`QuotaGate` (given the runtime, of which it reads only ``quotas``) applies them at
submit and dry run: a request whose count exceeds its type's quota for its capacity kind is
refused (``ValidationError`` on ``instance_count``, or ``instance_type`` when the quota is 0);
a capacity chain loses the steps and preference types whose quota is short, with the reason,
and is refused only when no step is left (``jobmodel.capacity.service_quotas.filter_steps``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from jobmodel.capacity import chain as C
from jobmodel.capacity import service_quotas as SQ
from jobmodel.contract.errors import ValidationError
from jobmodel.requests.submit import SubmitRequest

LOG = logging.getLogger("ftl.trigger")
CACHE_SECONDS = 900.0
RETRY_SECONDS = 60.0


class LiveQuotas:
    def __init__(
        self,
        make_client: Callable[[], Any],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.make_client = make_client
        self.clock = clock
        self._client: Any = None
        # (when, quotas or None, why not)
        self._kept: tuple[float, SQ.AccountQuotas | None, str | None] | None = None

    def current(self) -> tuple[SQ.AccountQuotas | None, str | None]:
        """The account's quotas, or None and why they could not be read."""
        now = self.clock()
        if self._kept is not None:
            when, kept, why = self._kept
            if now - when < (CACHE_SECONDS if kept is not None else RETRY_SECONDS):
                return kept, why
        quotas: SQ.AccountQuotas | None
        try:
            quotas, why = SQ.AccountQuotas.from_entries(self._read()), None
        except (BotoCoreError, ClientError, ValueError) as exc:
            LOG.warning("could not read the SageMaker service quotas; not checked: %s", exc)
            quotas, why = None, f"the SageMaker service quotas could not be read ({exc})"
        self._kept = (now, quotas, why)
        return quotas, why

    def _read(self) -> list[Any]:
        if self._client is None:
            self._client = self.make_client()
        return SQ.read_all(self._client.list_service_quotas)


class QuotaSettings(Protocol):
    """What the gate reads of the runtime: the account's quotas (None: not checked)."""

    quotas: LiveQuotas | None


class QuotaGate:
    def __init__(self, *, settings: QuotaSettings) -> None:
        self.settings = settings

    def check(
        self, req: SubmitRequest, steps: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
        """The steps within the quotas (``steps`` empty: the job is not chained), why any was
        changed, and the dry run's ``service_quota`` check; raises ``ValidationError`` when
        the job could never start."""
        check: dict[str, Any] = {"check": "service_quota", "ok": True}
        live = self.settings.quotas
        quotas, why = live.current() if live else (None, "not configured")
        if quotas is None:
            return steps, [], {**check, "skipped": f"not checked: {why}"}
        if not steps:
            short = SQ.shortfall(quotas, req.instance_type, req.instance_count, spot=req.spot)
            if short is not None:
                raise ValidationError(short.field, short.message())
            quota = quotas.quota(req.instance_type, spot=req.spot)
            if quota is None:
                return [], [], {**check, "skipped": "the account lists no such quota"}
            return [], [], {**check, "quota_name": quota.name, "quota_value": quota.value}
        kept, skipped, shorts = SQ.filter_steps([C.Step.from_dict(s) for s in steps], quotas)
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
            kept_prices = {t: prices.get(t) for t in step.instance_types}
            out.append({**step.to_dict(), "prices": kept_prices})
        if shorts:
            check["shortfalls"] = [s.to_dict() for s in shorts]
        return out, skipped, check
