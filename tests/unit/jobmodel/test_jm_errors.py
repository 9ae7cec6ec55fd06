"""The error types against docs/API.md's error table; the error object each one answers with."""

from __future__ import annotations

import re
from pathlib import Path

from jobmodel.contract.errors import (
    ERROR_TYPES,
    HTTP_STATUS,
    Conflict,
    QuotaExceeded,
    UpstreamError,
    ValidationError,
)

API_MD = Path(__file__).resolve().parents[3] / "docs" / "API.md"


def test_every_documented_type_has_its_documented_status():
    rows = re.findall(r"^\| `(\w+)` \| (\d{3}) \|", API_MD.read_text(), re.M)
    assert [(t, int(s)) for t, s in rows] == list(HTTP_STATUS.items())
    assert all(cls.type == name for name, cls in ERROR_TYPES.items())


def test_error_objects():
    assert ValidationError("limit", "too big").to_dict() == {
        "error": {"type": "ValidationError", "message": "too big", "field": "limit"}
    }
    assert Conflict("in use").to_dict() == {"error": {"type": "Conflict", "message": "in use"}}
    assert UpstreamError("boom").status == 502
    quota = QuotaExceeded("over", limit="max_instances", value=4, current=3, requested=2)
    assert quota.to_dict()["error"]["limit_value"] == 4
    assert quota.status == 429


def test_only_request_and_caller_problems_are_caller_fixable():
    fixable = {name for name, cls in ERROR_TYPES.items() if cls.caller_fixable}
    assert fixable == {"ValidationError", "Forbidden", "NotFound", "Conflict", "QuotaExceeded"}
