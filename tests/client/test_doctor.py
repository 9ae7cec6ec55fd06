"""``ftl doctor``'s checks (ftl_client.doctor_checks) and its before-deploy run on stubbed
AWS answers (each request checked against botocore's model by the Stubber)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import boto3
from botocore.stub import Stubber

from ftl_client import LauncherClient, doctor
from ftl_client import doctor_checks as D
from ftl_client.cli import main
from jobmodel.capacity import service_quotas as SQ
from jobmodel.templates.catalog import shipped_catalog

REGION = "us-east-1"


def _quotas(values: dict[tuple[str, bool], float]) -> SQ.AccountQuotas:
    return SQ.AccountQuotas.from_entries(
        {"QuotaName": SQ.quota_name(t, spot=s), "QuotaCode": f"L-{i}", "Value": v}
        for i, ((t, s), v) in enumerate(values.items())
    )


def _template(**kw):
    base = {
        "name": "t",
        "instance_types": ["ml.p4d.24xlarge"],
        "default_instance_type": "ml.p4d.24xlarge",
        "default_instance_count": 2,
        "max_instance_count": 8,
        "spot": True,
        "capacity_chain": [],
    }
    return {**base, **kw}


def test_a_default_job_that_can_never_start_blocks_and_says_what_to_request():
    needs = D.catalog_needs([_template()])
    assert set(needs) == {("ml.p4d.24xlarge", False), ("ml.p4d.24xlarge", True)}
    quotas = _quotas({("ml.p4d.24xlarge", True): 1, ("ml.p4d.24xlarge", False): 4})
    found = {f.subject: f for f in D.quota_findings(needs, quotas)}
    spot, on_demand = found["ml.p4d.24xlarge spot"], found["ml.p4d.24xlarge on-demand"]
    assert spot.status == D.BLOCK and on_demand.status == D.WARN  # the default kind is spot
    assert "--quota-code L-0 --desired-value 8" in spot.action
    assert spot.to_dict()["quota_name"] == "ml.p4d.24xlarge for spot training job usage"
    assert D.exit_status(found.values()) == 4
    enough = _quotas({("ml.p4d.24xlarge", True): 8, ("ml.p4d.24xlarge", False): 8})
    assert {f.status for f in D.quota_findings(needs, enough)} == {D.OK}


def test_a_chain_or_another_type_only_warns_and_unlisted_quotas_warn():
    chain = _template(capacity_chain=["spot", "on-demand"])
    other = _template(name="u", default_instance_type="ml.g5.xlarge")
    for t in (chain, other):
        findings = D.quota_findings(D.catalog_needs([t]), _quotas({}))
        assert {f.status for f in findings} == {D.WARN}
        zero = _quotas({("ml.p4d.24xlarge", True): 0, ("ml.p4d.24xlarge", False): 0})
        assert D.BLOCK not in {f.status for f in D.quota_findings(D.catalog_needs([t]), zero)}


def test_regions_images_and_the_service_linked_role():
    smp = {"name": "s", "framework": {"image_family": "pytorch-smp"}}
    hf = {"name": "h", "framework": {}}
    found = {f.subject: f.status for f in D.region_findings("af-south-1", [smp, hf], queue=None)}
    assert found == {"sagemaker": D.OK, "batch (queue mode)": D.OK, "s": D.BLOCK, "h": D.OK}
    found = {f.subject: f.status for f in D.region_findings("xx-nowhere-1", [], queue=True)}
    assert found == {"sagemaker": D.BLOCK, "batch (queue mode)": D.BLOCK}
    assert D.slr_finding(False, None, queue=True).status == D.BLOCK
    absent = D.slr_finding(False, None, queue=None)
    assert absent.status == D.WARN and "iam:CreateServiceLinkedRole" in absent.action
    assert "sagemaker-queuing.batch.amazonaws.com" in absent.action
    assert D.slr_finding(None, "AccessDenied", queue=None).status == D.UNKNOWN
    assert D.exit_status([D.slr_finding(None, "x", queue=None)]) == 1
    assert D.exit_status([D.slr_finding(True, None, queue=None)]) == 0


def _stubbed(service):
    c = boto3.client(service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    return c, Stubber(c)


PARAMETER = "/cdk-bootstrap/hnb659fds/version"  # cdk.json sets no qualifier: the CDK's default


def _parameter(value):
    return {"Parameter": {"Name": PARAMETER, "Type": "String", "Value": value, "Version": 1}}


def _identity():
    sts, stub = _stubbed("sts")
    answer = {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/u", "UserId": "U"}
    stub.add_response("get_caller_identity", answer, {})
    return sts, stub


def _bootstrap(ssm_answer):
    """doctor's bootstrap finding for one stubbed GetParameter answer."""
    sts, sts_stub = _identity()
    ssm, ssm_stub = _stubbed("ssm")
    if isinstance(ssm_answer, str):
        ssm_stub.add_client_error(
            "get_parameter", ssm_answer, "no", 400, expected_params={"Name": PARAMETER}
        )
    else:
        ssm_stub.add_response("get_parameter", ssm_answer, {"Name": PARAMETER})
    client = LauncherClient(region=REGION, clients={"sts": sts, "ssm": ssm})
    with sts_stub, ssm_stub:
        finding = doctor._bootstrap(client, REGION)
    ssm_stub.assert_no_pending_responses()
    return finding


def test_an_account_not_bootstrapped_or_bootstrapped_too_old_blocks_with_the_command():
    command = "npx cdk bootstrap aws://123456789012/us-east-1"
    absent = _bootstrap("ParameterNotFound")
    assert absent.status == D.BLOCK and absent.action == command
    assert f"no {PARAMETER}" in absent.message
    old = _bootstrap(_parameter("5"))
    assert old.status == D.BLOCK and old.action == command
    assert "older than the 6 the stacks require" in old.message
    assert D.exit_status([old]) == 4
    assert _bootstrap(_parameter("6")).status == D.OK
    denied = _bootstrap("AccessDeniedException")
    assert denied.status == D.UNKNOWN
    assert "ssm:GetParameter: AccessDeniedException" in denied.message


def test_the_qualifier_comes_from_cdk_json_else_the_default(tmp_path):
    cdk_json = tmp_path / "cdk.json"
    assert doctor.qualifier(cdk_json) == "hnb659fds"  # no file
    cdk_json.write_text(json.dumps({"context": {"@aws-cdk/core:bootstrapQualifier": "ftl123"}}))
    assert doctor.qualifier(cdk_json) == "ftl123"
    cdk_json.write_text("{not json")
    assert doctor.qualifier(cdk_json) == "hnb659fds"


def test_before_deploy_the_shipped_catalog_is_checked_and_p5_blocks():
    cfn, cfn_stub = _stubbed("cloudformation")
    sq, sq_stub = _stubbed("service-quotas")
    iam, iam_stub = _stubbed("iam")
    cfn_stub.add_client_error(
        "describe_stacks", "ValidationError", "Stack with id ftl-launcher does not exist"
    )
    types = {t for s in shipped_catalog().values() for t in s.instance_types}
    entries = [
        {"QuotaName": SQ.quota_name(t, spot=s), "QuotaCode": f"L-{i}{s:d}", "Value": 64.0}
        for i, t in enumerate(sorted(types))
        for s in (False, True)
        if (t, s) not in (("ml.p5.48xlarge", False), ("ml.p4d.24xlarge", True))
    ]
    for t, s, code in (("ml.p5.48xlarge", False, "L-P5"), ("ml.p4d.24xlarge", True, "L-P4S")):
        entries.append({"QuotaName": SQ.quota_name(t, spot=s), "QuotaCode": code, "Value": 0})
    first = {"ServiceCode": "sagemaker", "MaxResults": 100}
    sq_stub.add_response("list_service_quotas", {"Quotas": entries[:5], "NextToken": "n"}, first)
    sq_stub.add_response(
        "list_service_quotas", {"Quotas": entries[5:]}, {**first, "NextToken": "n"}
    )
    iam_stub.add_client_error("get_role", "NoSuchEntity", "no", 404)
    sts, sts_stub = _identity()
    ssm, ssm_stub = _stubbed("ssm")
    ssm_stub.add_response("get_parameter", _parameter("30"), {"Name": PARAMETER})
    clients = {"cloudformation": cfn, "service-quotas": sq, "iam": iam, "sts": sts, "ssm": ssm}
    client = LauncherClient(region=REGION, clients=clients)
    out = io.StringIO()
    with cfn_stub, sq_stub, iam_stub, sts_stub, ssm_stub, redirect_stdout(out):
        status = main(["doctor", "--json"], client=client)
    report = json.loads(out.getvalue())
    assert status == report["exit_status"] == 4 and report["deployed"] is False
    # p4d is the default type of spot templates: their default job can never start.
    blocking = [f for f in report["findings"] if f["status"] == "block"]
    assert [f["subject"] for f in blocking] == ["ml.p4d.24xlarge spot"]
    assert "--quota-code L-P4S --desired-value 16" in blocking[0]["action"]
    # p5 is no template's default type: a warning, with what to request.
    (p5,) = [f for f in report["findings"] if f["subject"] == "ml.p5.48xlarge on-demand"]
    assert p5["status"] == "warn" and p5["templates"] == ["llm-sft", "llm-sft-fsdp", "llm-smp-v2"]
    assert "--quota-code L-P5" in p5["action"]
    checks = {f["check"] for f in report["findings"]}
    assert checks >= {"deployment", "region", "image", "quota", "service-linked role", "price"}
    (boot,) = [f for f in report["findings"] if f["check"] == "bootstrap"]
    assert boot["status"] == "ok" and boot["version"] == "30" and boot["minimum"] == 6
