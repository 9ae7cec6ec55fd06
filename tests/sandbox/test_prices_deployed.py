"""Prices from the AWS Price List API, as deployed (issue 18, point 12; README, Prices).

The session's platform has no ``ftl:prices``, so before a refresh every estimate is unknown.
The deployed price-refresh function runs on the CloudFormation event that follows a deploy
(delivered here by the sandbox's event pump to the rules deployed into moto), reads the
sandbox's Price List stand-in (``sandbox/pricing.py``, the API's response shape) and records
the prices with their date and source in the ledger; the trigger then estimates with them.
"""

from __future__ import annotations

import json

from sandbox.event_pump import EventPump
from sandbox.pricing import SAMPLE_PRICES, refresh_after_deploy, stack_complete_event

REGION = "us-east-1"


def _dry_run(deployed) -> dict:
    body = {"template": "distilbert-spot", "job_name": "priced", "dry_run": True}
    reply = deployed.client("lambda").invoke(
        FunctionName=deployed.output("TriggerFunctionName"), Payload=json.dumps(body).encode()
    )
    return json.loads(reply["Payload"].read())


def test_a_deploy_refreshes_prices_from_the_price_list_and_estimates_use_them(deployed):
    # distilbert-spot: one ml.g5.xlarge (ftl templates)
    before = _dry_run(deployed)
    assert before["estimated_max_cost_usd"] is None, before
    assert "Price List" in before["estimate_unknown_reason"]

    stack_id = deployed.client("cloudformation").describe_stacks(StackName="ftl-launcher")[
        "Stacks"
    ][0]["StackId"]
    pump = EventPump(deployed.sandbox.batch, deployed.endpoint)
    assert pump.deliver(stack_complete_event(stack_id, "UPDATE_IN_PROGRESS")) == []
    deliveries = refresh_after_deploy(deployed.sandbox, "ftl-launcher")
    assert len(deliveries) == 1 and not deliveries[0].error, deliveries
    assert deliveries[0].response == {"written": True, "products": 3, "prices": 3}
    assert "PriceRefresh" in deliveries[0].target

    item = deployed.client("dynamodb").get_item(
        TableName=deployed.output("JobTableName"), Key={"pk": {"S": f"prices#{REGION}"}}
    )["Item"]
    assert json.loads(item["prices"]["S"]) == SAMPLE_PRICES[REGION]
    assert "pricing:GetProducts" in item["source"]["S"]
    assert item["refreshed_at"]["S"].endswith("Z")
    (request, *_) = deployed.sandbox.pricing.requests
    assert request["ServiceCode"] == "AmazonSageMaker"

    after = _dry_run(deployed)
    price = SAMPLE_PRICES[REGION]["ml.g5.xlarge"]
    (check,) = [c for c in after["checks"] if c["check"] == "price"]
    assert check == {"check": "price", "ok": True, "price_usd_per_hour": price}
    runtime = after["create_training_job"]["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert after["estimated_max_cost_usd"] == round(price * runtime / 3600, 4)
