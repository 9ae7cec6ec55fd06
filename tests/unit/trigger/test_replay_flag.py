"""A replayed submit says so on both doors (issue 18): the direct door has no status code."""

from __future__ import annotations

import json

from tests.expected import JOB_FIELDS
from tests.lambda_support import http_event


def test_a_replay_says_replayed_and_a_new_job_does_not(launcher, prefix):
    request = {"template": "distilbert-spot", "job_name": prefix, "client_token": prefix}
    first = launcher(request)
    assert set(first) == JOB_FIELDS and "replayed" not in first
    again = launcher(request)
    assert again["replayed"] is True and again["job_name"] == first["job_name"]
    over_http = launcher(http_event("POST", "/jobs", request))
    assert over_http["statusCode"] == 200
    assert json.loads(over_http["body"])["replayed"] is True


def test_a_dry_run_is_no_replay(launcher, prefix):
    request = {"template": "distilbert-spot", "job_name": prefix, "dry_run": True}
    assert "replayed" not in launcher(request)
