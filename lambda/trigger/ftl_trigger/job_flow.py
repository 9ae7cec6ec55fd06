"""Describe, stop and list: a caller's jobs brought up to date from AWS before they answer.

:class:`JobFlow` is given the runtime's SageMaker client, templates and teams (``settings``),
the ledger (listing), the records, the list token's signer, the clock, and the flows it calls:
the job views, the backends (a job's refresh, stop and place, whichever mode it runs in), the
capacity chains (a pending attempt started, a chain stopped between two attempts) and the recovery
flow (a stale claim resolved, owed end effects done).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ftl_ledger.job_codec import from_record
from ftl_trigger.backends import Backends
from ftl_trigger.backends.queue.places import QueueSpot
from ftl_trigger.chain_flow import ChainFlow
from ftl_trigger.identity import Caller
from ftl_trigger.paging import Signer
from ftl_trigger.records import Clock, Records, ledger_call
from ftl_trigger.recovery_flow import RecoveryFlow
from ftl_trigger.views import JobViews
from jobmodel import TERMINAL_STATUSES, NotFound, TemplateSpec, ValidationError
from jobmodel.contract.errors import Conflict
from jobmodel.contract.names import JOB_INDEX, TEAM_INDEX
from jobmodel.contract.statuses import Status
from jobmodel.jobs import attempts as A
from jobmodel.jobs import effects as E
from jobmodel.jobs.claims import CLAIM_BOUND_S
from jobmodel.requests.queries import validate_list
from jobmodel.teams import TeamsConfig

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger


class JobSettings(Protocol):
    """What describe, stop and list read of the runtime."""

    catalog: Mapping[str, TemplateSpec]
    teams: TeamsConfig


class JobFlow:
    def __init__(
        self,
        *,
        settings: JobSettings,
        ledger: Ledger,
        records: Records,
        signer: Signer,
        clock: Clock,
        views: JobViews,
        backends: Backends,
        chains: ChainFlow,
        recovery: RecoveryFlow,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.records = records
        self.signer = signer
        self.clock = clock
        self.views = views
        self.backends = backends
        self.chains = chains
        self.recovery = recovery

    # -------------------------------------------------------------- describe
    def describe(self, name: str, caller: Caller) -> dict[str, Any]:
        job, position = self.fresh(name, caller)
        return self.views.view(job, detail=True, position=position)

    def fresh(
        self, name: str, caller: Caller, *, advance: bool = True
    ) -> tuple[dict[str, Any], QueueSpot | None]:
        """The caller's job brought up to date from AWS, and its queue position (queue mode,
        while Batch reports one). ``advance``: start a capacity chain's pending attempt (a
        stop does not: it stops the job between the two attempts)."""
        job = self.records.get(name)
        if job is None or not caller.sees(from_record(job)):
            # Another team's job reads exactly like a job that does not exist.
            raise NotFound(f"no job named {name} was started by this platform", field="job_name")
        job = self.recovery.look_after(job)  # a stale claim resolved, owed end effects done
        typed = from_record(job)
        if advance and typed.chain_pending and typed.status not in TERMINAL_STATUSES:
            job = self.chains.advance_pending(job)  # a chain's next attempt not started yet
            typed = from_record(job)
        if typed.status in TERMINAL_STATUSES or typed.status == Status.SUBMITTING:
            return job, None
        job, position = self.backends.of(job).refresh(job)
        if advance and from_record(job).chain_pending:  # it ended for want of capacity
            return self.chains.advance_pending(job), None
        return job, position

    # ------------------------------------------------------------------ stop
    def stop(self, name: str, caller: Caller) -> dict[str, Any]:
        job, position = self.fresh(name, caller, advance=False)
        view = self.views.view
        typed = from_record(job)
        if typed.status in TERMINAL_STATUSES or typed.status == Status.STOPPING:
            return view(job, detail=True, position=position)
        if typed.status == Status.SUBMITTING:
            # Its start may still be in flight; a claim that never started is ended as
            # FailedToStart at the bound (jobmodel.jobs.claims), so this answer does not last.
            raise Conflict(
                f"job {name} is still starting; retry the stop in a few seconds (a job whose "
                f"start never happened ends as FailedToStart {int(CLAIM_BOUND_S)} seconds "
                "after its submit)",
                field="job_name",
            )
        if A.chained(typed):
            stopped = self.chains.stop_chained(job)
            if stopped is not None:  # between two attempts: nothing runs, the job stopped
                return view(stopped, detail=True)
        return view(self.backends.of(job).stop(job, caller), detail=True)

    # ------------------------------------------------------------------ list
    def list_jobs(self, params: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
        query = validate_list(
            params,
            catalog=self.settings.catalog,
            teams=self.settings.teams,
            own_team=caller.team_name if caller.teams_mode and not caller.admin else None,
            admin=caller.admin,
        )
        team, next_token = query.team, query.next_token
        # The listing a token continues: the index and, on the team index, which team's jobs
        # (an admin's token for one team's list does not page another team's).
        index, start = f"{TEAM_INDEX}:{team}" if team else JOB_INDEX, None
        if next_token is not None:
            token_index, start = ledger_call(self.signer.verify, caller.scope, next_token)
            if token_index != index:
                raise ValidationError("next_token", "next_token belongs to another listing")
        items, last = ledger_call(
            self.ledger.list_jobs,
            template=query.template,
            status=query.status,
            limit=query.limit,
            start=start,
            team=team,
        )
        token = ledger_call(self.signer.sign, caller.scope, index, last) if last else None
        # A stale claim on the page is looked for, and owed end effects done (a failed look
        # leaves the job as listed).
        items = [self.recovery.look_after_quietly(i) if _needs_look(i) else i for i in items]
        positions = self.backends.chosen.positions(items)
        result: dict[str, Any] = {
            "jobs": [
                self.views.view(
                    i,
                    detail=True,
                    secondary=False,
                    position=positions.get(from_record(i).batch_job_arn or ""),
                )
                for i in items
            ]
        }
        if token:
            result["next_token"] = token
        return result


def _needs_look(job: Mapping[str, Any]) -> bool:
    """A listed job a look may change: a claim past the grace, or owed end effects."""
    typed = from_record(job)
    if typed.status == Status.SUBMITTING:
        return bool(typed.created_at)
    return bool(E.owed(typed))
