"""The notifications' pure builders (issue 27): attributes, the SNS and EventBridge shapes, the
notices a write owes, and budget thresholds that are sent exactly once a month."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftl_ledger.job_codec import from_record
from jobmodel.jobs import effects as E
from jobmodel.jobs import notifications as N
from jobmodel.jobs.record import Change, plan

JOB = {
    "job_name": "nlp-bert-20261126-0001",
    "team": "nlp",
    "template": "bert-finetune",
    "status": "Completed",
    "requested_by": "arn:aws:sts::123456789012:assumed-role/Sci/alice",
    "cost_usd": 12.5,
    "final_metrics": {"eval_f1": 91.5},
    "training_job_name": "nlp-bert-20261126-0001",
}


def test_an_ended_notice_carries_status_metrics_cost_and_console_link():
    notice = N.job_notice(
        N.ENDED, from_record(JOB), "nlp-bert-20261126-0001/announce", region="eu-west-1"
    )
    m = notice.message
    assert m["status"] == "Completed" and m["cost_usd"] == 12.5
    assert m["final_metrics"] == {"eval_f1": 91.5}
    assert m["console_url"] == (
        "https://eu-west-1.console.aws.amazon.com/sagemaker/home?region=eu-west-1"
        "#/jobs/nlp-bert-20261126-0001"
    )
    assert notice.attributes == {
        "event": "ended",
        "team": "nlp",
        "template": "bert-finetune",
        "status": "Completed",
        "requester": JOB["requested_by"],
        "dedup_id": "nlp-bert-20261126-0001/announce",
    }
    params = N.sns_publish(notice)
    assert params["Subject"] == "Training job Completed: nlp-bert-20261126-0001"
    assert json.loads(params["Message"])["dedup_id"] == notice.dedup_id
    assert params["MessageAttributes"]["team"] == {"DataType": "String", "StringValue": "nlp"}


def test_a_job_without_a_team_leaves_the_attribute_out():
    job = {k: v for k, v in JOB.items() if k != "team"}
    notice = N.job_notice(
        N.STARTED, from_record({**job, "status": "InProgress"}), "j/started", region="r"
    )
    assert "team" not in notice.attributes and notice.attributes["status"] == "InProgress"


def test_a_chain_step_names_its_attempt_and_step_and_its_training_job():
    job = {
        **JOB,
        "status": "Submitting",
        "attempt": 2,
        "chain": [{"kind": "SPOT"}, {"kind": "ON_DEMAND"}],
        "training_job_name": None,
    }
    job = {k: v for k, v in job.items() if v is not None}
    notice = N.job_notice(N.CHAIN_STEP, from_record(job), "x/chain-step-2", region="us-east-1")
    assert notice.message["attempt"] == 2 and notice.message["steps"] == 2
    assert notice.message["step"] == {"kind": "ON_DEMAND"}
    assert (
        notice.message["training_job_name"].endswith("-2")
        or "2" in notice.message["training_job_name"]
    )


@pytest.mark.parametrize(
    "bad",
    [
        lambda: N.job_notice("exploded", from_record(JOB), "d", region="r"),
        lambda: N.job_notice(N.ENDED, from_record({"status": "Completed"}), "d", region="r"),
        lambda: N.budget_notice("", "2026-11", 80, spend_usd=1, budget_usd=1),
        lambda: N.budget_notice("nlp", "2026-11", 50, spend_usd=1, budget_usd=1),
        lambda: N.event_source("Bad Name"),
        lambda: N.event_source(""),
    ],
)
def test_bad_inputs_are_refused_with_a_clear_error(bad):
    with pytest.raises(N.NotificationError):
        bad()


def test_event_entries_fit_eventbridge():
    notice = N.job_notice(N.ENDED, from_record(JOB), "j/announce", region="us-east-1")
    entry = N.event_entry(notice, source=N.event_source("ftl"), bus="default")
    assert entry["Source"] == "ftl.ftl" and entry["DetailType"] == "FTL Job Ended"
    assert entry["EventBusName"] == "default"
    detail = json.loads(entry["Detail"])
    assert {"team", "job_name", "template", "status", "requester", "dedup_id"} <= set(detail)
    huge = {**JOB, "final_metrics": {f"m{i}": "x" * 1000 for i in range(400)}}
    entry = N.event_entry(
        N.job_notice(N.ENDED, from_record(huge), "j/a", region="r"), source="ftl.x", bus="b"
    )
    detail = json.loads(entry["Detail"])
    assert detail["truncated"] is True and "final_metrics" not in detail
    assert len(entry["Detail"].encode()) < N.MAX_DETAIL_BYTES


def test_every_detail_type_is_a_valid_eventbridge_detail_type():
    for kind, detail_type in N.DETAIL_TYPES.items():
        assert re.fullmatch(r"[A-Za-z ]{1,128}", detail_type), kind


def test_the_start_and_a_chains_next_step_are_owed_by_the_write_that_made_them():
    before = {"job_name": "j", "status": "Queued", "revision": 3, "attempt": 1, "chain": [{}, {}]}
    started = plan(
        before,
        Change({"status": "InProgress", "status_source": "sagemaker"}),
        stamp="t",
        read=from_record,
    )
    assert started is not None
    assert started.changes[E.OWED] == {"started": "j/started"}
    assert started.changes["care"] == "care"
    assert E.owed(from_record(started.after)) == {"started": "j/started"}
    nxt = plan(started.after, Change(also={"attempt": 2}), stamp="t", read=from_record)
    assert nxt is not None
    assert nxt.changes[E.OWED] == {"started": "j/started", "chain-step-2": "j/chain-step-2"}
    # the end keeps what is still owed, and owes its effects after the notices
    ended = plan(
        nxt.after,
        Change({"status": "Failed", "status_source": "sagemaker"}),
        stamp="t",
        read=from_record,
    )
    assert ended is not None
    assert list(E.owed(from_record(ended.after))) == [
        "started",
        "chain-step-2",
        E.ANNOUNCE,
        E.REGISTER,
    ]


def test_a_chain_without_a_recorded_attempt_is_at_its_first():
    before = {"job_name": "j", "status": "Submitting", "revision": 1, "chain": [{}, {}]}
    moved = plan(before, Change(also={"attempt": 2}), stamp="t", read=from_record)
    assert moved is not None and E.owed(from_record(moved.after)) == {
        "chain-step-2": "j/chain-step-2"
    }


def test_a_job_seen_first_when_it_ended_owes_no_start():
    before = {"job_name": "j", "status": "Submitting", "revision": 1}
    ended = plan(
        before,
        Change({"status": "Completed", "status_source": "sagemaker"}),
        stamp="t",
        read=from_record,
    )
    assert ended is not None
    assert E.owed(from_record(ended.after)) == {E.ANNOUNCE: "j/announce", E.REGISTER: "j/register"}


def test_notice_keys():
    assert N.is_notice("started") and N.is_notice("chain-step-12")
    assert not N.is_notice(E.ANNOUNCE) and not N.is_notice("chain-step-0")
    keys = ["chain-step-10", "chain-step-2", "started"]
    assert sorted(keys, key=N.notice_order) == ["started", "chain-step-2", "chain-step-10"]


def test_budget_notice_and_its_mark():
    notice = N.budget_notice("nlp", "2026-11", 100, spend_usd=1000.0, budget_usd=1000.0)
    assert notice.dedup_id == "nlp/budget-2026-11-100"
    assert notice.attributes == {
        "event": "budget",
        "team": "nlp",
        "status": "budget-reached",
        "dedup_id": "nlp/budget-2026-11-100",
    }
    update = N.budget_sent_update("t", "nlp", "2026-11", 80)
    assert update["Key"] == {"pk": {"S": "usage#nlp"}}
    assert update["ExpressionAttributeValues"][":sent"] == {"L": [{"S": "2026-11-80"}]}


def test_thresholds_due():
    assert N.thresholds_due(79.99, 100, "m", []) == []
    assert N.thresholds_due(80, 100, "m", []) == [80]
    assert N.thresholds_due(150, 100, "m", []) == [80, 100]
    assert N.thresholds_due(150, 100, "m", ["m-80"]) == [100]
    assert N.thresholds_due(150, 100, "m", ["old-80", "old-100"]) == [80, 100]  # a new month
    assert N.thresholds_due(150, None, "m", []) == [] and N.thresholds_due(1, 0, "m", []) == []


@settings(max_examples=200, deadline=None)
@given(
    budget=st.floats(min_value=1, max_value=1e6, allow_nan=False),
    costs=st.lists(st.floats(min_value=0, max_value=1e5, allow_nan=False), max_size=30),
    failures=st.lists(st.booleans(), max_size=30),
)
def test_each_threshold_is_sent_exactly_once_a_month_whatever_the_spends_and_failures(
    budget, costs, failures
):
    """Spend only grows in a month; a send that fails lists nothing and is due again at the
    next spend: every threshold reached is sent, and listed, exactly once."""
    sent: list[str] = []
    delivered: list[int] = []
    spend = 0.0
    for i, cost in enumerate([*costs, 0.0]):  # a last write with nothing failing
        spend += cost
        fail = i < len(failures) and failures[i] and i < len(costs)
        for percent in N.thresholds_due(spend, budget, "m", sent):
            if fail:
                break
            delivered.append(percent)
            sent.append(f"m-{percent}")
    reached = [p for p in N.BUDGET_THRESHOLDS if spend >= budget * p / 100 - 1e-9]
    assert delivered == reached


def test_a_notice_key_is_read_from_its_row_and_an_unknown_one_is_refused():
    """Issue 35: before, any key that was not ``started`` was taken for a chain step."""
    assert N.notice_kind("started") == N.STARTED
    assert N.notice_kind("chain-step-3") == N.CHAIN_STEP
    assert N.notice_kind("evaluated") == N.EVALUATED  # issue 36
    order = ["evaluated", "chain-step-10", "chain-step-2", "started"]
    assert sorted(order, key=N.notice_order) == [
        "started",
        "chain-step-2",
        "chain-step-10",
        "evaluated",
    ]
    for key in ("reviewed", "chain-step-0", "announce"):
        assert not N.is_notice(key)
        with pytest.raises(ValueError, match="not a job notice"):
            N.notice_kind(key)
