"""The job record's codec (issue 35): a typed ``jobmodel.jobs.job.Job`` to the ledger's job
attributes and back.

The attributes are Python values (``items.to_item`` turns them into DynamoDB's). What the
first record always holds is written even when None (the claim's fields, marked ``claimed``);
every other attribute only once set, as the writer sets them. An attempt is written without
its unset fields. Reading keeps the attributes :class:`Job` names and leaves the item's keys
(``pk``, the index keys) out, so ``to_record(from_record(r)) == r`` for every record the
launcher writes, less its keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jobmodel.jobs.job import Attempt, Job

__all__ = ["from_record", "to_record"]

_FIELDS = {f.name: f for f in dataclasses.fields(Job)}
_ATTEMPT_FIELDS = frozenset(f.name for f in dataclasses.fields(Attempt))


def to_record(job: Job) -> dict[str, Any]:
    """The record's attributes: each claimed one, and every other one that is set."""
    out: dict[str, Any] = {}
    for name, spec in _FIELDS.items():
        value = getattr(job, name)
        if value is None and not spec.metadata.get("claimed"):
            continue
        out[name] = _plain(value)
    return out


def from_record(record: Mapping[str, Any]) -> Job:
    """The typed job of a record as the ledger decodes it (``items.from_item``)."""
    values: dict[str, Any] = {k: v for k, v in record.items() if k in _FIELDS}
    if values.get("attempts") is not None:
        values["attempts"] = tuple(
            Attempt(**_tuples({k: v for k, v in a.items() if k in _ATTEMPT_FIELDS}))
            for a in values["attempts"]
        )
    if values.get("chain") is not None:
        values["chain"] = tuple(dict(s) for s in values["chain"])
    return Job(**values)


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Attempt):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
