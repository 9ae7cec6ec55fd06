"""The command line: ``--set`` values, KEY=VALUE flags, durations and bad flags."""

from __future__ import annotations

import json

import pytest

from ftl_client.cli import build_parser, main, parse_value, seconds


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3e-5", 3e-5),
        ("0.001", 0.001),
        ("8", 8),
        ("-1", -1),
        ("true", True),
        ("false", False),
        ("null", None),
        ('"8"', "8"),
        ("bert-large-uncased", "bert-large-uncased"),
        ("", ""),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("1e", "1e"),
    ],
)
def test_set_values_are_json_when_they_parse_else_strings(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_submit_flags_become_the_request_fields():
    args = build_parser().parse_args(
        [
            "submit",
            "bert-large-qa",
            "--set",
            "learning_rate=3e-5",
            "--set",
            "fp16=true",
            "--set",
            "note=a=b",
            "--instances",
            "4",
            "--no-spot",
            "--max-runtime",
            "10h",
            "--input",
            "train=s3://data/squad/train/",
            "--tag",
            "team=nlp",
            "--json",
        ]
    )
    assert dict(args.hyperparameters) == {"learning_rate": 3e-5, "fp16": True, "note": "a=b"}
    assert args.instances == 4 and args.spot is False and args.max_runtime == 36000
    assert dict(args.inputs) == {"train": "s3://data/squad/train/"}
    assert dict(args.tags) == {"team": "nlp"}
    assert args.json is True and args.wait is False


def test_global_options_work_before_and_after_the_command():
    parser = build_parser()
    before = parser.parse_args(["--json", "--via", "http", "list"])
    after = parser.parse_args(["list", "--json", "--via", "http"])
    for args in (before, after):
        assert args.json is True and args.via == "http" and args.stack is None
    assert parser.parse_args(["templates"]).json is False
    assert parser.parse_args(["submit", "t"]).spot is None
    assert parser.parse_args(["submit", "t"]).tracking is None
    assert parser.parse_args(["submit", "t", "--no-tracking"]).tracking is False
    assert parser.parse_args(["submit", "t", "--tracking"]).tracking is True


@pytest.mark.parametrize(("text", "value"), [("3600", 3600), ("90m", 5400), ("2d", 172800)])
def test_durations(text, value):
    assert seconds(text) == value


@pytest.mark.parametrize(
    "argv",
    [
        ["submit", "t", "--set", "learning_rate"],
        ["submit", "t", "--set", "=3"],
        ["submit", "t", "--instances", "two"],
        ["submit", "t", "--max-runtime", "soon"],
        ["submit", "t", "--input", "s3://no-channel/"],
        ["list", "--status", "Sleeping"],
        ["status"],
        ["launch", "t"],
        ["--via", "smoke", "templates"],
        [],
    ],
)
def test_bad_flags_exit_2_with_one_line_and_no_usage_block(argv, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage:" not in err
    first, hint = err.splitlines()
    assert first.startswith("error: ftl") and hint.startswith("  see: ftl") and "--help" in hint


@pytest.mark.parametrize("limit", ["0", "-5", "two", "1.5"])
def test_limit_below_one_is_a_mistake_not_one(limit, capsys):
    assert main(["list", "--limit", limit]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: ftl list: argument --limit: expected a whole number of 1 or more, got '{limit}'"
    )


def test_a_mistake_with_json_is_a_json_error_on_stdout(capsys):
    assert main(["--json", "list", "--limit", "0"]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    body = json.loads(out)
    assert body["exit_status"] == 2 and body["error"]["type"] == "UsageError"
    assert "--limit" in body["error"]["message"] and body["error"]["help"] == "ftl list --help"


def _api_submit_fields() -> set[str]:
    """The submit fields docs/API.md's submit table lists (the public contract)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "API.md").read_text()
    table = text.split("| field | type | required | `ftl submit` | rule |", 1)[1]
    table = table.split("\n\n", 1)[0]
    fields = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            fields.add(line.split("`", 2)[1])
    return fields


# A value ``ftl submit`` takes for each kind of flag
# (jobmodel.requests.submit_fields.CliFlag.value),
# and the JSON type it must reach the launcher as.
SAMPLES = {
    "text": (["run-1"], str),
    "int": (["2"], int),
    "duration": (["1h"], int),
    "pairs": (["k=v"], dict),
    "json-pairs": (["lr=1"], dict),
    "list": (["on-demand"], list),
    "bool": ([], bool),
    "switch": ([], bool),
}


def test_every_submit_field_of_the_api_has_a_client_flag():
    """Every submit flag set at once reaches LauncherClient.submit with a value of its field's
    type; together with the template they name every field of docs/API.md's submit table
    (``action`` is the door's), so a documented field without a flag fails here."""
    from ftl_client.cli import Cli
    from jobmodel.requests.submit_fields import FIELDS

    class Recorder:
        def submit(self, template, **fields):
            self.fields = {"template": template, **{k: v for k, v in fields.items() if v}}
            return {"job_name": "j-1", "status": "DryRun"}

    argv = ["submit", "distilbert-spot", "--json"]
    for row in FIELDS:
        if row.cli is not None and row.cli.flag.startswith("--"):
            argv += [row.cli.flag, *SAMPLES[row.cli.value][0]]
    recorder = Recorder()
    import io

    Cli(build_parser().parse_args(argv), io.StringIO(), io.StringIO(), client=recorder).run()
    fields = _api_submit_fields()
    assert len(fields) >= 13  # the table was found
    assert set(recorder.fields) == fields - {"action"}  # the door's, not a field to set
    for row in FIELDS:
        if row.cli is not None and row.cli.flag.startswith("--"):
            assert type(recorder.fields[row.name]) is SAMPLES[row.cli.value][1], row.name
    assert recorder.fields["instance_count"] == 2 and recorder.fields["dry_run"] is True
    assert recorder.fields["max_runtime_seconds"] == 3600
    assert recorder.fields["hyperparameters"] == {"lr": 1}
    assert recorder.fields["capacity"] == ["on-demand"]
