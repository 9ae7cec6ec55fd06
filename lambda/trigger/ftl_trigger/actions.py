"""The launcher: its flows composed, and the one table from an action to its handler.

Each flow is an object given, by keyword, exactly what it uses: the runtime's clients and
settings it reads (each flow names them in a ``Protocol`` of its own; the container's
``trigger_runtime.Runtime`` is all of them), the ledger, the records (``records.Records``: every
change through the one writer), the clock, and the other flows it calls. No flow holds
another's state.

============  ===============================================  ==============================
action        handler                                          door
============  ===============================================  ==============================
submit        ``submit.SubmitFlow.submit``                     direct, HTTP
describe      ``job_flow.JobFlow.describe``                    direct, HTTP
stop          ``job_flow.JobFlow.stop``                        direct, HTTP
list          ``job_flow.JobFlow.list_jobs``                   direct, HTTP
templates     ``caller_flow.CallerFlow.templates``             direct, HTTP
whoami        ``caller_flow.CallerFlow.whoami``                direct, HTTP
advance       ``chain_flow.ChainFlow.advance``                 chain (the job-events function)
evaluate      ``evaluation_flow.EvaluationFlow.look``          chain (the job-events function)
sweep         ``sweep_flow.SweepFlow.sweep``                   direct, HTTP
refresh       ``sweep_flow.SweepFlow.refresh``                 chain (the job-events function)
recover       ``recovery_flow.RecoveryFlow.sweep``             sweep (a schedule)
============  ===============================================  ==============================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ftl_ledger.ledger import Ledger
from ftl_ledger.writer import JobWriter
from ftl_trigger.adapters import Call
from ftl_trigger.backends import Backend, Backends
from ftl_trigger.backends.host import StartRecorder
from ftl_trigger.backends.queue.flow import QueueFlow
from ftl_trigger.caller_flow import CallerFlow
from ftl_trigger.chain_flow import ChainFlow
from ftl_trigger.evaluation_flow import EvaluationFlow
from ftl_trigger.identity import Caller
from ftl_trigger.job_flow import JobFlow
from ftl_trigger.models_flow import ModelsFlow
from ftl_trigger.paging import Signer
from ftl_trigger.records import Clock, Effects, Records
from ftl_trigger.recovery_flow import RecoveryFlow
from ftl_trigger.remote import map_aws_error
from ftl_trigger.submit_flow import SubmitFlow
from ftl_trigger.sweep_flow import SweepFlow
from ftl_trigger.trigger_runtime import Runtime
from ftl_trigger.views import JobViews
from jobmodel.contract.errors import ValidationError
from jobmodel.jobs.claims import SUBMIT_GRACE_S
from jobmodel.requests.queries import only_fields, validate_job_action

__all__ = ["INTERNAL_ACTIONS", "SUBMIT_GRACE_S", "Handler", "Launcher", "map_aws_error"]

_WRITE_ATTEMPTS = 3  # conditional writes of one change before leaving the job as it is
# The actions only the platform's own doors call (adapters: the chain and sweep aliases).
INTERNAL_ACTIONS = ("advance", "evaluate", "refresh", "recover")

# One action: its parameters and the caller in; the contract object and whether a new job
# was created out.
Handler = Callable[[Mapping[str, Any], Caller], tuple[Any, bool]]


class Launcher:
    """The container's launcher: built once from the runtime (``handler.py``)."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        # The runtime's clock is read on every call (tests and the sandbox move it).
        self.clock = Clock(lambda: runtime.now())
        self.ledger = Ledger(runtime.dynamodb, runtime.table_name)
        # The one writer of existing job records (ftl_ledger.writer).
        self.writer = JobWriter(
            self.ledger,
            platform=lambda: runtime.platform.platform_name,
            now=lambda: runtime.now(),
            attempts=_WRITE_ATTEMPTS,
            on_spend=runtime.budget_watch(self.ledger, lambda: self.usage.month()),
        )
        self.usage = self.writer.usage
        self.signer = Signer(self.ledger.paging_key)
        self.effects = Effects(settings=runtime, writer=self.writer)
        self.records = Records(ledger=self.ledger, writer=self.writer, effects=self.effects)
        self.views = JobViews(settings=runtime, clock=self.clock)
        # How claimed jobs get capacity: chosen once, from the scheduler configuration.
        self.queue = QueueFlow(
            settings=runtime, ledger=self.ledger, records=self.records, clock=self.clock
        )
        starts = StartRecorder(
            runtime=runtime, records=self.records, clock=self.clock, queue=self.queue
        )
        self.backends = Backends(host=starts, scheduler=runtime.scheduler)
        self.backend: Backend = self.backends.chosen
        self._compose(runtime)
        self.handlers: dict[str, Handler] = {
            "submit": self.submits.submit,
            "sweep": self.sweeps.sweep,
            "describe": _on_job(self.jobs.describe),
            "stop": _on_job(self.jobs.stop),
            "list": _answer(self.jobs.list_jobs),
            "templates": _without_params(self.callers.templates),
            "whoami": _without_params(self.callers.whoami),
            "advance": _on_job(lambda name, _caller: self.chains.advance(name)),
            "evaluate": _on_job(lambda name, _caller: self.evaluations.look(name)),
            "refresh": _on_job(self.sweeps.refresh),
            "recover": _without_params(lambda _caller: self.recovery.sweep()),
            "models": _answer(self.models.models),
            "review": _answer(self.models.review),
        }

    def _compose(self, runtime: Runtime) -> None:
        """The flows, each given what it uses."""
        records, clock, backends = self.records, self.clock, self.backends
        self.chains = ChainFlow(settings=runtime, records=records, clock=clock, backends=backends)
        self.recovery = RecoveryFlow(
            ledger=self.ledger,
            records=records,
            effects=self.effects,
            backends=backends,
            clock=clock,
        )
        self.submits = SubmitFlow(
            settings=runtime,
            ledger=self.ledger,
            records=records,
            usage=self.usage,
            clock=clock,
            views=self.views,
            backends=backends,
            chains=self.chains,
            recovery=self.recovery,
        )
        self.jobs = JobFlow(
            settings=runtime,
            ledger=self.ledger,
            records=records,
            signer=self.signer,
            clock=clock,
            views=self.views,
            backends=backends,
            chains=self.chains,
            recovery=self.recovery,
        )
        self.callers = CallerFlow(settings=runtime, usage=self.usage)
        self.evaluations = EvaluationFlow(
            settings=runtime,
            ledger=self.ledger,
            records=records,
            usage=self.usage,
            clock=clock,
            backends=backends,
        )
        self.effects.evaluate = self.evaluations.perform
        self.sweeps = SweepFlow(
            settings=runtime,
            ledger=self.ledger,
            usage=self.usage,
            clock=clock,
            views=self.views,
            backends=backends,
            jobs=self.jobs,
        )
        self.models = ModelsFlow(
            settings=runtime, ledger=self.ledger, records=records, recovery=self.recovery
        )

    def dispatch(self, call: Call) -> tuple[Any, bool]:
        """Run one action; returns the contract object and whether a new job was created."""
        handler = self.handlers.get(call.action)
        if handler is None:  # the doors admit only known actions (adapters)
            raise ValidationError("action", f"unknown action {call.action!r}")
        return handler(call.params, call.caller)


def _answer(fn: Callable[[Mapping[str, Any], Caller], Any]) -> Handler:
    """An action that reads its own parameters and creates no job."""

    def handle(params: Mapping[str, Any], caller: Caller) -> tuple[Any, bool]:
        return fn(params, caller), False

    return handle


def _on_job(fn: Callable[[str, Caller], Any]) -> Handler:
    """An action on one job: its only parameter is ``job_name``."""

    def handle(params: Mapping[str, Any], caller: Caller) -> tuple[Any, bool]:
        return fn(validate_job_action(params), caller), False

    return handle


def _without_params(fn: Callable[[Caller], Any]) -> Handler:
    """An action that takes no parameters."""

    def handle(params: Mapping[str, Any], caller: Caller) -> tuple[Any, bool]:
        only_fields(params, frozenset())
        return fn(caller), False

    return handle
