"""Quota-aware submit (docs/API.md, "Service quotas"): the account's SageMaker training quotas.

:class:`LiveQuotas` reads ``ListServiceQuotas(ServiceCode="sagemaker")`` (every page) with the
trigger's own role and keeps the answer for ``CACHE_SECONDS`` per warm container. A failed read
never blocks a submit: it is logged, remembered for ``RETRY_SECONDS`` (so a broken read does
not slow every submit) and the check is skipped, which a dry run says.

A submit reads them before its admission, which applies them
(``jobmodel.capacity.service_quotas.gate``): a request whose count exceeds its type's quota for
its capacity kind is refused (``ValidationError`` on ``instance_count``, or ``instance_type``
when the quota is 0); a capacity chain loses the steps and preference types whose quota is
short, with the reason, and is refused only when no step is left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobmodel.capacity import service_quotas as SQ

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
