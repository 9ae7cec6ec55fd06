"""Requests AWS would refuse are refused at submit and at dry run, through both doors (the
Lambda invoke and the HTTP API) and with both schedulers, naming the field and the rule, with
nothing claimed or started (issue 26): the tag count of a chained job's attempts and lengths
counted in UTF-16 code units. The chain's spot flag and the Batch share are in
test_capacity_chain.py, test_queue_chain.py and test_batch_queue.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobmodel.contract.names import launcher_tag_count
from tests.lambda_support import http_event
from tests.unit.trigger.conftest import queue_launcher

CHAINED = {"template": "distilbert-chain", "instance_type": "ml.g5.xlarge"}
# U+1D400 MATHEMATICAL BOLD CAPITAL A: a letter (tags allow \p{L}) outside the BMP, so one
# character is two UTF-16 code units.
ASTRAL = "\U0001d400"


@pytest.fixture(params=["direct", "queue"])
def mode(request, launcher, batch_sandbox, monkeypatch, tmp_path):
    if request.param == "direct":
        return launcher
    return queue_launcher(batch_sandbox, monkeypatch, tmp_path, capacity=4)


def doors(launcher, event: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer of each door to ``event``: the Lambda invoke, then the HTTP API."""
    direct = launcher({"action": "submit", **event})
    resp = launcher(http_event("POST", "/jobs", event))
    http = json.loads(resp["body"])
    if "error" in http:
        assert resp["statusCode"] == 400, resp
    return [direct, http]


def started_nothing(launcher, prefix: str) -> None:
    assert launcher.ledger_items() == []
    assert launcher.jobs_named(prefix) == []
    if hasattr(launcher, "batch_jobs"):
        assert launcher.batch_jobs() == []


def room_for_tags(launcher, template: str, *, queued: bool) -> int:
    """How many caller tags the job may carry: 50 less the platform's, template's and
    launcher's (one more for ftl:job-name on every attempt of a chained job)."""
    runtime = launcher.module.RUNTIME
    spec = runtime.catalog[template]
    ours = launcher_tag_count(queued=queued, chained=bool(spec.capacity_chain))
    return 50 - len(runtime.platform.platform_tags.keys() | spec.tags.keys()) - ours


def test_a_chained_job_counts_its_job_name_tag_in_either_mode(mode, prefix):
    """Every attempt of a chained job carries ftl:job-name, in direct mode too: one caller
    tag more than the room is refused on both doors, at submit and at dry run."""
    queued = hasattr(mode, "batch_jobs")
    room = room_for_tags(mode, "distilbert-chain", queued=queued)
    tags = {f"k{i}": "v" for i in range(room + 1)}
    event = {**CHAINED, "job_name": prefix, "client_token": f"{prefix}-tok", "tags": tags}
    for dry in (False, True):
        for answer in doors(mode, {**event, "dry_run": dry}):
            err = answer["error"]
            assert (err["type"], err["field"]) == ("ValidationError", "tags"), err
            assert "SageMaker allows 50" in err["message"], err
    started_nothing(mode, prefix)
    # At the room exactly, the job starts and its first attempt carries 50 tags at most.
    job = mode({**event, "tags": dict(list(tags.items())[:room])})
    assert "error" not in job, job


def test_tag_lengths_count_utf16_code_units(mode, prefix):
    """128 characters outside the BMP are 256 UTF-16 code units: over the 128 of a tag key."""
    base = {"template": "distilbert-spot", "job_name": prefix}
    for tags, field in (
        ({ASTRAL * 128: "v"}, f"tags.{ASTRAL}"),  # the field's name is the key, shortened
        ({"k": ASTRAL * 129}, "tags.k"),
    ):
        for dry in (False, True):
            for answer in doors(mode, {**base, "tags": tags, "dry_run": dry}):
                err = answer["error"]
                assert err["type"] == "ValidationError" and err["field"].startswith(field), err
                assert "UTF-16 code units" in err["message"], err
    started_nothing(mode, prefix)
    # 64 of them (128 units) fit.
    ok = mode({**base, "tags": {ASTRAL * 64: ASTRAL * 128}, "dry_run": True})
    assert "error" not in ok, ok
