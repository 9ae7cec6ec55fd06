"""ftl:trainingPlans: a bad value fails synth naming the key (issue 20)."""

from __future__ import annotations

import json

import pytest

from ftl_constructs.settings import ContextError, PlatformSettings

PLAN = {
    "name": "p",
    "arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p",
    "instanceType": "ml.g5.xlarge",
    "instanceCount": 1,
    "start": "2026-01-01T00:00Z",
    "end": "2026-02-01T00:00Z",
    "templates": ["distilbert-chain"],
}


def test_plans_are_read_from_context_and_from_json_text() -> None:
    settings = PlatformSettings.from_mapping({"trainingPlans": [PLAN]})
    assert settings.capacity.plans[0].arn == PLAN["arn"]
    again = PlatformSettings.from_mapping({"trainingPlans": json.dumps([PLAN])})
    assert again.capacity == settings.capacity


@pytest.mark.parametrize(
    ("plan", "key"),
    [
        ({**PLAN, "end": "2025-01-01T00:00Z"}, "ftl:trainingPlans[0].end"),
        ({**PLAN, "teams": ["nlp"]}, "ftl:trainingPlans[0].teams"),
        ({**PLAN, "instanceCount": "2"}, "ftl:trainingPlans[0].instanceCount"),
    ],
)
def test_a_bad_plan_names_the_key(plan: dict, key: str) -> None:
    with pytest.raises(ContextError) as info:
        PlatformSettings.from_mapping({"trainingPlans": [plan]})
    assert f"'{key}'" in str(info.value)
