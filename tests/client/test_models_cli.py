"""``ftl models`` and ``ftl review`` (issue 27; docs/CLIENT.md): the events they send and what
they print, over a stubbed Lambda client with answers shaped as the launcher sends them."""

from __future__ import annotations

import json

import pytest

from ftl_client.cli import main
from tests.client.support import Stubbed

VERSION = {
    "model_package_arn": "arn:aws:sagemaker:us-east-1:1:model-package/ftl-nlp-llm-lora/3",
    "model_package_group": "ftl-nlp-llm-lora",
    "model_package_version": 3,
    "model_approval_status": "PendingManualApproval",
    "description": "nlp-lora-20261122-0153-a1b2: LoRA adapter of meta-llama/Llama-3.1-8B-Instruct",
    "created_at": "2026-11-22T02:53:30+00:00",
    "lineage": {
        "job_name": "nlp-lora-20261122-0153-a1b2",
        "template": "llm-lora",
        "base_model": "meta-llama/Llama-3.1-8B-Instruct",
        "source_hash": "abc123",
        "cost_usd": "12.5",
        "attempts": "1",
        "metric.eval_loss": "0.42",
    },
}


def test_models_sends_the_filters_and_prints_each_version_with_its_lineage(capsys):
    with Stubbed() as s:
        s.answer({"models": [VERSION]})
        code = main(["models", "--template", "llm-lora"], client=s.client)
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    assert s.events == [{"action": "models", "template": "llm-lora", "limit": 20}]
    header, row = out.splitlines()
    assert header.split()[:3] == ["GROUP", "VERSION", "APPROVAL"]
    for shown in ("ftl-nlp-llm-lora", "PendingManualApproval", "abc123", "eval_loss=0.42"):
        assert shown in row


def test_models_json_gives_every_lineage_entry(capsys):
    with Stubbed() as s:
        s.answer({"models": [VERSION]})
        assert main(["models", "--json"], client=s.client) == 0
    assert json.loads(capsys.readouterr().out) == {"models": [VERSION]}


@pytest.mark.parametrize(
    ("flag", "decision"), [("--approve", "Approved"), ("--reject", "Rejected")]
)
def test_review_sends_the_decision(capsys, flag, decision):
    answer = {
        "job_name": "nlp-x",
        "model_package_group": "ftl-nlp-llm-lora",
        "model_package_version": 3,
        "model_approval_status": decision,
        "approval_description": "eval ok",
    }
    with Stubbed() as s:
        s.answer(answer)
        code = main(["review", "nlp-x", flag, "--description", "eval ok"], client=s.client)
    out, _ = capsys.readouterr()
    assert code == 0
    assert s.events == [
        {"action": "review", "job_name": "nlp-x", "decision": decision, "description": "eval ok"}
    ]
    assert out.strip() == f"nlp-x: version 3 of ftl-nlp-llm-lora is {decision} (eval ok)"


def test_a_team_members_review_is_refused_with_exit_2(capsys):
    refusal = {"error": {"type": "Forbidden", "message": "only the platform's admins ...",
                         "field": "caller"}}  # fmt: skip
    with Stubbed() as s:
        s.answer(refusal)
        code = main(["review", "nlp-x", "--approve"], client=s.client)
    assert code == 2
    assert "Forbidden" in capsys.readouterr().err


def test_review_needs_a_decision(capsys):
    assert main(["review", "nlp-x"]) == 2
    assert "one of the arguments --approve --reject is required" in capsys.readouterr().err


def test_models_shows_each_versions_evaluation_verdict_and_metrics(capsys):
    """Issue 36: the gate's verdict (with the failed checks) and the evaluation's metrics."""
    rejected = {**VERSION, "model_approval_status": "Rejected", "evaluation": {
        "job_name": "nlp-lora-20261122-0153-a1b2-eval", "status": "Completed",
        "verdict": "Rejected", "failed_checks": ["golden_faq_exact_match"],
        "metrics": {"golden_faq_exact_match": 0.25}}}  # fmt: skip
    failed = {**VERSION, "evaluation": {"job_name": "x-eval", "status": "Failed",
              "verdict": "PendingManualApproval", "failed_checks": [], "metrics": {}}}  # fmt: skip
    with Stubbed() as s:
        s.answer({"models": [rejected, failed, VERSION]})
        assert main(["models"], client=s.client) == 0
    header, first, second, third = capsys.readouterr().out.splitlines()
    assert "EVALUATION" in header and "EVAL METRICS" in header
    assert "Rejected (golden_faq_exact_match)" in first and "golden_faq_exact_match=0.25" in first
    assert "failed" in second.split()
    assert third.split()[-2:] == ["-", "-"]
