"""``ftl models`` and ``ftl review``: a team's model versions with their lineage, and an
admin's approval or rejection of a job's version (docs/CLIENT.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ftl_client.text import table

# The lineage entries shown in the table; ``--json`` gives every entry.
SHOWN = ("job_name", "template", "base_model", "source_hash", "cost_usd", "attempts")


def models_table(models: Sequence[dict[str, Any]]) -> str:
    rows = []
    for m in models:
        lineage = m.get("lineage") or {}
        metrics = ", ".join(
            f"{k[7:]}={v}" for k, v in sorted(lineage.items()) if k.startswith("metric.")
        )
        rows.append(
            [
                str(m.get("model_package_group") or "-"),
                str(m.get("model_package_version") or "-"),
                str(m.get("model_approval_status") or "-"),
                *[str(lineage.get(k, "-")) for k in SHOWN],
                metrics or "-",
            ]
        )
    header = ["GROUP", "VERSION", "APPROVAL", "JOB", "TEMPLATE", "BASE MODEL", "SOURCE",
              "COST USD", "ATTEMPTS", "METRICS"]  # fmt: skip
    return table(header, rows)


def reviewed(answer: dict[str, Any]) -> str:
    text = (
        f"{answer.get('job_name')}: version {answer.get('model_package_version')} of "
        f"{answer.get('model_package_group')} is {answer.get('model_approval_status')}"
    )
    if answer.get("approval_description"):
        text += f" ({answer['approval_description']})"
    return text
