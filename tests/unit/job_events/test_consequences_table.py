"""One table of consequences (issue 35): the rows, the one factory of performers, and what
adding a consequence takes.

A row of ``jobmodel.jobs.effects.CONSEQUENCES`` names its performer; both functions get their
performers from ``ftl_ledger.consequences`` through the shared runtime base, and a runner
refuses a table row it has no performer for. A new end effect added as one row and one
performer is owed by the ending write and done, once, with its id, by the job-events function.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from jobmodel.jobs import effects as E
from jobmodel.jobs import notifications as N


def _completed(name: str, event_id: str = "e1") -> dict:
    return {
        "id": event_id,
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": name, "TrainingJobStatus": "Completed"},
    }


def test_the_table_covers_every_family_once_and_the_notices_in_their_order():
    keys = [c.key for c in E.CONSEQUENCES]
    assert len(keys) == len(set(keys))
    assert {c.family for c in E.CONSEQUENCES} == {E.END, E.NOTICE, E.MONTH}
    notices = [c.key for c in E.CONSEQUENCES if c.family == E.NOTICE]
    assert notices == [kind for kind, _ in N.NOTICE_KEYS]
    assert E.END_EFFECTS == (E.ANNOUNCE, E.REGISTER, E.EVALUATE, E.RESULTS)
    for row in E.CONSEQUENCES:
        assert row.owed and row.dedup and row.performer


def _loaded(name: str):
    """The module as the loaded handler has it (the handler's packages are loaded afresh)."""
    return sys.modules[name]


def test_both_functions_get_every_performer_from_the_one_factory(events):
    C = _loaded("ftl_ledger.consequences")
    EndEffects = _loaded("ftl_ledger.effects").EndEffects
    runtime = events.module.RUNTIME
    built = C.performers(runtime, runtime.recorder.writer, evaluate=None)
    names = {c.performer for c in E.CONSEQUENCES if c.family in (E.END, E.NOTICE)}
    assert names <= set(built)
    assert built[E.EVALUATE] is None  # the trigger's: left owed by the job-events function
    with pytest.raises(ValueError, match="no performer '(notice|announce)' for a consequence"):
        EndEffects(runtime.recorder.writer, {})


def test_a_new_consequence_is_one_row_and_one_performer(events, prefix, monkeypatch):
    C, E = _loaded("ftl_ledger.consequences"), _loaded("jobmodel.jobs.effects")
    done: list[tuple[str, str]] = []
    row = E.Consequence("archive", E.END, "the write that ends the job", "<job>/archive", "archive")
    monkeypatch.setattr(E, "CONSEQUENCES", (*E.CONSEQUENCES, row))
    monkeypatch.setattr(E, "END_EFFECTS", (*E.END_EFFECTS, "archive"))
    factory = C.performers

    def with_archive(*args, **kwargs):
        def archive(job, dedup):
            done.append((job["job_name"], dedup))
            return {"archived": True}

        return {**factory(*args, **kwargs), "archive": archive}

    monkeypatch.setattr(C, "performers", with_archive)
    events.put_job(prefix, status="InProgress")
    events(_completed(prefix))
    events(_completed(prefix, "again"))  # a repeat does it no more
    assert done == [(prefix, f"{prefix}/archive")]
    job = events.job(prefix)
    assert job["archived"] is True and E.OWED not in job


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        E.CONSEQUENCES[0].key = "x"  # type: ignore[misc]
