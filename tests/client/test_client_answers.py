"""Issue 18, point 7: what the client says back. A queued job it stopped, an idempotent
replay, ``logs`` on a job that ended, errors as JSON with ``--json``, and exit statuses that
are exactly docs/CLIENT.md's table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ftl_client import LauncherError
from ftl_client.cli import main
from jobmodel.contract.statuses import JOB_STATUSES
from tests.client.support import Stubbed, job

ROOT = Path(__file__).resolve().parents[2]


def test_stopping_a_queued_job_says_this_call_stopped_it(capsys):
    with Stubbed() as s:
        s.answer(job(status="Queued", secondary_status=None))
        s.answer(job(status="Stopped", secondary_status=None))
        assert main(["stop", "sbx-20261122-0153-a1b2"], client=s.client) == 0
    out = capsys.readouterr().out
    assert "nothing to stop" not in out
    assert out == (
        "sbx-20261122-0153-a1b2: stopped while queued (it never started; its place is given back)\n"
    )
    assert [e["action"] for e in s.events] == ["describe", "stop"]


def test_stopping_a_job_that_had_ended_sends_no_stop(capsys):
    with Stubbed() as s:
        s.answer(job(status="Completed"))
        assert main(["stop", "sbx-20261122-0153-a1b2"], client=s.client) == 0
    assert (
        capsys.readouterr().out == "sbx-20261122-0153-a1b2 is already Completed; nothing to stop\n"
    )
    assert [e["action"] for e in s.events] == ["describe"]


def test_a_job_that_ends_between_describe_and_stop_is_not_called_stopped(capsys):
    with Stubbed() as s:
        s.answer(job(status="InProgress"))
        s.answer(job(status="Completed"))
        main(["stop", "sbx-20261122-0153-a1b2"], client=s.client)
    assert "ended Completed before the stop arrived; nothing to stop" in capsys.readouterr().out


def test_a_running_job_is_stopping(capsys):
    with Stubbed() as s:
        s.answer(job(status="InProgress"))
        s.answer(job(status="Stopping"))
        main(["stop", "sbx-20261122-0153-a1b2"], client=s.client)
    assert capsys.readouterr().out.startswith("sbx-20261122-0153-a1b2: stopping")


def test_an_idempotent_replay_says_already_submitted(capsys):
    with Stubbed() as s:
        s.answer(job(replayed=True))
        assert main(["submit", "distilbert-spot", "--token", "run-1"], client=s.client) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("already submitted sbx-20261122-0153-a1b2 ")
    assert "nothing new was started" in first and not first.startswith("submitted")


def _no_logs(client):
    client.logs = lambda *a, **k: iter(())
    return client


@pytest.mark.parametrize(
    ("status", "says"),
    [
        ("Completed", "it ended Completed and CloudWatch Logs has none for it"),
        ("Failed", "it ended Failed and CloudWatch Logs has none for it"),
        ("Queued", "yet: it is Queued and has not started"),
        ("InProgress", "yet (status InProgress)"),
    ],
)
def test_logs_with_no_lines_says_why(capsys, status, says):
    with Stubbed() as s:
        s.answer(job(status=status))
        assert main(["logs", "sbx-20261122-0153-a1b2"], client=_no_logs(s.client)) == 0
    out, err = capsys.readouterr()
    assert out == "" and says in err
    if status == "Completed":
        assert "yet" not in err


def test_with_json_a_launcher_error_is_json_on_stdout(capsys):
    bad = {
        "error": {
            "type": "ValidationError",
            "message": "instance_count must be between 1 and 16, got 40",
            "field": "instance_count",
        }
    }
    with Stubbed() as s:
        s.answer(bad)
        code = main(["--json", "submit", "bert-large-qa", "--instances", "40"], client=s.client)
    out, err = capsys.readouterr()
    assert code == 2 and err == ""
    assert json.loads(out) == {
        "error": {
            "type": "ValidationError",
            "message": "instance_count must be between 1 and 16, got 40",
            "field": "instance_count",
            "http_status": 400,
        },
        "exit_status": 2,
    }


# ------------------------------------------------------------- the exit-status table
def _exit_table() -> dict[int, set[str]]:
    """docs/CLIENT.md's exit table: status -> the backquoted names in its row."""
    text = (ROOT / "docs" / "CLIENT.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", text, re.MULTILINE)
    table = {int(code): set(re.findall(r"`([A-Za-z]+)`", when)) for code, when in rows}
    assert set(table) == {0, 1, 2, 3, 4, 130}, table  # 4: ftl doctor (test_doctor.py)
    return table


class _Failing:
    """A client whose every call raises the given error."""

    def __init__(self, error_type: str) -> None:
        self.error_type = error_type

    def templates(self):
        raise LauncherError(self.error_type, "as documented")


def _exit_for(name: str) -> int:
    if name in JOB_STATUSES:
        with Stubbed() as s:
            s.answer(job(status=name, secondary_status=name))
            return main(["--json", "wait", "x", "--poll", "0.001"], client=s.client)
    if name == "UsageError":
        return main(["list", "--limit", "0"])
    return main(["templates"], client=_Failing(name))  # type: ignore[arg-type]


def test_every_name_in_the_exit_table_exits_with_its_row(capsys):
    table = _exit_table()
    assert {
        "Completed",
        "Throttled",
        "ValidationError",
        "Forbidden",
        "FailedToStart",
    } <= set().union(*table.values())
    got = {name: _exit_for(name) for names in table.values() for name in names}
    capsys.readouterr()
    assert got == {name: code for code, names in table.items() for name in names}


def test_every_error_type_the_client_can_raise_is_in_the_table():
    from jobmodel.contract.errors import ERROR_TYPES

    named = set().union(*_exit_table().values())
    raised = set(ERROR_TYPES) | {"ConfigError", "AwsError", "ConnectionError", "FunctionError"}
    assert raised - {"JobModelError"} <= named
