"""The notifications' documented request rules (issue 27): EventBridge ``PutEvents`` entries
and SNS ``Publish``; each a check and a planted violation (``rules.RULES`` holds them)."""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from typing import Any

Params = Mapping[str, Any]


def _entry_size(e: Mapping[str, Any]) -> int:
    """PutEvents entry size as EventBridge computes it ('Calculating PutEvents event entry
    size'): 14 bytes for Time, then Source, DetailType, Detail and each Resource in UTF-8."""
    parts = [e.get("Source", ""), e.get("DetailType", ""), e.get("Detail", "")]
    return 14 + sum(len(str(x).encode()) for x in [*parts, *e.get("Resources", [])])


def put_events(p: Params) -> str | None:
    entries = p.get("Entries") or []
    if not 1 <= len(entries) <= 10:
        return f"{len(entries)} entries (1 to 10)"
    for e in entries:
        if not e.get("Source") or not e.get("DetailType") or "Detail" not in e:
            return "an entry needs Source, DetailType and Detail to be delivered"
        if str(e["Source"]).startswith("aws."):
            return f"source {e['Source']!r}: 'aws.' sources are AWS services' own"
        try:
            if not isinstance(json.loads(e["Detail"]), dict):
                return "Detail is not a JSON object"
        except ValueError:
            return "Detail is not valid JSON"
        if _entry_size(e) > 256 * 1024:
            return f"entry of {_entry_size(e)} bytes (at most 256 KB)"
    return None


def plant_put_events(p: dict[str, Any]) -> None:
    p["Entries"][0]["Detail"] = json.dumps({"x": "y" * 262_144})


_ATTRIBUTE_NAME = frozenset(string.ascii_letters + string.digits + "_-.")


def publish(p: Params) -> str | None:
    subject = p.get("Subject")
    if subject is not None and (
        len(subject) > 100 or not subject.isascii() or any(c in subject for c in "\r\n")
    ):
        return f"subject {subject[:20]!r}...: 1-100 ASCII characters, no line breaks"
    attributes = p.get("MessageAttributes") or {}
    if len(attributes) > 10:
        return f"{len(attributes)} message attributes (at most 10)"
    for name, value in attributes.items():
        if not name or len(name) > 256 or not set(name) <= _ATTRIBUTE_NAME or ".." in name:
            return f"attribute name {name!r}"
        if name.startswith(("AWS.", "Amazon.", ".")) or name.endswith("."):
            return f"attribute name {name!r}: reserved prefix or a dot at an end"
        if value.get("DataType") == "String" and not value.get("StringValue"):
            return f"attribute {name!r}: an empty String value"
    size = len(str(p.get("Message", "")).encode()) + sum(
        len(k.encode()) + len(str(v.get("StringValue", "")).encode()) + len(v["DataType"])
        for k, v in attributes.items()
    )
    if size > 256 * 1024:
        return f"message and attributes of {size} bytes (at most 256 KB)"
    return None


def plant_publish(p: dict[str, Any]) -> None:
    p.setdefault("MessageAttributes", {})["AWS.trace"] = {"DataType": "String", "StringValue": "x"}
