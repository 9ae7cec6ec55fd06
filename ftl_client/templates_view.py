"""``ftl templates``: each template's distribution, instance types and counts, spot, run
limit, input channels (required or optional, default S3 location), overridable settings and
the legacy ones with their reason."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ftl_client.text import hours, num, table


def hyperparameter(name: str, spec: dict[str, Any]) -> str:
    """``learning_rate: float 1e-06..0.001`` or ``model: str {a, b}``."""
    text = f"{name}: {spec.get('type', '?')}"
    if "choices" in spec:
        # JSON for each choice, so "" and "full_shard auto_wrap" cannot be misread.
        text += " {" + ", ".join(json.dumps(c) for c in spec["choices"]) + "}"
    elif "min" in spec or "max" in spec:
        text += f" {num(spec.get('min'))}..{num(spec.get('max'))}"
    return text


def channels(template: dict[str, Any]) -> list[str]:
    """``train (required) s3://bucket/squad/train/`` per input channel; older launchers that
    answer only ``inputs`` (names) give the names."""
    views = template.get("channels")
    if views is None:
        return [str(name) for name in template.get("inputs", [])] or ["-"]
    lines = []
    for c in views:
        text = f"{c['name']} ({'required' if c.get('required') else 'optional'})"
        where = c.get("default_s3_uri") or (
            f"<data bucket>/{c['default_prefix']}" if c.get("default_prefix") else None
        )
        lines.append(f"{text} default {where}" if where else text)
    return lines or ["-"]


def templates_table(templates: Sequence[dict[str, Any]]) -> str:
    rows = []
    for t in templates:
        default = t.get("default_instance_type")
        types = [f"{it}*" if it == default else it for it in t.get("instance_types", [])]
        overridable = t.get("hyperparameters", {}).get("overridable", {})
        rows.append(
            [
                [t["name"], "(legacy)"] if t.get("legacy") else t["name"],
                t.get("distribution", "-"),
                f"{t.get('default_instance_count', '-')} (max {t.get('max_instance_count', '-')})",
                types,
                "yes" if t.get("spot") else "no",
                hours(t.get("max_runtime_seconds")),
                channels(t),
                [hyperparameter(k, v) for k, v in overridable.items()] or ["-"],
            ]
        )
    headers = [
        "TEMPLATE",
        "DIST",
        "INSTANCES",
        "INSTANCE TYPES",
        "SPOT",
        "MAX RUN",
        "INPUTS",
        "OVERRIDABLE",
    ]
    notes = ["* default instance type"]
    notes += [f"legacy: {t['name']}: {t['legacy']}" for t in templates if t.get("legacy")]
    return table(headers, rows) + "\n" + "\n".join(notes)
