"""The one factory of performers (issue 35): every row of ``jobmodel.jobs.effects.CONSEQUENCES``
mapped to the code that does it, the same for both functions.

Both the trigger (``ftl_trigger.records.Effects``) and the job-events function
(``ftl_events.publish``) build their runner here from their runtime, which has the
:class:`Services` every performer needs (``ftl_ledger.runtime.FunctionRuntime``): the
notifier (announcement, job notices, budget thresholds), the model registry's SageMaker client
(None: no registry), the S3 client of an evaluation's results and the platform's name. What
only one function can do is passed in (``evaluate``: the trigger's evaluation flow); the other
names it ``None`` and leaves it owed for the holder that can.

A new consequence is a row in the table, its performer here, and its permission.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from ftl_ledger.effects import NOTICE, EndEffects, Performer
from ftl_ledger.evaluation import EvaluationResults
from ftl_ledger.job_codec import from_record
from ftl_ledger.ledger import Ledger
from ftl_ledger.notify import BudgetWatch, Notifier
from ftl_ledger.registry import registrar
from ftl_ledger.writer import JobWriter
from jobmodel.jobs import effects as E

__all__ = ["Services", "budget_watch", "performers", "runner"]

LOG = logging.getLogger("ftl.ledger")


class Services(Protocol):
    """What the performers need of a function's runtime."""

    @property
    def platform_name(self) -> str: ...

    def notifier(self) -> Notifier: ...

    def s3_client(self) -> Any: ...

    def registry(self) -> Callable[[], Any] | None: ...


def performers(
    services: Services,
    writer: JobWriter,
    *,
    evaluate: Performer | None,
    follow: Callable[[dict[str, Any]], Any] | None = None,
) -> dict[str, Performer | None]:
    """Every performer, by the name the table's rows give it."""
    notifier = services.notifier()
    registry = services.registry()
    results = EvaluationResults(
        writer=writer,
        s3=services.s3_client,
        sagemaker=registry,
        platform=services.platform_name,
        follow=follow,
    )
    return {
        E.ANNOUNCE: notifier.announce_end,
        NOTICE: notifier.notify_job,
        E.REGISTER: registrar(registry, services.platform_name),
        E.EVALUATE: evaluate,
        E.RESULTS: results,
    }


def runner(services: Services, writer: JobWriter, *, evaluate: Performer | None) -> EndEffects:
    """The effects runner of a function. An evaluation's results write the evaluated job's
    record, which then owes its ``evaluated`` notice: done at once by the same runner (a
    failure is logged and left owed for the job's next holder or the sweep)."""
    built: list[EndEffects] = []

    def follow(parent: dict[str, Any]) -> None:
        try:
            built[0].complete(parent)
        except Exception as err:  # noqa: BLE001 - the notice stays owed on the job
            LOG.warning("job %s: evaluated notice left owed: %s", from_record(parent).job_name, err)

    built.append(EndEffects(writer, performers(services, writer, evaluate=evaluate, follow=follow)))
    return built[0]


def budget_watch(services: Services, ledger: Ledger, month: Callable[[], str]) -> BudgetWatch:
    """The ``budget`` row's performer: the one writer's spend hook (``JobWriter.on_spend``)."""
    return BudgetWatch(services.notifier, ledger, month)
