"""The teams parts of ``ftl`` (docs/API.md, Teams; docs/CLIENT.md): ``submit --dry-run``
prints the estimate and every check, ``whoami`` the team, its limits and current use,
``status`` and ``list`` the cost. Over a stubbed Lambda client, answers shaped as the
launcher sends them."""

from __future__ import annotations

import json

from ftl_client.cli import main
from tests.client.support import Stubbed, job

DRY_RUN = {
    **job("nlp-sbx-20261122-0153-a1b2", status="DryRun", team="nlp"),
    "estimated_max_cost_usd": 6.0,
    "dry_run": True,
    "checks": [
        {"check": "validation", "ok": True},
        {"check": "team", "ok": True, "team": "nlp"},
        {"check": "price", "ok": True, "price_usd_per_hour": 1.5},
        {"check": "max_instances", "ok": True, "limit": 4, "current": 3, "requested": 1},
        {"check": "monthly_budget_usd", "ok": True, "limit": 10, "current": 2.5, "requested": 6.0},
    ],
    "create_training_job": {"TrainingJobName": "nlp-sbx-20261122-0153-a1b2"},
}
for key in ("job_arn", "console_url", "created_at", "requested_by", "secondary_status"):
    DRY_RUN.pop(key)

WHOAMI = {
    "team": "nlp",
    "admin": False,
    "principal": "arn:aws:sts::123456789012:assumed-role/nlp-scientists/alice",
    "teams": True,
    "limits": {"max_instances": 4, "monthly_budget_usd": 5000.0},
    "usage": {
        "instances": 2,
        "month": "2026-11",
        "month_spend_usd": 123.4,
        "month_reserved_usd": 377.0,
    },
}


def test_dry_run_sends_dry_run_without_a_token_and_prints_the_estimate_and_checks(capsys):
    with Stubbed() as s:
        s.answer(DRY_RUN)
        code = main(["submit", "distilbert-spot", "--name", "sbx", "--dry-run"], client=s.client)
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    # A dry run claims no client_token (docs/API.md, Dry run), so the client sends none.
    assert s.events == [
        {"action": "submit", "template": "distilbert-spot", "job_name": "sbx", "dry_run": True}
    ]
    assert out.splitlines() == [
        "dry run: nlp-sbx-20261122-0153-a1b2 would start (nothing was started or recorded)",
        "  1 x ml.g5.xlarge, estimated max cost $6.00",
        "  [ok] validation",
        "  [ok] team",
        "  [ok] price",
        "  [ok] max_instances: 3 used + 1 of 4",
        "  [ok] monthly_budget_usd: 2.5 used + 6 of 10",
    ]


def test_dry_run_with_an_unknown_price_says_why(capsys):
    answer = {
        **DRY_RUN,
        "estimated_max_cost_usd": None,
        "estimate_unknown_reason": "no on-demand price for ml.g5.xlarge in us-east-1",
        "checks": [
            {"check": "validation", "ok": True},
            {"check": "team", "ok": True, "team": None},
            {"check": "price", "ok": False, "price_usd_per_hour": None, "reason": "unknown"},
        ],
    }
    with Stubbed() as s:
        s.answer(answer)
        assert main(["submit", "distilbert-spot", "--dry-run"], client=s.client) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  1 x ml.g5.xlarge, estimated max cost -"
    assert out[2] == "  estimate unknown: no on-demand price for ml.g5.xlarge in us-east-1"
    assert "  [NO] price" in out


def test_dry_run_json_is_the_launcher_answer(capsys):
    with Stubbed() as s:
        s.answer(DRY_RUN)
        assert main(["submit", "distilbert-spot", "--dry-run", "--json"], client=s.client) == 0
    assert json.loads(capsys.readouterr().out) == DRY_RUN


def test_dry_run_over_a_limit_is_one_error_line_and_exit_2(capsys):
    quota = {
        "error": {
            "type": "QuotaExceeded",
            "message": "team nlp's limit max_instances is 4 instances running or starting; "
            "current use is 4 and this job needs 1",
            "limit": "max_instances",
            "limit_value": 4,
            "current_use": 4,
            "requested": 1,
        }
    }
    with Stubbed() as s:
        s.answer(quota)
        code = main(["submit", "distilbert-spot", "--dry-run"], client=s.client)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == f"error: QuotaExceeded: {quota['error']['message']}\n"


def test_whoami_prints_team_limits_and_current_use(capsys):
    with Stubbed() as s:
        s.answer(WHOAMI)
        assert main(["whoami"], client=s.client) == 0
    assert s.events == [{"action": "whoami"}]
    assert capsys.readouterr().out.splitlines() == [
        "principal: arn:aws:sts::123456789012:assumed-role/nlp-scientists/alice",
        "team: nlp",
        "admin: no",
        "limit max_instances: 4",
        "limit monthly_budget_usd: 5000",
        "instances in use: 2",
        "2026-11: spent $123.40, reserved by running jobs $377.00",
    ]


def test_whoami_of_an_admin_and_of_a_single_team_deployment(capsys):
    admin = {**WHOAMI, "team": None, "admin": True, "limits": {}, "usage": None}
    single = {"team": None, "admin": False, "principal": "direct-invoke", "teams": False}
    with Stubbed() as s:
        s.answer(admin).answer(single)
        assert main(["whoami"], client=s.client) == 0
        assert main(["whoami"], client=s.client) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"principal: {WHOAMI['principal']}", "team: -", "admin: yes"]
    assert out[3:] == ["principal: direct-invoke", "team: -", "admin: no"]


def test_status_shows_the_estimate_and_the_cost(capsys):
    described = job(
        "nlp-a",
        status="Completed",
        team="nlp",
        billable_seconds=1200,
        training_seconds=3600,
        spot_savings_percent=66.7,
        estimated_max_cost_usd=36.0,
        cost_usd=0.5,
    )
    with Stubbed() as s:
        s.answer(described)
        assert main(["status", "nlp-a"], client=s.client) == 0
    lines = capsys.readouterr().out.splitlines()
    fields = {line.split()[0]: line.split(None, 1)[1] for line in lines}
    assert fields["estimated_max_cost_usd"] == "$36.00"
    assert fields["cost_usd"] == "$0.50"
    assert fields["team"] == "nlp"


def test_status_of_an_unpriced_job_shows_why_the_cost_is_unknown(capsys):
    described = job(
        "nlp-b",
        status="Completed",
        billable_seconds=60,
        estimated_max_cost_usd=None,
        cost_usd=None,
        cost_unknown_reason="no on-demand price for ml.g5.xlarge was known at submit",
    )
    with Stubbed() as s:
        s.answer(described)
        assert main(["status", "nlp-b"], client=s.client) == 0
    out = capsys.readouterr().out
    assert "cost_unknown_reason" in out and "was known at submit" in out
    assert "cost_usd " not in out  # a null cost is left out, never shown as $0


def test_list_has_a_cost_column(capsys):
    jobs = [
        job("nlp-a", status="Completed", billable_seconds=1200, cost_usd=0.5),
        job("nlp-b", status="InProgress"),
        job("nlp-c", status="Completed", billable_seconds=60, cost_usd=None),
    ]
    with Stubbed() as s:
        s.answer({"jobs": jobs})
        assert main(["list"], client=s.client) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "COST"
    costs = {row.split()[0]: row.split()[-1] for row in rows}
    assert costs == {"nlp-a": "$0.50", "nlp-b": "-", "nlp-c": "-"}


def test_list_passes_the_admin_team_filter():
    with Stubbed() as s:
        s.answer({"jobs": []})
        assert main(["list", "--team", "vision"], client=s.client) == 0
    assert s.events[0]["team"] == "vision" and s.events[0]["action"] == "list"
