"""The deployed launcher, end to end: the deployed trigger code with the deployed settings
starts a job from every shipped template through both doors, and the jobs read back."""

from __future__ import annotations

import json

import pytest

import image_sets
from sandbox.runner import DeployedFunction
from tests.expected import SHIPPED_TEMPLATES
from tests.lambda_support import http_event


@pytest.fixture(scope="module")
def trigger(deployed):
    return DeployedFunction(deployed.endpoint, deployed.output("TriggerFunctionName"))


def test_deployed_configuration_points_at_the_deployed_resources(deployed, trigger):
    env = trigger.environment
    assert env["FTL_DATA_BUCKET"] == deployed.output("DataBucketName")
    assert env["FTL_ROLE_ARN"] == deployed.output("TrainingRoleArn")
    assert env["FTL_JOB_TABLE"] == deployed.output("JobTableName")
    assert env["FTL_SOURCE_S3_URI"].startswith("s3://cdk-hnb659fds-assets-")
    source = env["FTL_SOURCE_S3_URI"][5:].split("/", 1)
    head = deployed.client("s3").head_object(Bucket=source[0], Key=source[1])
    assert head["ContentLength"] > 0, "the training source archive was uploaded"


def test_templates_are_the_shipped_catalog_with_resolved_images(trigger):
    assert [t["name"] for t in trigger({"action": "templates"})["templates"]] == SHIPPED_TEMPLATES
    specs = trigger.module.RUNTIME.catalog
    # Hugging Face DLCs come from AWS's DLC account; the SMP v2 image from its own account.
    accounts = {"huggingface": "763104351884", "pytorch-smp": "658645717510"}
    for spec in specs.values():
        account = accounts[spec.framework.get("image_family", "huggingface")]
        assert spec.image_uri.startswith(f"{account}.dkr.ecr.us-east-1.amazonaws.com/")
        # synth put the image's ENTRYPOINT on it: jobs start under the platform's init
        assert spec.image_entrypoint == image_sets.for_uri(spec.image_uri).entrypoint


@pytest.mark.parametrize("template", SHIPPED_TEMPLATES)
def test_every_shipped_template_starts_a_job_that_reads_back(deployed, trigger, template):
    resp = trigger(
        {
            "template": template,
            "job_name": f"sbx-{template}"[:40],
            "client_token": f"sandbox-{template}",
            "tags": {"team": "nlp"},
        }
    )
    assert "error" not in resp, resp
    sm = deployed.client("sagemaker")
    job = sm.describe_training_job(TrainingJobName=resp["job_name"])
    assert job["EnableManagedSpotTraining"] is True
    assert job["RoleArn"] == deployed.output("TrainingRoleArn")
    bucket = deployed.output("CheckpointBucketName")
    assert job["CheckpointConfig"]["S3Uri"] == f"s3://{bucket}/{resp['job_name']}/"
    assert job["OutputDataConfig"]["KmsKeyId"] == deployed.output("PlatformKeyArn")
    assert job["HyperParameters"]["sagemaker_submit_directory"] == json.dumps(
        trigger.environment["FTL_SOURCE_S3_URI"]
    )
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=job["TrainingJobArn"])["Tags"]}
    assert tags["ftl:platform"] == "ftl" and tags["team"] == "nlp"
    ledger = deployed.client("dynamodb").get_item(
        TableName=deployed.output("JobTableName"), Key={"pk": {"S": f"job#{resp['job_name']}"}}
    )["Item"]
    assert ledger["status"]["S"] == "InProgress"


def test_http_door_submit_describe_list(deployed, trigger):
    """The HTTP API's integration invokes the ``http`` alias (docs/API.md, Doors)."""
    resp = trigger(
        http_event("POST", "/jobs", {"template": "distilbert-spot", "job_name": "sbx-http"}),
        alias="http",
    )
    assert resp["statusCode"] == 201, resp
    name = json.loads(resp["body"])["job_name"]
    described = json.loads(trigger(http_event("GET", f"/jobs/{name}"), alias="http")["body"])
    assert described["requested_by"].endswith(":user/data-scientist")
    listed = json.loads(trigger(http_event("GET", "/jobs"), alias="http")["body"])["jobs"]
    assert name in [j["job_name"] for j in listed]
    forged = trigger(http_event("POST", "/jobs", {"template": "distilbert-spot"}))
    assert forged["error"]["field"] == "request"  # an HTTP event on the direct door


def test_bad_request_through_the_deployed_code_leaves_nothing(deployed, trigger):
    table = deployed.output("JobTableName")
    before = deployed.client("dynamodb").scan(TableName=table)["Count"]
    resp = trigger({"template": "bert-large-qa", "instance_count": 40})
    assert resp["error"]["field"] == "instance_count"
    assert deployed.client("dynamodb").scan(TableName=table)["Count"] == before


def test_deployed_job_events_handler_updates_the_ledger(deployed, trigger):
    name = trigger({"template": "distilbert-spot", "job_name": "sbx-events"})["job_name"]
    fn_name = next(
        f["FunctionName"]
        for f in deployed.client("lambda").list_functions()["Functions"]
        if "JobEventsHandler" in f["FunctionName"]
    )
    handler = DeployedFunction(deployed.endpoint, fn_name)
    result = handler(
        {
            "source": "aws.sagemaker",
            "detail-type": "SageMaker Training Job State Change",
            "detail": {
                "TrainingJobName": name,
                "TrainingJobStatus": "Completed",
                "EnableManagedSpotTraining": True,
                "BillableTimeInSeconds": 300,
                "TrainingTimeInSeconds": 1000,
            },
        }
    )
    assert result["updated"] is True and result["spot_savings_percent"] == 70.0
    described = trigger({"action": "describe", "job_name": name})
    assert described["status"] == "Completed" and described["spot_savings_percent"] == 70.0


def test_lambda_invoke_door_runs_the_deployed_function(deployed):
    lam = deployed.client("lambda")
    reply = lam.invoke(
        FunctionName=deployed.output("TriggerFunctionName"),
        Payload=json.dumps({"template": "distilbert-spot", "job_name": "sbx-invoke"}).encode(),
    )
    job = json.loads(reply["Payload"].read())
    assert "FunctionError" not in reply and job["status"] == "InProgress", job
    reply = lam.invoke(
        FunctionName=deployed.output("TriggerFunctionName"),
        Payload=json.dumps({"template": "nope"}).encode(),
    )
    assert json.loads(reply["Payload"].read())["error"]["type"] == "NotFound"
