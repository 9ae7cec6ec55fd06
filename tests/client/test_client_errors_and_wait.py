"""The client and the CLI over a stubbed Lambda client: requests, error lines, --wait."""

from __future__ import annotations

import pytest

from ftl_client import LauncherClient, LauncherError
from ftl_client.cli import main
from tests.client.support import FUNCTION, Stubbed, job

BAD_COUNT = {
    "error": {
        "type": "ValidationError",
        "message": "instance_count must be between 1 and 16 for template bert-large-qa, got 40",
        "field": "instance_count",
    }
}


def test_submit_sends_the_contract_request_with_an_idempotency_token():
    with Stubbed() as s:
        s.answer(job())
        result = s.client.submit(
            "distilbert-spot",
            hyperparameters={"learning_rate": 3e-5},
            instance_count=None,
            spot=False,
        )
    assert result["job_name"] == "sbx-20261122-0153-a1b2"
    sent = s.events[0]
    assert sent["action"] == "submit" and sent["template"] == "distilbert-spot"
    assert sent["hyperparameters"] == {"learning_rate": 3e-5} and sent["spot"] is False
    assert "instance_count" not in sent
    assert sent["client_token"].startswith("ftl-") and len(sent["client_token"]) <= 64


def test_list_follows_next_token_up_to_the_limit():
    with Stubbed() as s:
        s.answer({"jobs": [job("a"), job("b")], "next_token": "t1"})
        s.answer({"jobs": [job("c")], "next_token": "t2"})
        jobs = s.client.list_jobs(status="Completed", limit=3)
    assert [j["job_name"] for j in jobs] == ["a", "b", "c"]
    assert s.events == [
        {"action": "list", "status": "Completed", "limit": 3},
        {"action": "list", "status": "Completed", "limit": 1, "next_token": "t1"},
    ]


def test_contract_error_raises_launcher_error():
    with Stubbed() as s, pytest.raises(LauncherError) as info:
        s.answer(BAD_COUNT)
        s.client.submit("bert-large-qa", instance_count=40)
    err = info.value
    assert (err.type, err.field, err.http_status) == ("ValidationError", "instance_count", 400)
    assert err.is_client_error
    assert err.line() == (
        "error: ValidationError: instance_count must be between 1 and 16 for template "
        "bert-large-qa, got 40 (field: instance_count)"
    )


def test_cli_prints_one_error_line_and_exits_2_for_a_rejected_request(capsys):
    with Stubbed() as s:
        s.answer(BAD_COUNT)
        code = main(["submit", "bert-large-qa", "--instances", "40"], client=s.client)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (
        "error: ValidationError: instance_count must be between 1 and 16 for template "
        "bert-large-qa, got 40 (field: instance_count)\n"
    )


@pytest.mark.parametrize(
    ("body", "function_error", "line", "code"),
    [
        (
            {
                "error": {
                    "type": "NotFound",
                    "message": "no template named 'nope'",
                    "field": "template",
                }
            },
            None,
            "error: NotFound: no template named 'nope' (field: template)",
            2,
        ),
        (
            {"error": {"type": "CapacityError", "message": "CreateTrainingJob hit a quota"}},
            None,
            "error: CapacityError: CreateTrainingJob hit a quota",
            1,
        ),
        (
            {"errorMessage": "boom", "errorType": "KeyError"},
            "Unhandled",
            f"error: FunctionError: the launcher function {FUNCTION} failed: KeyError: boom",
            1,
        ),
    ],
)
def test_error_lines_and_exit_codes(capsys, body, function_error, line, code):
    with Stubbed() as s:
        s.answer(body, function_error=function_error)
        assert main(["submit", "nope"], client=s.client) == code
    assert capsys.readouterr().err == line + "\n"


def test_wait_watches_until_done_and_reports_the_outcome(capsys):
    name = "sbx-20261122-0153-a1b2"
    with Stubbed() as s:
        s.answer(job(secondary_status="Starting"))
        s.answer(job(secondary_status="Training"))
        s.answer(job(secondary_status="Interrupted"))
        s.answer(job(secondary_status="Training"))
        s.answer(
            job(
                status="Completed",
                secondary_status="Completed",
                billable_seconds=300,
                training_seconds=1000,
                spot_savings_percent=70.0,
                final_metrics={"eval_accuracy": 0.91},
                spot_interruptions=1,
            )
        )
        code = main(["wait", name, "--poll", "0.001"], client=s.client)
    out = capsys.readouterr().out
    assert code == 0
    assert [line.split("] ")[1].split("  ")[0] for line in out.splitlines()[:5]] == [
        "InProgress / Starting",
        "InProgress / Training",
        "InProgress / Interrupted",
        "InProgress / Training",
        "Completed",
    ]
    assert "spot interruptions: 1" in out.splitlines()[4]
    assert "Completed: " + name in out
    assert "final metrics: eval_accuracy=0.91" in out
    assert "billable time: 0:05:00 of 0:16:40 training" in out and "spot savings: 70.0%" in out


def test_wait_exits_3_when_the_job_failed(capsys):
    with Stubbed() as s:
        s.answer(job(status="Failed", secondary_status="Failed", failure_reason="OOM"))
        code = main(["--json", "wait", "x", "--poll", "0.001"], client=s.client)
    out, err = capsys.readouterr()
    assert code == 3
    assert '"status": "Failed"' in out and '"final_metrics": {}' in out
    assert "Failed" in err  # progress goes to stderr when stdout is JSON


def test_ctrl_c_stops_watching_not_the_job(capsys, monkeypatch):
    client = LauncherClient(function_name=FUNCTION)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(client, "wait", interrupted)
    code = main(["--stack", "my-launcher", "wait", "job-1"], client=client)
    err = capsys.readouterr().err
    assert code == 130
    assert "stopped watching job-1; the job keeps running." in err
    assert "ftl --stack my-launcher wait job-1" in err
    assert "ftl --stack my-launcher stop job-1" in err
