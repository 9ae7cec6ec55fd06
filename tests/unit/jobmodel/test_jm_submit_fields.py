"""The submit field table (``jobmodel.requests.submit_fields.FIELDS``) against what it drives: the
request object, the fingerprint, docs/API.md's submit table and the HTTP body's schema."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

import jobmodel as jm
from jobmodel.requests import submit_docs
from jobmodel.requests.submit_fields import FIELDS, SUBMIT_FIELDS

API_MD = Path(__file__).resolve().parents[3] / "docs" / "API.md"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/ftl/pytorch:2.3-gpu"
PLATFORM = jm.PlatformConfig(
    region="us-east-1",
    role_arn="arn:aws:iam::123456789012:role/ftl-training",
    data_bucket="ftl-data-123456789012",
    checkpoint_bucket="ftl-checkpoints-123456789012",
    artifact_bucket="ftl-artifacts-123456789012",
    kms_key_arn=None,
    subnets=(),
    security_groups=(),
    source_s3_uri="s3://ftl-artifacts-123456789012/source/sourcedir.tar.gz",
    allowed_input_buckets=("shared-datasets",),
    platform_tags={},
)


def test_docs_api_md_holds_the_table_the_rows_render() -> None:
    """Regenerate with ``python -m jobmodel.requests.submit_docs --write docs/API.md``."""
    text = API_MD.read_text()
    assert submit_docs.api_table() in text
    assert submit_docs.replace_table(text) == text


def test_the_request_object_has_one_attribute_per_kept_row() -> None:
    """A new row needs its typed attribute on ``SubmitRequest`` (and nothing else there)."""
    attributes = {f.name for f in dataclasses.fields(jm.SubmitRequest)}
    assert attributes == {row.attr for row in FIELDS if row.kept}


def test_rows_are_well_formed() -> None:
    names = [row.name for row in FIELDS]
    assert len(names) == len(set(names)) and set(names) == SUBMIT_FIELDS == jm.SUBMIT_FIELDS
    assert [row.name for row in FIELDS if row.required] == ["template"]
    for row in FIELDS:
        assert row.json_type in {"string", "integer", "boolean", "object", "array"}, row.name
        assert row.form in {"always", "when set", "never"}, row.name
        assert row.rule and "|" not in row.rule and "\n" not in row.rule, row.name
        assert row.kept or row.form == "never", row.name


def _catalog() -> dict[str, jm.TemplateSpec]:
    return {name: spec.with_image(IMAGE) for name, spec in jm.shipped_catalog().items()}


# Fingerprints recorded before the table (computed by the code it replaced): a client_token
# replayed across the upgrade must still match its request.
RECORDED = [
    ({"template": "bert-large-qa"}, "direct", "a3488f636a90e2a0"),
    (
        {"template": "bert-large-qa", "spot": False, "client_token": "t-1", "tags": {"k": "v"}},
        "direct",
        "49f57855f8f3a308",
    ),
    (
        {
            "template": "bert-large-qa",
            "max_wait_seconds": 100000,
            "max_runtime_seconds": 3600,
            "hyperparameters": {"learning_rate": 3e-5},
            "dry_run": True,
        },
        "direct",
        "091971e3b818221c",
    ),
    ({"template": "distilbert-spot", "priority": 70}, "queue", "2df271ffd9489c96"),
    ({"template": "distilbert-spot"}, "queue", "8d13b22893925089"),
]


@pytest.mark.parametrize(("payload", "scheduler", "recorded"), RECORDED)
def test_fingerprints_recorded_before_are_unchanged(
    payload: dict[str, Any], scheduler: str, recorded: str
) -> None:
    req = jm.validate_submit(payload, _catalog(), PLATFORM, scheduler=scheduler)
    assert req.fingerprint().startswith(recorded)


def test_the_fingerprint_covers_the_rows_that_say_so(submit: Any) -> None:
    req = submit(client_token="tok", dry_run=True)
    form = req.to_dict()
    always = {row.attr for row in FIELDS if row.form == "always"}
    assert set(form) == always  # priority and capacity unset: left out
    hashed = {row.attr for row in FIELDS if row.form == "always" and row.fingerprint}
    canonical = json.dumps({k: form[k] for k in hashed}, sort_keys=True, separators=(",", ":"))
    assert req.fingerprint() == hashlib.sha256(canonical.encode("ascii")).hexdigest()
    assert "client_token" not in hashed and "dry_run" not in form


def _docs_example() -> dict[str, Any]:
    text = API_MD.read_text().split("## Submit request", 1)[1]
    return json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))  # type: ignore[union-attr]


def test_the_http_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = submit_docs.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    valid = jsonschema.Draft202012Validator(schema)
    assert valid.is_valid(_docs_example())
    assert valid.is_valid({"template": "t", "spot": None, "capacity": ["spot"]})
    assert "action" not in schema["properties"]  # the route chooses it (docs/API.md, Doors)
    for wrong in (
        {},
        {"template": "t", "action": "submit"},
        {"template": "t", "unknown": 1},
        {"template": "t", "spot": "yes"},
        {"template": "t", "instance_count": 0},
        {"template": "t", "client_token": "a b"},
        {"template": "t", "tags": {"k": 1}},
        {"template": "t", "capacity": []},
    ):
        assert not valid.is_valid(wrong), wrong


def test_the_docs_command_prints_the_table_and_the_schema(capsys: Any) -> None:
    assert submit_docs.main([]) == 0
    assert capsys.readouterr().out == submit_docs.api_table()
    assert submit_docs.main(["--schema"]) == 0
    assert json.loads(capsys.readouterr().out) == submit_docs.json_schema()


def test_a_new_row_reaches_every_reader(monkeypatch: pytest.MonkeyPatch, submit: Any) -> None:
    """A throwaway row (a free-text ``note``, and an ``echo`` switch on by default): read and
    checked, in the docs table, the schema and the client's flags, and left out of the form
    while unset or at its default, so the fingerprints recorded before it stay as they were."""
    from jobmodel.requests import submit as request
    from jobmodel.requests import submit_fields as SF

    note = SF.SubmitField(
        name="note",
        json_type="string",
        rule="a label, 1 to 20 letters",
        read=SF.matching("[a-z]{1,20}", "1 to 20 letters"),
        cli=SF.CliFlag(flag="--note", metavar="TEXT", help="a label"),
    )
    echo = SF.SubmitField(
        name="echo",
        json_type="boolean",
        rule="on by default",
        read=SF.switch(True),
        cli=SF.CliFlag(flag="--echo", value="bool", help="echo the run"),
        omit=True,
    )
    rows = (*SF.FIELDS, note, echo)
    monkeypatch.setattr(SF, "FIELDS", rows)
    monkeypatch.setattr(submit_docs, "FIELDS", rows)
    monkeypatch.setattr(request, "SUBMIT_FIELDS", frozenset(r.name for r in rows))

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Noted(jm.SubmitRequest):
        note: str | None = None
        echo: bool = True

    monkeypatch.setattr(request, "SubmitRequest", Noted)
    plain = submit()
    assert set(plain.to_dict()) == {r.attr for r in SF.FIELDS if r.form == "always"}
    assert plain.fingerprint() == submit(echo=True).fingerprint()
    noted = submit(note="sweep", echo=False)
    assert (noted.note, noted.echo) == ("sweep", False)  # type: ignore[attr-defined]
    assert noted.to_dict()["note"] == "sweep" and noted.to_dict()["echo"] is False
    assert noted.fingerprint() != plain.fingerprint()
    with pytest.raises(jm.ValidationError, match="^note must be 1 to 20 letters, got 'A b'$"):
        submit(note="A b")
    assert "| `note` | string | no | `--note TEXT` | a label, 1 to 20 letters |" in (
        submit_docs.api_table()
    )
    assert "| `echo` | boolean | no | `--echo` / `--no-echo` |" in (submit_docs.api_table())
    assert submit_docs.json_schema()["properties"]["note"] == {"type": ["string", "null"]}

    from ftl_client.args import build_parser, submit_request

    monkeypatch.setattr("ftl_client.args.FIELDS", rows)
    args = build_parser().parse_args(["submit", "t", "--note", "x", "--no-echo"])
    assert submit_request(args)["note"] == "x" and submit_request(args)["echo"] is False
