"""Synthesize the platform the way app.py does (cdk-nag included) for assertion tests."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import aws_cdk as cdk
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from stacks.assembly import build_platform

ROOT = Path(__file__).resolve().parents[2]
BASE_CONTEXT = json.loads((ROOT / "cdk.json").read_text())["context"]

EXISTING_VPC = {
    "vpcId": "vpc-0123abcd",
    "availabilityZones": ["us-east-1a", "us-east-1b"],
    "privateSubnetIds": ["subnet-0aaa1111", "subnet-0bbb2222"],
    "routeTableIds": ["rtb-0aaa1111", "rtb-0bbb2222"],
}


def synth(**context: object) -> tuple[cdk.App, dict[str, cdk.Stack]]:
    app = cdk.App(
        context={**BASE_CONTEXT, "ftl:account": "123456789012", **context},
        builtin_cloud_formation_validation=False,  # as app.py: cfn-lint is the gate
    )
    stacks = build_platform(app)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stacks


@cache
def templates(context_json: str = "{}") -> dict[str, Template]:
    """Templates per stack for a context (cached: synth is the slow part of these tests)."""
    _, stacks = synth(**json.loads(context_json))
    return {name: Template.from_stack(stack) for name, stack in stacks.items()}


def template(stack: str, **context: object) -> Template:
    return templates(json.dumps(context, sort_keys=True))[stack]


# Two teams (one with an extra input bucket and limits) and an admin: the teams-mode fixture.
TEAMS_CONTEXT = {
    "ftl:teams": [
        {
            "name": "team-a",
            "principals": ["arn:aws:iam::123456789012:role/team-a-scientists"],
            "buckets": ["team-a-shared-corpus"],
            "limits": {"max_instances": 4, "monthly_budget_usd": 5000},
        },
        {"name": "team-b", "principals": ["arn:aws:iam::123456789012:role/team-b-*"]},
    ],
    "ftl:admins": ["arn:aws:iam::123456789012:role/platform-admin"],
    "ftl:prices": {"us-east-1": {"ml.p4d.24xlarge": 37.688}},
}

# Queue mode (ftl:scheduler=queue): single-team with every queue key set, and the teams
# fixture with a weighted team, as fair share and as quota share.
QUEUE_CONTEXT = {
    "ftl:scheduler": "queue",
    "ftl:queueCapacityInstances": 8,
    "ftl:queueHeadTimeoutMinutes": 30,
    "ftl:queueWaitAlarmMinutes": 45,
}
QUEUE_TEAMS_CONTEXT = {
    **TEAMS_CONTEXT,
    "ftl:teams": [{**TEAMS_CONTEXT["ftl:teams"][0], "weight": 2}, TEAMS_CONTEXT["ftl:teams"][1]],
    "ftl:scheduler": "queue",
}
QUOTA_TEAMS_CONTEXT = {
    **QUEUE_TEAMS_CONTEXT,
    "ftl:queueSharePolicy": "quotashare",
    "ftl:queueCapacityInstances": 12,
}
