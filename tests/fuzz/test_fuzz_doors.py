"""hypothesis fuzzing of both doors of the real handler against moto.

Whatever arrives, every answer is a contract object (a result, or an error object with a
contract type and the matching HTTP status), never an exception or a stack trace; a request
the caller got wrong is a caller error and leaves no ledger record and no training job; an
accepted one starts exactly one job whose request stays inside the platform's bounds.

Bounded: each test has a fixed number of examples, scaled by ``FUZZ_EXAMPLES`` (default 2:
about 15 s for the module; 10 for a longer hunt), and no deadline (moto shares the CPU).
"""

from __future__ import annotations

import json
import os
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobmodel as jm
from bench.load import ledger_items
from tests.fuzz.contract import (
    Door,
    assert_outcome,
    assert_rejected_cleanly,
    event_for,
    http_raw,
)
from tests.lambda_support import http_event

SCALE = float(os.environ.get("FUZZ_EXAMPLES", "2"))
DATA_BUCKET = "ftl-data"
JOB_NAME_RE = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
BASE = {"template": "distilbert-spot"}
# Every field a submit may carry, except "action" (the direct door's own).
SUBMIT_FIELDS = sorted(jm.SUBMIT_FIELDS - {"action"})


def fuzz_settings(examples: int):  # noqa: ANN201
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )


@pytest.fixture(scope="module")
def door(fuzz_launcher):
    return Door(fuzz_launcher)


# ------------------------------------------------------------------------------- strategies
# Text with everything: controls, NUL, RTL marks, zero-width characters, emoji, look-alikes,
# and lone surrogates (JSON's "\ud800" decodes to one), which errors must not echo raw.
any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF)
nasty_pieces = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "\n",
        "\r\n",
        "\t",
        "\x1b[31m",
        "\u202e",
        "\u200b",
        "\ufeff",
        "💥",
        "ﬀ",
        "ＡＢＣ",
        "Ω",
        "../",
        "..\\",
        "/etc/passwd",
        "%2e%2e%2f",
        "$(id)",
        "`id`",
        ";rm -rf /",
        "|cat",
        "&&",
        "'\"",
        "${jndi:ldap://x}",
        "{{7*7}}",
        "<script>",
        "aws:",
        "ftl:",
        "AWS:",
        "-",
        "--",
        "a" * 64,
        "9" * 200,
    ]
)
nasty_text = st.one_of(
    st.text(any_char, max_size=40),
    st.lists(nasty_pieces, min_size=1, max_size=5).map("".join),
    st.text(string.ascii_letters + string.digits + "-", min_size=1, max_size=80),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    nasty_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(nasty_text, inner, max_size=4),
    ),
    max_leaves=12,
)


def nested(depth: int, leaf: object = 1) -> object:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


# ---------------------------------------------------------------------------------- tests
@fuzz_settings(120)
@given(event=json_values)
def test_arbitrary_json_as_a_direct_event(door, event):
    answer, writes, creates = door(event)
    assert_outcome(answer, writes, creates)


@fuzz_settings(120)
@given(payload=json_values, b64=st.booleans())
def test_arbitrary_json_as_an_http_body(door, payload, b64):
    raw = json.dumps(payload)  # NaN and Infinity included: not JSON, but json.loads reads them
    answer, writes, creates = door(http_raw("POST", "/jobs", raw, b64=b64))
    assert_outcome(answer, writes, creates)


@fuzz_settings(60)
@given(raw=st.text(any_char, max_size=200), b64=st.booleans())
def test_arbitrary_text_as_an_http_body(door, raw, b64):
    answer, writes, creates = door(http_raw("POST", "/jobs", raw, b64=b64))
    assert_outcome(answer, writes, creates)


@fuzz_settings(150)
@given(
    name=st.one_of(st.sampled_from(SUBMIT_FIELDS), nasty_text),
    value=json_values,
    door_name=st.sampled_from(["direct", "http"]),
)
def test_one_field_of_a_valid_request_replaced(door, name, value, door_name):
    answer, writes, creates = door(event_for(door_name, {**BASE, name: value}))
    assert_outcome(answer, writes, creates)
    submit_action = name == "action" and value == "submit" and door_name == "direct"
    if name not in SUBMIT_FIELDS and not submit_action:
        assert answer.error_type == "ValidationError", answer.body


@fuzz_settings(100)
@given(
    job_name=st.one_of(st.none(), nasty_text),
    tags=st.one_of(st.none(), st.dictionaries(nasty_text, nasty_text, max_size=3)),
    token=st.one_of(st.none(), nasty_text),
    door_name=st.sampled_from(["direct", "http"]),
)
def test_unicode_and_control_characters_in_names_tags_and_tokens(
    door, job_name, tags, token, door_name
):
    payload = {**BASE, "job_name": job_name, "tags": tags, "client_token": token}
    answer, writes, creates = door(event_for(door_name, payload))
    assert_outcome(answer, writes, creates)
    if answer.error is None:
        name = answer.body["job_name"]
        assert re.fullmatch(JOB_NAME_RE, name), name
        if creates == 0:  # a replay of a token hypothesis already sent: the first job
            assert token is not None
            assert name in {c["TrainingJobName"] for c in door.probe.created}
            return
        sent = door.probe.created[-1]
        assert sent["TrainingJobName"] == name
        for key, value in (tags or {}).items():
            assert not key.lower().startswith(("aws:", "ftl:")), key
            assert {"Key": key, "Value": value} in sent["Tags"], (key, sent["Tags"])


uri_schemes = st.sampled_from(
    ["s3://", "S3://", "s3:/", "s3:", "s3:///", "http://", "https://", "file://", "ftp://", ""]
)
uri_buckets = st.sampled_from(
    [
        DATA_BUCKET,
        "ftl-checkpoints",
        "ftl-artifacts",
        "other-bucket",
        "ftl-data.evil.com",
        "ftl-data.s3.amazonaws.com",
        "FTL-DATA",
        "ftl-data@evil",
        "evil@ftl-data",
        "ftl--data",
        "..",
        "",
        "ftl-dаta",  # Cyrillic a
        "ftl-data:443",
        "ftl-data%2f..%2fother",
        "ftl-data\n",
    ]
)
uri_paths = st.lists(
    st.one_of(nasty_pieces, st.text(string.ascii_lowercase + "/._-", max_size=12)), max_size=4
).map("".join)


@fuzz_settings(150)
@given(
    scheme=uri_schemes,
    bucket=uri_buckets,
    sep=st.sampled_from(["/", "", "//", "\\", "?", "#"]),
    path=uri_paths,
    channel=st.sampled_from(["train", "validation", "test", "../train", ""]),
    door_name=st.sampled_from(["direct", "http"]),
)
def test_s3_uris_outside_the_platform_are_rejected(
    door, scheme, bucket, sep, path, channel, door_name
):
    uri = f"{scheme}{bucket}{sep}{path}"
    payload = {**BASE, "inputs": {channel: uri}}
    answer, writes, creates = door(event_for(door_name, payload))
    assert_outcome(answer, writes, creates)
    if answer.error is None:
        # Accepted only for a declared channel, in the data bucket, with a sane key.
        assert uri.startswith(f"s3://{DATA_BUCKET}/"), uri
        assert channel in ("train", "validation")
        assert ".." not in uri.split("/") and "\n" not in uri and "\x00" not in uri
    else:
        assert_rejected_cleanly(answer, writes, creates)
        if uri.startswith(f"s3://{DATA_BUCKET}/") and channel in ("train", "validation"):
            pass  # a key problem (control characters, '..' segments): still a clean rejection
        else:
            assert answer.error.get("field", "").startswith("inputs"), answer.body


metachar_names = st.lists(
    st.one_of(nasty_pieces, st.text(string.ascii_letters + "/.;|&$`'\"*?~ ", max_size=8)),
    min_size=1,
    max_size=4,
).map("".join)


@fuzz_settings(80)
@given(name=metachar_names, door_name=st.sampled_from(["direct", "http"]))
def test_path_and_shell_metacharacters_in_job_names(door, name, door_name):
    answer, writes, creates = door(event_for(door_name, {**BASE, "job_name": name}))
    assert_outcome(answer, writes, creates)
    if answer.error is None:
        assert re.fullmatch(JOB_NAME_RE, answer.body["job_name"]), answer.body
        assert answer.body["checkpoint_s3_uri"] == (
            f"s3://ftl-checkpoints/{answer.body['job_name']}/"
        )
    # The same text as a job to describe or stop: not a job of this platform, nothing started.
    for event in ({"action": "describe", "job_name": name}, {"action": "stop", "job_name": name}):
        answer, writes, creates = door(event)
        assert_rejected_cleanly(answer, writes, creates)
    # In a URL path, slashes and dots route elsewhere ("/jobs/" lists jobs): any answer is a
    # contract object and nothing is started.
    for event in (http_event("GET", f"/jobs/{name}"), http_event("POST", f"/jobs/{name}/stop")):
        answer, writes, creates = door(event)
        assert creates == 0 and (answer.error is None or writes == 0), answer.body


@fuzz_settings(80)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "", "get"]),
    path=st.lists(st.one_of(nasty_pieces, st.sampled_from(["jobs", "templates", "stop"])))
    .map("/".join)
    .map(lambda p: "/" + p),
    query=st.one_of(st.none(), st.dictionaries(nasty_text, nasty_text, max_size=3)),
    body=st.one_of(st.none(), json_values.map(json.dumps)),
)
def test_http_routes_methods_and_queries(door, method, path, query, body):
    event = http_event(method, path, query=query)
    event["body"] = body
    answer, writes, creates = door(event)
    assert_outcome(answer, writes, creates)


@fuzz_settings(80)
@given(
    params=st.dictionaries(
        st.sampled_from(["limit", "template", "status", "next_token", "x"]),
        st.one_of(nasty_text, st.text(string.digits, min_size=1, max_size=30)),
        max_size=3,
    )
)
def test_list_query_parameters(door, params):
    answer, writes, creates = door(http_event("GET", "/jobs", query=params))
    assert writes == 0 and creates == 0, answer.body
    if answer.error is None:
        assert isinstance(answer.body["jobs"], list)
    else:
        assert answer.error_type in ("ValidationError", "NotFound"), answer.body


@pytest.mark.parametrize("depth", [50, 500, 900])
@pytest.mark.parametrize("where", ["event", "hyperparameters", "tags", "inputs", "job_name"])
def test_deep_nesting_in_a_direct_event(door, depth, where):
    """Lambda's runtime decodes the event with json.loads (about 1,000 levels at most)."""
    event = nested(depth) if where == "event" else {**BASE, where: nested(depth)}
    answer, writes, creates = door(event)
    assert_rejected_cleanly(answer, writes, creates)


@pytest.mark.parametrize("depth", [50, 900, 5_000, 100_000])
@pytest.mark.parametrize("opener", ["[", '{"a":', '{"template":"distilbert-spot","tags":'])
def test_deep_nesting_in_an_http_body(door, depth, opener):
    closer = {"[": "]", '{"a":': "}", '{"template":"distilbert-spot","tags":': "}"}[opener]
    raw = opener * depth + "1" + closer * depth
    answer, writes, creates = door(http_raw("POST", "/jobs", raw))
    assert_rejected_cleanly(answer, writes, creates)
    assert answer.status == 400


@pytest.mark.parametrize("size", [65_535, 65_536, 65_537, 1_000_000])
def test_huge_http_bodies(door, size):
    """Bodies up to 64 KiB are read; longer ones are refused before parsing."""
    filler = "x" * max(0, size - len('{"template":"distilbert-spot","job_name":""}'))
    raw = json.dumps({"template": "distilbert-spot", "job_name": filler}, separators=(",", ":"))
    assert len(raw) == size
    answer, writes, creates = door(http_raw("POST", "/jobs", raw))
    assert_rejected_cleanly(answer, writes, creates)
    assert answer.error["field"] == ("job_name" if size <= 65_536 else "body"), answer.body


@pytest.mark.parametrize(
    "field_name, value",
    [
        ("job_name", "a" * 1_000_000),
        ("client_token", "t" * 1_000_000),
        ("template", "t" * 1_000_000),
        ("hyperparameters", {f"k{i}": i for i in range(20_000)}),
        ("tags", {f"k{i}": "v" for i in range(20_000)}),
        ("inputs", {"train": "s3://ftl-data/" + "a/" * 200_000}),
        ("hyperparameters", {"learning_rate": [1] * 100_000}),
        ("instance_count", 10**100_0),
    ],
)
def test_huge_values_in_a_direct_event(door, field_name, value):
    answer, writes, creates = door({**BASE, field_name: value})
    assert_rejected_cleanly(answer, writes, creates)
    assert answer.error.get("field", "").split(".")[0] == field_name, answer.body


def test_the_ledger_holds_only_the_jobs_that_were_started(fuzz_launcher, door):
    """Runs last in this module: every ledger record belongs to a job SageMaker was asked to
    create (no rejected request left one), and every such job is recorded as started."""
    started = {c["TrainingJobName"] for c in door.probe.created}
    items = ledger_items(fuzz_launcher.dynamodb, fuzz_launcher.table, "")
    jobs = {k[4:]: v for k, v in items.items() if k.startswith("job#")}
    assert set(jobs) == started
    assert all(v["status"]["S"] == "InProgress" for v in jobs.values())
    tokens = [v for k, v in items.items() if k.startswith("token#")]
    assert all(t["job_name"]["S"] in started for t in tokens)
