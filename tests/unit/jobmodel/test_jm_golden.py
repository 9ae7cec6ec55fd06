"""Golden files: each shipped template rendered with fixed inputs.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 pytest tests/unit/jobmodel``
and review the diff.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

import jobmodel as jm

GOLDEN = Path(__file__).parent / "golden"
NOW = datetime(2026, 11, 22, 1, 53, tzinfo=UTC)
REQUESTED_BY = "arn:aws:sts::123456789012:assumed-role/DataScientist/alice"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("name", list(jm.shipped_catalog()))
def test_golden(
    name: str, catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    payload = {"template": name, "tags": {"team": "nlp"}, "client_token": "golden-1"}
    req = jm.validate_submit(payload, catalog, platform)
    job_name = jm.make_job_name(req.job_name_prefix, now=NOW, rand_hex="a1b2")
    rendered = jm.render_create_training_job(
        req, catalog[name], platform, job_name=job_name, requested_by=REQUESTED_BY
    )
    path = GOLDEN / f"{name}.json"
    text = json.dumps(rendered, indent=2, sort_keys=False) + "\n"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing {path}; run with UPDATE_GOLDEN=1"
    assert json.loads(path.read_text()) == rendered
    # key order is part of the golden file too (stable, reviewable output)
    assert path.read_text() == text


def test_no_stale_golden_files() -> None:
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(jm.shipped_catalog())
