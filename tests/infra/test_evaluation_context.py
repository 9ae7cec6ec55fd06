"""ftl:evaluation (issue 36): a team's additions to the evaluation policies are checked at
synth against the teams and the catalog, and a bad one fails naming its key."""

from __future__ import annotations

import json

import pytest

from ftl_constructs.settings import ContextError, PlatformSettings
from tests.infra.synth import TEAMS_CONTEXT, synth

GOLDEN = {"golden_sets": [{"name": "support", "prefix": "golden/support/"}]}


def test_the_value_is_read_from_cdk_json_or_the_command_line():
    value = {"team-a": {"llm-lora": GOLDEN}}
    assert PlatformSettings.from_mapping({"evaluation": value}).evaluation == value
    text = PlatformSettings.from_mapping({"evaluation": json.dumps(value)}).evaluation
    assert text == value
    with pytest.raises(ContextError, match="'ftl:evaluation'"):
        PlatformSettings.from_mapping({"evaluation": "{not json"})


def test_a_teams_golden_set_synthesizes():
    synth(**TEAMS_CONTEXT, **{"ftl:evaluation": {"team-a": {"llm-lora": GOLDEN}}})


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"team-z": {}}, "ftl:evaluation.team-z"),
        ({"team-a": {"albert-mlm-pretrain": GOLDEN}}, "ftl:evaluation.team-a.albert-mlm-pretrain"),
        (
            {"team-a": {"llm-lora": {"gate": [{"metric": "eval_f1", "min": 1}]}}},
            "ftl:evaluation.team-a.llm-lora.gate[0].metric",
        ),
    ],
)
def test_a_bad_addition_fails_synth_naming_the_key(value, key):
    with pytest.raises(ContextError) as info:
        synth(**TEAMS_CONTEXT, **{"ftl:evaluation": value})
    assert f"'{key}'" in str(info.value), str(info.value)
