"""What the submit field table (``jobmodel.requests.submit_fields.FIELDS``) shows outside the
launcher:
docs/API.md's submit table and the HTTP body's JSON Schema, both rendered from the rows.

``python -m jobmodel.requests.submit_docs`` prints the table; ``--schema`` prints the schema;
``--write docs/API.md`` replaces the table in that file (``tests/unit/jobmodel`` checks that
the file holds exactly what the rows render). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .submit_fields import FIELDS, CliFlag, SubmitField

__all__ = ["HEADER", "api_table", "json_schema", "replace_table"]

HEADER = "| field | type | required | `ftl submit` | rule |"


def flag_cell(cli: CliFlag | None) -> str:
    """How ``ftl submit`` sets a field, as the docs show it."""
    if cli is None:
        return "-"
    if not cli.flag.startswith("-"):
        return f"`{cli.flag.upper()}` (argument)"
    if cli.value == "bool":
        return f"`{cli.flag}` / `--no-{cli.flag[2:]}`"
    shown = f"`{cli.flag} {cli.metavar}`" if cli.metavar else f"`{cli.flag}`"
    return shown + (" (repeatable)" if cli.value in ("pairs", "json-pairs", "list") else "")


def _row(field: SubmitField) -> str:
    cells = [
        f"`{field.name}`",
        field.json_type,
        "yes" if field.required else "no",
        flag_cell(field.cli),
        field.rule,
    ]
    return "| " + " | ".join(cells) + " |"


def api_table() -> str:
    """docs/API.md's submit table, one line per row of ``FIELDS`` in their order."""
    lines = [HEADER, "| --- | --- | --- | --- | --- |"]
    lines += [_row(f) for f in FIELDS]
    return "\n".join(lines) + "\n"


def json_schema() -> dict[str, Any]:
    """A JSON Schema (2020-12) of the HTTP door's ``POST /jobs`` body: each field's JSON type
    and the bounds that do not depend on the template (the launcher checks the rest). An
    optional field may be ``null`` (the same as leaving it out)."""
    properties: dict[str, Any] = {}
    for field in FIELDS:
        if not field.http:
            continue
        kind: Any = field.json_type if field.required else [field.json_type, "null"]
        properties[field.name] = {"type": kind, **field.schema}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "submit request (POST /jobs)",
        "type": "object",
        "required": [f.name for f in FIELDS if f.required and f.http],
        "properties": properties,
        "additionalProperties": False,
    }


def replace_table(text: str) -> str:
    """``text`` (docs/API.md) with its submit table, from ``HEADER`` to the first blank line,
    rendered afresh."""
    start = text.index(HEADER)
    end = text.index("\n\n", start) + 1
    return text[:start] + api_table() + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobmodel.requests.submit_docs")
    parser.add_argument("--schema", action="store_true", help="print the HTTP body's schema")
    parser.add_argument("--write", metavar="API_MD", help="rewrite the table in this file")
    args = parser.parse_args(argv)
    if args.schema:
        print(json.dumps(json_schema(), indent=2))
    elif args.write:
        path = Path(args.write)
        path.write_text(replace_table(path.read_text()))
    else:
        sys.stdout.write(api_table())
    return 0


if __name__ == "__main__":  # pragma: no cover - the command line
    raise SystemExit(main())
