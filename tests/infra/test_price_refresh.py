"""The price-refresh function as synthesized (issue 18, point 12): what runs it, what it may do."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from tests.infra.synth import template


@pytest.fixture(scope="module")
def launcher():
    return template("launcher")


def _function(t) -> str:
    (logical,) = [
        k for k in t.find_resources("AWS::Lambda::Function") if k.startswith("PriceRefreshHandler")
    ]
    return logical


def test_it_runs_daily_and_after_each_deploy_of_its_own_stack(launcher):
    fn = _function(launcher)
    rules = launcher.find_resources("AWS::Events::Rule")
    targeted = {
        k: r["Properties"]
        for k, r in rules.items()
        if any(t["Arn"] == {"Fn::GetAtt": [fn, "Arn"]} for t in r["Properties"]["Targets"])
    }
    assert {p.get("ScheduleExpression") for p in targeted.values()} == {"rate(1 day)", None}
    (deploy,) = [p["EventPattern"] for p in targeted.values() if "EventPattern" in p]
    assert deploy["source"] == ["aws.cloudformation"]
    assert deploy["detail-type"] == ["CloudFormation Stack Status Change"]
    assert deploy["detail"]["stack-id"] == [{"Ref": "AWS::StackId"}]
    assert deploy["detail"]["status-details"]["status"] == ["CREATE_COMPLETE", "UPDATE_COMPLETE"]


def test_it_reads_the_price_list_and_writes_only_the_prices_item(launcher):
    launcher.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "pricing:GetProducts",
                                "Resource": "*",
                                "Sid": "ReadPriceList",
                            }
                        ),
                        Match.object_like(
                            {
                                "Action": "dynamodb:PutItem",
                                "Sid": "WritePricesItem",
                                "Condition": {
                                    "ForAllValues:StringEquals": {
                                        "dynamodb:LeadingKeys": ["prices#us-east-1"]
                                    },
                                    "Null": {"dynamodb:LeadingKeys": "false"},
                                },
                            }
                        ),
                    ]
                )
            }
        },
    )
