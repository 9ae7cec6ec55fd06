"""The checked-in corpus of the nastiest inputs, replayed through both doors on every run.

Each ``corpus/*.json`` names a door, what to send and the contract error it must get back
(type, field, HTTP status), and the request must leave no ledger record and no job.
Large inputs are written as markers
expanded here: ``@@repeat:<char>:<n>`` (inside any string); as a whole value
``@@nested:<depth>`` and ``@@keys:<n>``; as a whole HTTP body ``@@deepbody:<depth>``,
``@@bigbody:<bytes>`` and ``@@multibyte:<characters>``.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.contract import Door, assert_rejected_cleanly, http_raw
from tests.lambda_support import http_event

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(CORPUS.glob("*.json"))


def nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def expand(value: Any) -> Any:
    if isinstance(value, dict):
        return {expand(k): expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    if not isinstance(value, str) or "@@" not in value:
        return value
    whole = re.fullmatch(r"@@(nested|keys|deepbody|bigbody|multibyte):(\d+)", value)
    if whole:
        kind, n = whole[1], int(whole[2])
        if kind == "nested":
            return nested(n)
        if kind == "keys":
            return {f"k{i}": i for i in range(n)}
        if kind == "deepbody":
            return "[" * n + "1" + "]" * n
        if kind == "bigbody":
            head = '{"template":"distilbert-spot","job_name":"'
            return head + "x" * (n - len(head) - 2) + '"}'
        return json.dumps({"template": "distilbert-spot", "job_name": "€" * n}, ensure_ascii=False)
    return re.sub(r"@@repeat:(.):(\d+)", lambda m: m[1] * int(m[2]), value)


def event_of(case: dict[str, Any]) -> Any:
    if case["door"] == "direct":
        return expand(case["payload"])
    method, path = case.get("method", "POST"), case.get("path", "/jobs")
    if "base64_body" in case:
        event = http_raw(method, path, None)
        event["body"], event["isBase64Encoded"] = case["base64_body"], True
    elif "raw_body" in case:
        event = http_raw(method, path, expand(case["raw_body"]))
    elif "payload" in case:
        event = http_raw(method, path, json.dumps(expand(case["payload"])))
    else:
        event = http_event(method, path)
    if "query" in case:
        event["queryStringParameters"] = expand(case["query"])
    return event


def _param(path: Path) -> Any:
    case = json.loads(path.read_text())
    return pytest.param(case, id=case["name"])


@pytest.fixture(scope="module")
def door(fuzz_launcher):
    # Some cases put lone surrogates in keys, which the launcher's log lines repeat as sent;
    # pytest-xdist cannot send a report holding one between processes (INTERNALERROR), so the
    # launcher's logger stays quiet here.
    logger = logging.getLogger("ftl.trigger")
    logger.disabled = True
    try:
        yield Door(fuzz_launcher)
    finally:
        logger.disabled = False


def test_the_corpus_is_large_enough_and_well_formed():
    assert len(CASES) >= 30
    for path in CASES:
        case = json.loads(path.read_text())
        assert case["name"] == path.stem, path
        assert case["door"] in ("direct", "http"), path
        assert case["expect"]["type"] in ("ValidationError", "NotFound", "Conflict"), path
        if case["door"] == "http":
            assert "status" in case["expect"], path
        assert path.stat().st_size < 8_000, f"{path.name}: use an @@ marker for large inputs"


@pytest.mark.parametrize("case", [_param(p) for p in CASES])
def test_corpus_case(door, case):
    answer, writes, creates = door(event_of(case))
    expect = case["expect"]
    assert answer.error is not None, answer.body
    assert answer.error_type == expect["type"], answer.body
    if "field" in expect:
        assert answer.error.get("field") == expect["field"], answer.body
    if "status" in expect:
        assert answer.status == expect["status"], (answer.status, answer.body)
    assert_rejected_cleanly(answer, writes, creates)


def test_base64_bodies_are_decoded_before_the_rules(door):
    """The same bad request, base64-encoded, gets the same answer."""
    raw = json.dumps({"template": "distilbert-spot", "inputs": {"train": "s3://evil/x/"}})
    event = http_raw("POST", "/jobs", base64.b64encode(raw.encode()).decode())
    event["isBase64Encoded"] = True
    answer, writes, creates = door(event)
    assert answer.error["field"] == "inputs.train"
    assert_rejected_cleanly(answer, writes, creates)
