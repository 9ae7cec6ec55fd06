"""The ledger (``ftl_trigger/ledger.py``) and its codec (``ftl_trigger/items.py``) against
moto's DynamoDB, and the contract errors it raises for DynamoDB failures (botocore's Stubber)."""

from __future__ import annotations

import math
import uuid

import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber
from hypothesis import given
from hypothesis import strategies as st

from ftl_ledger import items
from ftl_ledger.ledger import (
    REVISION,
    Ledger,
    LimitRace,
    MonthTurned,
    NameTaken,
    TokenTaken,
    token_pk,
)
from jobmodel.contract.errors import Throttled, UpstreamError
from jobmodel.money import limits as Q
from jobmodel.teams import TeamLimits
from tests.lambda_support import client, create_ledger_table

MONTH = "2026-11"


@pytest.fixture
def ledger(moto_endpoint) -> Ledger:
    table = f"ftl-ledger-{uuid.uuid4().hex[:8]}"
    ddb = client("dynamodb", moto_endpoint)
    create_ledger_table(ddb, table)
    return Ledger(ddb, table)


def _job(name: str, **values) -> dict:
    return {
        "job_name": name,
        "template": "distilbert-spot",
        "status": "Submitting",
        "instance_count": 2,
        "created_at": "2026-11-22T10:00:00.000Z",
        **values,
    }


def _usage(ledger: Ledger, team: str, month: str = MONTH) -> None:
    assert ledger.put_if_absent(Q.usage_item(ledger.table, team, month))


# ------------------------------------------------------------------------------ codec
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**15), 10**15)
    | st.floats(allow_nan=False, allow_infinity=False, width=32).filter(lambda f: f % 1 != 0)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(values)
def test_the_codec_round_trips_every_value_the_ledger_stores(value):
    assert items.decode(items.encode(value)) == value


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: "x"}, {"a"}, b"bytes", object()])
def test_the_codec_refuses_what_dynamodb_cannot_hold(bad):
    with pytest.raises((TypeError, ValueError)):
        items.encode(bad)


def test_items_leave_out_none_values():
    assert items.to_item({"a": 1, "b": None}) == {"a": {"N": "1"}}
    assert items.from_item({"m": {"M": {"f1": {"N": "0.5"}}}}) == {"m": {"f1": 0.5}}


def test_the_update_builder_sets_removes_and_adds():
    request = items.update_request(
        "t",
        "job#x",
        {"status": "Completed", "queue_reason": None},
        add={"revision": 1},
        condition="#s = :s",
        names={"#s": "status"},
        condition_values={":s": "InProgress"},
    )
    assert request["UpdateExpression"] == "SET #a0 = :v0 REMOVE #a1 ADD #n0 :n0"
    assert request["ExpressionAttributeNames"] == {
        "#s": "status",
        "#a0": "status",
        "#a1": "queue_reason",
        "#n0": "revision",
    }
    assert request["ExpressionAttributeValues"] == {
        ":s": {"S": "InProgress"},
        ":v0": {"S": "Completed"},
        ":n0": {"N": "1"},
    }
    with pytest.raises(ValueError, match="at least one attribute"):
        items.update_request("t", "job#x", {})


# ------------------------------------------------------------------------------ claim
def test_a_claim_writes_the_job_and_its_token_once(ledger):
    ledger.claim(_job("a-1"), {"client_token": "tok", "job_name": "a-1", "fingerprint": "f"})
    assert ledger.get_job("a-1")["status"] == "Submitting"
    assert ledger.get_token("tok")["job_name"] == "a-1"
    with pytest.raises(TokenTaken):
        ledger.claim(_job("a-2"), {"client_token": "tok", "job_name": "a-2", "fingerprint": "f"})
    with pytest.raises(NameTaken):
        ledger.claim(_job("a-1"), None)
    assert ledger.get_job("a-2") is None


def test_a_claim_over_the_teams_limit_is_a_limit_race(ledger):
    _usage(ledger, "nlp")
    limits = TeamLimits(max_instances=3)
    claim = Q.claim_update(ledger.table, "nlp", MONTH, limits, count=2, estimate=None)
    ledger.claim(_job("b-1", team="nlp"), None, claim)
    with pytest.raises(LimitRace):
        ledger.claim(_job("b-2", team="nlp"), None, claim)
    assert ledger.get_usage("nlp")["instances"] == 2 and ledger.get_job("b-2") is None


def test_the_teams_first_claim_creates_its_usage_item(ledger):
    limits = TeamLimits(max_instances=3, monthly_budget_usd=10)
    claim = Q.claim_update(ledger.table, "cv", MONTH, limits, count=2, estimate=4.0)
    assert ledger.get_usage("cv") is None
    ledger.claim(_job("f-1", team="cv"), None, claim)
    usage = ledger.get_usage("cv")
    assert (usage["month"], usage["team_usage"], usage["instances"]) == (MONTH, "cv", 2)
    assert (usage["reserved"], usage["committed"], usage["spend"]) == (4.0, 4.0, 0)
    with pytest.raises(LimitRace):  # the item exists now: its limits hold the second claim
        ledger.claim(_job("f-2", team="cv"), None, claim)


# ------------------------------------------------------------------------ job writes
def _at(revision=None, status="Submitting") -> dict:
    return {"status": status, REVISION: revision}


def test_every_write_counts_a_revision_over_the_status_and_revision_read(ledger):
    ledger.claim(_job("c-1"), None)
    assert REVISION not in ledger.get_job("c-1")
    assert ledger.write_job("c-1", {"status": "InProgress"}, expect=_at())
    assert not ledger.write_job("c-1", {"status": "Failed"}, expect=_at())  # stale read
    assert not ledger.write_job("c-1", {"status": "Failed"}, expect=_at(1))  # status moved on
    job = ledger.get_job("c-1")
    assert job["status"] == "InProgress" and job[REVISION] == 1
    assert ledger.write_job("c-1", {"status": "Failed"}, expect=_at(1, "InProgress"))
    assert not ledger.write_job("nope", {"status": "InProgress"}, expect=_at())


def test_a_write_removes_none_values(ledger):
    ledger.claim(_job("d-1", queue_reason="waiting for capacity"), None)
    changes = {"status": "InProgress", "queue_reason": None, "final_metrics": {"f1": 0.9}}
    assert ledger.write_job("d-1", changes, expect=_at())
    job = ledger.get_job("d-1")
    assert job["status"] == "InProgress" and "queue_reason" not in job
    assert job["final_metrics"] == {"f1": 0.9} and job[REVISION] == 1


def test_a_write_gives_usage_back_in_the_same_transaction(ledger):
    _usage(ledger, "nlp")
    ledger.update_if(
        Q.claim_update(ledger.table, "nlp", MONTH, TeamLimits(), count=2, estimate=10.0)
    )
    ledger.claim(_job("e-1", team="nlp"), None)
    release = Q.release_update(ledger.table, "nlp", MONTH, count=2, estimate=10.0, cost=4.0)
    done = {"status": "Completed", "usage_released": True}
    assert ledger.write_job("e-1", done, expect=_at(), usage=release)
    usage = ledger.get_usage("nlp")
    assert usage["instances"] == 0 and float(usage["spend"]) == 4.0
    # Stale read: neither the job nor the usage changes.
    assert not ledger.write_job("e-1", {"status": "Failed"}, expect=_at(), usage=release)
    assert ledger.get_usage("nlp")["instances"] == 0


def test_a_write_for_a_month_the_usage_has_left_is_month_turned(ledger):
    _usage(ledger, "nlp", month="2026-12")
    ledger.claim(_job("f-1", team="nlp"), None)
    release = Q.release_update(ledger.table, "nlp", MONTH, count=2, estimate=None, cost=None)
    with pytest.raises(MonthTurned):
        ledger.write_job("f-1", {"status": "Stopped"}, expect=_at(), usage=release)
    assert ledger.get_job("f-1")["status"] == "Submitting"


def test_a_failed_start_frees_the_token_and_gives_usage_back(ledger):
    _usage(ledger, "nlp")
    claim = Q.claim_update(ledger.table, "nlp", MONTH, TeamLimits(), count=2, estimate=None)
    token = {"client_token": "tok", "job_name": "g-1", "fingerprint": "f"}
    ledger.claim(_job("g-1", team="nlp"), token, claim)
    release = Q.release_update(ledger.table, "nlp", MONTH, count=2, estimate=None, cost=None)
    failed = {"status": "FailedToStart", "usage_released": True}
    freed = token_pk("tok", "nlp")
    assert ledger.write_job("g-1", failed, expect=_at(), usage=release, free_token=freed)
    job = ledger.get_job("g-1")
    assert job["status"] == "FailedToStart" and job["usage_released"] is True
    assert ledger.get_token("tok", "nlp") is None and ledger.get_usage("nlp")["instances"] == 0


def test_list_pages_newest_first(ledger):
    for i in range(3):
        ledger.claim(_job(f"i-{i}", created_at=f"2026-11-22T10:0{i}:00.000Z"), None)
    page, last = ledger.list_jobs(template=None, status=None, limit=2, start=None)
    assert [j["job_name"] for j in page] == ["i-2", "i-1"] and last
    rest, _ = ledger.list_jobs(template=None, status=None, limit=2, start=last)
    assert [j["job_name"] for j in rest] == ["i-0"]


# --------------------------------------------------------------------------- failures
RELEASE = Q.release_update("t", "nlp", MONTH, count=1, estimate=None, cost=None)


def _stubbed() -> tuple[Ledger, Stubber]:
    ddb = client("dynamodb", "http://localhost:9")
    return Ledger(ddb, "t"), Stubber(ddb)


@pytest.mark.parametrize(
    ("code", "error", "text"),
    [
        ("ProvisionedThroughputExceededException", Throttled, "throttled"),
        ("ThrottlingException", Throttled, "throttled"),
        ("InternalServerError", UpstreamError, "InternalServerError"),
        ("AccessDeniedException", UpstreamError, "AccessDeniedException"),
    ],
)
def test_dynamodb_failures_are_the_contracts_errors_naming_the_call(code, error, text):
    ledger, stub = _stubbed()
    stub.add_client_error("get_item", code, "injected")
    with stub, pytest.raises(error) as caught:
        ledger.get_job("x")
    assert "DynamoDB GetItem" in caught.value.message and text in caught.value.message


def test_a_throttled_transaction_is_throttled_not_a_lost_race():
    ledger, stub = _stubbed()
    stub.add_client_error(
        "transact_write_items",
        "TransactionCanceledException",
        "cancelled",
        response_meta={},
        modeled_fields={"CancellationReasons": [{"Code": "ThrottlingError"}, {"Code": "None"}]},
    )
    with stub, pytest.raises(Throttled, match="DynamoDB TransactWriteItems"):
        ledger.write_job("x", {"status": "Completed"}, expect=_at(1), usage=RELEASE)


def test_a_transaction_conflict_is_a_lost_race_to_retry():
    ledger, stub = _stubbed()
    stub.add_client_error(
        "transact_write_items",
        "TransactionCanceledException",
        "cancelled",
        modeled_fields={"CancellationReasons": [{"Code": "TransactionConflict"}, {"Code": "None"}]},
    )
    with stub:
        assert not ledger.write_job("x", {"status": "Completed"}, expect=_at(1), usage=RELEASE)


def test_an_unreachable_dynamodb_is_an_upstream_error():
    class Down:
        def get_item(self, **_):
            raise EndpointConnectionError(endpoint_url="https://dynamodb")

    with pytest.raises(UpstreamError, match="DynamoDB GetItem failed: EndpointConnectionError"):
        Ledger(Down(), "t").get_job("x")
