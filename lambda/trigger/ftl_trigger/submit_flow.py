"""Submit: validate, admit, claim the job in the ledger, start it.

A submit reads first what its admission depends on (the price table, the account's SageMaker
quotas, the team's usage), then makes one call into the job model,
``jobmodel.admission.admit`` (the chain's plan, the quotas, the price and worst case, the
team's limits), and ``admission.claim`` names the job, renders attempt 1 and builds its first
record. What stays here is what only the ledger can answer: a token already taken, a name or
the team's usage taken by another submit (then a fresh name, or the usage read and the
limits checked again).

Starting the claimed job is the backend's (``ftl_trigger.backends``: SageMaker's
``CreateTrainingJob`` in direct mode, an AWS Batch service job in queue mode), chosen once
from the scheduler configuration. Everything before it is the same.

:class:`SubmitFlow` is given the runtime's templates, platform, scheduler, prices, team roles
and name randomness (``settings``), the ledger (tokens and claims), the records, the team's
usage, the clock, and the parts of the launcher a submit calls: the job views, the backends,
the capacity chains and the recovery flow (a replay looks after its job).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ftl_ledger.job_codec import from_record, to_record
from ftl_ledger.ledger import LimitRace, NameTaken, TokenTaken
from ftl_trigger.backends import Backends
from ftl_trigger.chain_flow import ChainFlow
from ftl_trigger.errors import Throttled, UpstreamError
from ftl_trigger.identity import Caller
from ftl_trigger.quotas import LiveQuotas
from ftl_trigger.records import Clock, Records, ledger_call, same_request
from ftl_trigger.recovery_flow import RecoveryFlow
from ftl_trigger.views import JobViews
from jobmodel import admission
from jobmodel.capacity.scheduler import SchedulerConfig
from jobmodel.contract.statuses import Status
from jobmodel.jobs import attempts as A
from jobmodel.jobs import claims as CL
from jobmodel.money.limits import Usage
from jobmodel.money.pricing import PriceTable
from jobmodel.requests.submit import validate_submit

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_ledger.usage import TeamUsage

LOG = logging.getLogger("ftl.trigger")
SUBMITTING = Status.SUBMITTING
# How long a duplicate waits for the first request of a client token to finish creating its
# job before it completes the creation itself (same job name, so never a second job).
WAIT_FOR_PEER_S = 5.0
NAME_ATTEMPTS = 3
# A claim that lost a race for the team's usage is checked and tried again, at most this often.
MAX_RACES = 50


class Prices(Protocol):
    """The runtime's prices: a ``PriceTable``, or ``LivePrices`` (the stored Price List
    prices over it)."""

    def table(self) -> PriceTable: ...


class SubmitSettings(admission.AdmissionSettings, Protocol):
    """What a submit reads of the runtime (and what admission reads,
    ``jobmodel.admission.AdmissionSettings``)."""

    scheduler: SchedulerConfig
    quotas: LiveQuotas | None

    @property
    def prices(self) -> Prices: ...

    @property
    def random_hex(self) -> Callable[[], str]: ...


class SubmitFlow:
    """The submit action."""

    def __init__(
        self,
        *,
        settings: SubmitSettings,
        ledger: Ledger,
        records: Records,
        usage: TeamUsage,
        clock: Clock,
        views: JobViews,
        backends: Backends,
        chains: ChainFlow,
        recovery: RecoveryFlow,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.records = records
        self.usage = usage
        self.clock = clock
        self.views = views
        self.backends = backends
        self.chains = chains
        self.recovery = recovery

    # ---------------------------------------------------------------- submit
    def submit(self, params: Mapping[str, Any], caller: Caller) -> tuple[dict[str, Any], bool]:
        """Validate, read what admission depends on, admit (one call into the job model),
        then claim a fresh name and start the job."""
        rt = self.settings
        team = caller.submitting_team()
        req = validate_submit(
            params,
            rt.catalog,
            rt.platform,
            team=team,
            scheduler=rt.scheduler.scheduler,
            queue_capacity=rt.scheduler.capacity_instances,
            tracking=rt.tracking,
        )
        fingerprint, team_name = req.fingerprint(), caller.team_name
        if req.client_token is not None and not req.dry_run:
            existing = ledger_call(self.ledger.get_token, req.client_token, team_name)
            if existing is not None:
                return self._replay(existing, fingerprint), False
        looked = self._look(team_name)
        admitted = admission.admit(req, rt, team=team, looked=looked, now=self.clock.now())
        if req.dry_run:
            return self._dry_run(admitted, caller), False
        names = races = 0
        while names < NAME_ATTEMPTS:
            job, rendered, token = self._new_job(admitted, caller, fingerprint)
            self.backends.chosen.check(job, rendered)  # e.g. queue mode's 10 KiB, before any write
            try:
                ledger_call(
                    self.usage.claim,
                    job,
                    token,
                    team,
                    count=req.instance_count,
                    estimate=admitted.estimate,
                )
            except NameTaken:
                names += 1
                continue  # a random suffix collided; draw another name
            except LimitRace:
                # Another submit took what was left (or the month turned): check again; the
                # check raises QuotaExceeded once nothing is left.
                races += 1
                if races > MAX_RACES:
                    raise Throttled(
                        f"team {team_name}'s usage changed on every one of {MAX_RACES} tries "
                        "(many concurrent submits); retry"
                    ) from None
                usage = self._usage(team_name)
                admission.limit_checks(req, team, usage, admitted.estimate, admitted.reason)
                continue
            except TokenTaken:
                existing = ledger_call(self.ledger.get_token, req.client_token, team_name)
                if existing is None:  # the winner failed to start and freed the token
                    continue
                return self._replay(existing, fingerprint), False
            return self._start(job, rendered), True
        raise UpstreamError(f"could not allocate a unique job name after {NAME_ATTEMPTS} attempts")

    def _look(self, team: str | None) -> admission.Looked:
        """What admission depends on, read first: the prices, the account's quotas (a failed
        read is skipped, and a dry run says so) and the team's usage (read only: a refused
        submit or a dry run writes nothing, not even the usage item)."""
        rt = self.settings
        prices = rt.prices.table()
        quotas, unread = rt.quotas.current() if rt.quotas else (None, "not configured")
        return admission.Looked(
            prices=prices,
            quotas=quotas,
            quotas_unread=unread or "",
            usage=self._usage(team),
        )

    def _usage(self, team: str | None) -> Usage | None:
        return None if team is None else ledger_call(self.usage.peek, team)

    def _new_job(
        self, admitted: admission.Admitted, caller: Caller, fingerprint: str
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        """A fresh job name, its rendered request, its ledger item and its token item."""
        claimed, rendered = admission.claim(
            admitted,
            self.settings,
            team=caller.team_name,
            requested_by=caller.principal,
            now=self.clock.now(),
            rand_hex=self.settings.random_hex(),
        )
        job = to_record(claimed)
        token = None
        client_token = admitted.req.client_token
        if client_token is not None:
            token = {
                "client_token": client_token,
                "job_name": claimed.job_name,
                "fingerprint": fingerprint,
                "created_at": str(claimed.created_at),
            }
        return job, rendered, token

    def _dry_run(self, admitted: admission.Admitted, caller: Caller) -> dict[str, Any]:
        req = admitted.req
        job, rendered, _ = self._new_job(admitted, caller, req.fingerprint())
        self.backends.chosen.check(job, rendered)  # a real submit would refuse it here
        view = self.views.view({**job, "status": "DryRun"})
        for key in ("job_arn", "console_url", "batch_job_id", "queued_at"):
            view.pop(key, None)
        price, reason = admitted.price, admitted.reason
        all_checks = [
            {"check": "validation", "ok": True},
            {"check": "team", "ok": True, "team": caller.team_name},
            {"check": "price", "ok": price is not None, "price_usd_per_hour": price}
            | ({"reason": reason} if reason else {}),
            *admitted.checks,
        ]
        dry = {
            **view,
            "dry_run": True,
            "checks": all_checks,
            "create_training_job": rendered,
        }
        if admitted.steps:
            dry["capacity_chain"] = admitted.steps
            dry["capacity_skipped"] = admitted.skipped
        return dry

    # ------------------------------------------------------------------ start
    def _start(self, job: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
        """Start a claimed job with the backend it was claimed for."""
        if A.chained(from_record(job)):
            return self.views.view(self.chains.start_chained(job, rendered))
        return self.views.view(self.backends.of(job).start(job, rendered))

    def _replay(self, token: Mapping[str, Any], fingerprint: str) -> dict[str, Any]:
        same_request(token, fingerprint)
        deadline = time.monotonic() + WAIT_FOR_PEER_S
        delay = 0.02
        while True:
            job = ledger_call(self.ledger.get_job, token["job_name"])
            if job is None:
                raise UpstreamError(
                    f"ledger has token {token['client_token']} but not job {token['job_name']}"
                )
            if from_record(job).status != SUBMITTING:
                return self.views.view(self.recovery.look_after(job))  # owed end effects done
            if time.monotonic() >= deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        claimed = from_record(job)
        if CL.claim_age_s(claimed, self.clock.now()) >= CL.REPLAY_START_S:
            # Too late to start it (a stale claim ends at the bound, jobmodel.jobs.claims): look
            # for it by name as describe does.
            return self.views.view(self.recovery.look_after(job))
        # The first request stopped between its ledger write and SageMaker's (or Batch's)
        # answer, or is slow: finish its work with the very same rendered request and job name.
        return self._start(job, json.loads(str(claimed.rendered)))
