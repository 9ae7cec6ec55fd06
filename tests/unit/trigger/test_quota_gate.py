"""Quota-aware submit (docs/API.md, "Service quotas"): the trigger reads the account's
SageMaker quotas and refuses a job that can never start, or leaves out the chain steps whose
quota is short; a failed read never blocks a submit."""

from __future__ import annotations

import uuid

import botocore.session
import pytest
from botocore.stub import Stubber

from ftl_trigger.quotas import CACHE_SECONDS, RETRY_SECONDS, LiveQuotas
from jobmodel.capacity.service_quotas import quota_name
from tests.lambda_support import client, create_ledger_table, load_handler, trigger_env
from tests.unit.trigger.conftest import TRIGGER_DIR, Launcher


def _entry(name: str, value: float, code: str = "L-1") -> dict:
    return {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": code, "Value": value}


def _stubbed():
    sq = botocore.session.get_session().create_client(
        "service-quotas",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    return sq, Stubber(sq)


def test_reads_every_page_and_keeps_the_answer_for_a_while():
    sq, stub = _stubbed()
    g5 = quota_name("ml.g5.xlarge", spot=False)
    p4d = quota_name("ml.p4d.24xlarge", spot=True)
    first = {"ServiceCode": "sagemaker", "MaxResults": 100}
    stub.add_response("list_service_quotas", {"Quotas": [_entry(g5, 2)], "NextToken": "t"}, first)
    stub.add_response(
        "list_service_quotas", {"Quotas": [_entry(p4d, 0, "L-2")]}, {**first, "NextToken": "t"}
    )
    stub.add_response("list_service_quotas", {"Quotas": [_entry(g5, 5)]}, first)
    now = [0.0]
    live = LiveQuotas(lambda: sq, clock=lambda: now[0])
    with stub:
        quotas, why = live.current()
        assert why is None and quotas is not None
        assert quotas.quota("ml.g5.xlarge", spot=False).value == 2
        assert quotas.quota("ml.p4d.24xlarge", spot=True).code == "L-2"
        now[0] = CACHE_SECONDS - 1
        assert live.current()[0] is quotas  # no call: the stub has one answer left
        now[0] = CACHE_SECONDS + 1
        assert live.current()[0].quota("ml.g5.xlarge", spot=False).value == 5
        stub.assert_no_pending_responses()


def test_a_failed_read_is_skipped_and_retried_later():
    sq, stub = _stubbed()
    now = [0.0]
    live = LiveQuotas(lambda: sq, clock=lambda: now[0])
    stub.add_client_error("list_service_quotas", "AccessDeniedException", "no", 400)
    stub.add_response("list_service_quotas", {"Quotas": []})
    with stub:
        quotas, why = live.current()
        assert quotas is None and "AccessDeniedException" in why
        now[0] = RETRY_SECONDS - 1
        assert live.current() == (None, why)  # remembered: no second call yet
        now[0] = RETRY_SECONDS + 1
        assert live.current()[0] is not None
        stub.assert_no_pending_responses()


def test_endless_pages_are_an_error_not_a_hang():
    class Endless:
        calls = 0

        def list_service_quotas(self, **params):
            self.calls += 1
            return {"Quotas": [], "NextToken": "again"}

    endless = Endless()
    quotas, why = LiveQuotas(lambda: endless).current()
    assert quotas is None and "pages" in why and endless.calls == 50


@pytest.fixture
def quotas(batch_sandbox):
    """The sandbox's Service Quotas stand-in, its values restored after the test."""
    standin = batch_sandbox.quotas
    saved = dict(standin.values)
    yield standin
    standin.values.clear()
    standin.values.update(saved)
    standin.deny = False


@pytest.fixture
def launcher(batch_sandbox, monkeypatch, tmp_path) -> Launcher:
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", batch_sandbox.endpoint), table)
    env = trigger_env(batch_sandbox.endpoint, tmp_path, table=table)
    module = load_handler(TRIGGER_DIR, monkeypatch, env)
    return Launcher(module, batch_sandbox.endpoint, table)


def _refused(answer: dict, field: str) -> str:
    assert answer["error"]["type"] == "ValidationError", answer
    assert answer["error"]["field"] == field, answer
    return answer["error"]["message"]


def test_a_type_whose_quota_is_zero_is_refused_and_nothing_is_written(launcher, quotas):
    quotas.set("ml.g5.xlarge", spot=0)
    token = uuid.uuid4().hex[:12]
    request = {
        "template": "distilbert-spot",
        "instance_type": "ml.g5.xlarge",
        "client_token": token,
    }
    message = _refused(launcher(request), "instance_type")
    assert "'ml.g5.xlarge for spot training job usage'" in message and "is 0" in message
    assert "request-service-quota-increase --service-code sagemaker" in message
    assert launcher.ledger_items() == []  # no job, no token, no usage
    dry = _refused(launcher({**request, "dry_run": True}), "instance_type")
    assert dry == message
    # On-demand has its own quota: the same type without spot starts.
    assert launcher({**request, "spot": False})["status"] == "InProgress"


def test_more_instances_than_the_quota_is_refused_on_instance_count(launcher, quotas):
    quotas.set("ml.p4d.24xlarge", spot=3)
    request = {"template": "bert-large-qa", "instance_type": "ml.p4d.24xlarge"}
    message = _refused(launcher({**request, "instance_count": 4}), "instance_count")
    assert "4 x ml.p4d.24xlarge (spot)" in message and "is 3" in message
    assert launcher.ledger_items() == []
    dry = launcher({**request, "instance_count": 3, "dry_run": True})
    (check,) = [c for c in dry["checks"] if c["check"] == "service_quota"]
    assert check == {
        "check": "service_quota",
        "ok": True,
        "quota_name": "ml.p4d.24xlarge for spot training job usage",
        "quota_value": 3.0,
    }


def test_an_unreadable_quota_skips_the_check_and_the_dry_run_says_so(launcher, quotas):
    quotas.set("ml.g5.xlarge", spot=0)
    quotas.deny = True
    request = {"template": "distilbert-spot", "instance_type": "ml.g5.xlarge"}
    dry = launcher({**request, "dry_run": True})
    (check,) = [c for c in dry["checks"] if c["check"] == "service_quota"]
    assert check["ok"] is True and "could not be read" in check["skipped"]
    assert "AccessDeniedException" in check["skipped"]
    assert launcher(request)["status"] == "InProgress"


def test_a_chain_leaves_out_the_steps_and_types_whose_quota_is_short(launcher, quotas):
    quotas.set("ml.g5.xlarge", spot=0)
    quotas.set("ml.g6.xlarge", on_demand=0)
    request = {"template": "distilbert-chain", "instance_type": "ml.g5.xlarge"}
    dry = launcher({**request, "dry_run": True})
    assert [s["kind"] for s in dry["capacity_chain"]] == ["on-demand"]
    assert dry["capacity_chain"][0]["instance_types"] == ["ml.g5.xlarge", "ml.g5.2xlarge"]
    assert set(dry["capacity_chain"][0]["prices"]) == {"ml.g5.xlarge", "ml.g5.2xlarge"}
    skipped = " | ".join(dry["capacity_skipped"])
    assert "spot ml.g5.xlarge:" in skipped and "on-demand ml.g6.xlarge:" in skipped
    (check,) = [c for c in dry["checks"] if c["check"] == "service_quota"]
    assert {s["quota_name"] for s in check["shortfalls"]} == {
        "ml.g5.xlarge for spot training job usage",
        "ml.g6.xlarge for training job usage",
    }
    job = launcher(request)
    assert job["status"] == "InProgress", job
    assert job["instance_type"] == "ml.g5.xlarge" and job["spot"] is False


def test_a_chain_with_no_step_left_is_refused(launcher, quotas):
    for itype in ("ml.g5.xlarge", "ml.g5.2xlarge", "ml.g6.xlarge"):
        quotas.set(itype, on_demand=0, spot=0)
    request = {"template": "distilbert-chain", "instance_type": "ml.g5.xlarge"}
    message = _refused(launcher(request), "instance_type")
    assert message.startswith("no step of the capacity chain is within the account's")
    assert "ml.g6.xlarge for training job usage" in message
    assert launcher.ledger_items() == []


def test_the_stand_in_refuses_another_service_and_bad_input(batch_sandbox):
    from botocore.exceptions import ClientError, ParamValidationError

    sq = client("service-quotas", batch_sandbox.endpoint)
    with pytest.raises(ClientError, match="NoSuchResourceException"):
        sq.list_service_quotas(ServiceCode="ec2")
    with pytest.raises(ParamValidationError):
        sq.list_service_quotas(ServiceCode="sagemaker", MaxResults=0)


def test_the_stand_in_answers_in_the_apis_output_shape_page_by_page():
    from botocore.validate import validate_parameters

    from sandbox.service_quotas import ServiceQuotasStandIn

    model = botocore.session.get_session().get_service_model("service-quotas")
    shape = model.operation_model("ListServiceQuotas").output_shape
    standin = ServiceQuotasStandIn()
    names, token = [], None
    while True:
        request = {"ServiceCode": "sagemaker", "MaxResults": 7}
        if token:
            request["NextToken"] = token
        page = standin.list_service_quotas(request, "eu-west-1")
        validate_parameters(page, shape)  # raises on a field or type the API does not have
        names += [q["QuotaName"] for q in page["Quotas"]]
        token = page.get("NextToken")
        if not token:
            break
    assert len(names) == len(set(names)) == len(standin.values) > 7
    assert standin.values[quota_name("ml.p5.48xlarge", spot=False)] == 0
    assert standin.values[quota_name("ml.g5.xlarge", spot=True)] == 16
    assert page["Quotas"][0]["QuotaArn"].startswith("arn:aws:servicequotas:eu-west-1:")
