"""The evaluation policy (issue 36): a template's ``evaluation`` key, the rule that it fits its
template, a team's additions (``ftl:evaluation``) and the evaluation job's arguments."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jobmodel as jm
from jobmodel.after_training.archive import archive_kind
from jobmodel.contract.errors import TemplateError
from jobmodel.evaluation import arguments as A
from jobmodel.evaluation.additions import EvaluationAdditions, EvaluationSettingsError
from jobmodel.templates.evaluation_policy import EvaluationPolicy

GOOD: dict[str, Any] = {
    "task_metrics": {"channel": "validation"},
    "instance_type": "ml.g5.xlarge",
    "spot": True,
    "max_runtime_seconds": 1800,
    "gate": [{"metric": "eval_f1", "min": 80}, {"metric": "eval_exact_match", "max_regression": 1}],
    "approve_on_pass": True,
}


def _with(spec: jm.TemplateSpec, policy: Any) -> jm.TemplateSpec:
    return dataclasses.replace(spec, evaluation=policy)


def _error(spec: jm.TemplateSpec, policy: Any) -> TemplateError:
    with pytest.raises(TemplateError) as caught:
        jm.validate_template(_with(spec, EvaluationPolicy.from_dict(policy, template=spec.name)))
    return caught.value


def test_a_good_policy_reads_back_exactly(catalog):
    policy = EvaluationPolicy.from_dict(GOOD, template="bert-large-qa")
    assert policy.task_metrics_channel == "validation" and policy.max_runtime_seconds == 1800
    assert [g.metric for g in policy.gate] == ["eval_f1", "eval_exact_match"]
    assert EvaluationPolicy.from_dict(policy.to_dict()) == policy
    spec = _with(catalog["bert-large-qa"], policy)
    jm.validate_template(spec)
    assert jm.TemplateSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_the_spec_reads_the_policy_from_the_template_json(catalog):
    data = catalog["bert-large-qa"].to_dict()
    data["evaluation"] = GOOD
    assert jm.TemplateSpec.from_dict(data).evaluation == EvaluationPolicy.from_dict(GOOD)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"surprise": 1}, "evaluation.surprise"),
        ({"spot": "yes"}, "evaluation.spot"),
        ({"max_runtime_seconds": 10}, "evaluation.max_runtime_seconds"),
        ({"max_runtime_seconds": 3_000_000}, "evaluation.max_runtime_seconds"),
        ({"task_metrics": {"channel": "bad name!"}}, "evaluation.task_metrics.channel"),
        ({"task_metrics": {"chanel": "validation"}}, "evaluation.task_metrics.chanel"),
        ({"image_uri": "docker.io/me/image"}, "evaluation.image_uri"),
        ({"gate": [{"metric": "eval_f1"}]}, "evaluation.gate[0]"),
        ({"gate": [{"metric": "eval_f1", "min": "80"}]}, "evaluation.gate[0].min"),
        ({"gate": [{"metric": "eval_f1", "min": float("nan")}]}, "evaluation.gate[0].min"),
        (
            {"gate": [{"metric": "eval_f1", "max_regression": -1}]},
            "evaluation.gate[0].max_regression",
        ),  # noqa: E501
        ({"gate": [{"metric": "eval_f1", "min": 9, "max": 1}]}, "evaluation.gate[0].min"),
        ({"gate": [{"metric": "Eval F1", "min": 1}]}, "evaluation.gate[0].metric"),
        ({"gate": [{"metric": "eval_f1", "min": 1}] * 2}, "evaluation.gate[1].metric"),
        ({"gate": [], "approve_on_pass": True}, "evaluation.approve_on_pass"),
        ({"lm_eval": {"tasks": []}}, "evaluation.lm_eval.tasks"),
        ({"lm_eval": {"tasks": ["Bad-Name"]}}, "evaluation.lm_eval.tasks[0]"),
        ({"lm_eval": {"tasks": ["a"], "limit": 0}}, "evaluation.lm_eval.limit"),
        (
            {"golden_sets": [{"name": "g", "prefix": "../team/"}]},
            "evaluation.golden_sets[0].prefix",
        ),
        ({"golden_sets": [{"name": "g", "prefix": "/abs"}]}, "evaluation.golden_sets[0].prefix"),
    ],
)
def test_bad_policy_values_are_refused_naming_the_key(change, key):
    with pytest.raises(TemplateError) as caught:
        EvaluationPolicy.from_dict({**GOOD, **change}, template="bert-large-qa")
    assert caught.value.rule == "evaluation" and caught.value.template == "bert-large-qa"
    assert caught.value.message.startswith(f"{key}:"), caught.value.message


LLM_TASK_CHANNEL = {"task_metrics": None, "lm_eval": {"tasks": ["x"], "task_channel": "t"}}


@pytest.mark.parametrize(
    ("template", "change", "key"),
    [
        ("bert-large-qa", {"task_metrics": {"channel": "test"}}, "evaluation.task_metrics.channel"),
        (
            "bert-large-qa",
            {"task_metrics": {"channel": "train"}},
            "evaluation.task_metrics.channel",
        ),  # noqa: E501
        ("bert-large-qa", {"instance_type": "ml.nope.xlarge"}, "evaluation.instance_type"),
        (
            "bert-large-qa",
            {"gate": [{"metric": "eval_acc", "min": 1}]},
            "evaluation.gate[0].metric",
        ),
        ("bert-large-qa", {"lm_eval": {"tasks": ["x"]}}, "evaluation.lm_eval"),
        (
            "bert-large-qa",
            {"golden_sets": [{"name": "g", "prefix": "g"}]},
            "evaluation.golden_sets",
        ),
        (
            "llm-lora",
            {"task_metrics": {"channel": "validation"}, "gate": []},
            "evaluation.task_metrics",
        ),  # noqa: E501
        ("llm-lora", {**LLM_TASK_CHANNEL, "gate": []}, "evaluation.lm_eval.task_channel"),
    ],
)
def test_a_policy_must_fit_its_template(catalog, template, change, key):
    policy = {**GOOD, **change}
    if change.get("gate") == []:
        policy["approve_on_pass"] = False
    error = _error(catalog[template], policy)
    assert error.rule == "evaluation" and error.message.startswith(f"{key}:"), error.message


def test_gated_lm_eval_and_golden_metrics_are_the_ones_the_policy_produces(catalog):
    spec = catalog["llm-lora"]
    policy = {
        "lm_eval": {"tasks": ["arith"], "task_channel": "validation"},
        "golden_sets": [{"name": "support", "prefix": "golden/support.jsonl"}],
        "gate": [
            {"metric": "lmeval_arith_acc", "min": 0.2},
            {"metric": "golden_support_exact_match", "max_regression": 0.05},
        ],
    }
    jm.validate_template(_with(spec, EvaluationPolicy.from_dict(policy)))
    bad = {**policy, "gate": [{"metric": "golden_other_exact_match", "min": 0}]}
    assert _error(spec, bad).message.startswith("evaluation.gate[0].metric:")


def test_lower_is_better_for_loss_and_perplexity_unless_said():
    gate = EvaluationPolicy.from_dict(
        {
            "task_metrics": {"channel": "validation"},
            "gate": [
                {"metric": "eval_perplexity", "max": 20},
                {"metric": "eval_loss", "max_regression": 0.1, "higher_is_better": True},
                {"metric": "eval_accuracy", "min": 0.5},
            ],
        }
    ).gate
    assert [g.higher_is_better for g in gate] == [False, True, True]


def test_the_shipped_policies_are_valid_and_gate_what_they_measure():
    shipped = jm.shipped_catalog()
    with_policy = {n for n, s in shipped.items() if s.evaluation is not None}
    assert "bert-large-qa" in with_policy and "albert-mlm-pretrain" not in with_policy
    for name in with_policy:
        policy = shipped[name].evaluation
        assert policy is not None and policy.spot and not policy.approve_on_pass
        if policy.task_metrics_channel is not None:
            assert policy.gate and all(g.max_regression for g in policy.gate), name
    # The LLM templates run nothing until a team adds a golden set.
    assert not shipped["llm-lora"].evaluation.runs_something


# ----------------------------------------------------------------- a team's additions

TEAMS = ("nlp", "vision")


def _additions(raw: Any, catalog) -> EvaluationAdditions:
    return EvaluationAdditions.parse(raw, teams=TEAMS, catalog=catalog)


def test_a_team_adds_golden_sets_and_gates_to_its_own_jobs_only(catalog):
    raw = {
        "nlp": {
            "llm-lora": {
                "golden_sets": [{"name": "support", "prefix": "golden/support/"}],
                "gate": [{"metric": "golden_support_exact_match", "min": 0.6}],
            },
            "bert-large-qa": {"gate": [{"metric": "eval_f1", "min": 85}]},
        }
    }
    additions = _additions(raw, catalog)
    lora = additions.policy(catalog["llm-lora"], "nlp")
    assert lora is not None and [g.name for g in lora.golden_sets] == ["support"]
    assert lora.instance_type == "ml.g6e.2xlarge"  # the template's settings stay
    assert additions.policy(catalog["llm-lora"], "vision") is None  # runs nothing
    qa = additions.policy(catalog["bert-large-qa"], "nlp")
    assert qa is not None  # the template's regression checks, then the team's floor
    assert [g.metric for g in qa.gate] == ["eval_f1", "eval_exact_match", "eval_f1"]
    assert qa.gate[-1].min == 85 and qa.gate[0].max_regression == 1.0
    assert additions.policy(catalog["albert-mlm-pretrain"], "nlp") is None


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ([], "ftl:evaluation"),
        ({"ops": {}}, "ftl:evaluation.ops"),
        ({"nlp": {"nope": {}}}, "ftl:evaluation.nlp.nope"),
        ({"nlp": {"albert-mlm-pretrain": {}}}, "ftl:evaluation.nlp.albert-mlm-pretrain"),
        ({"nlp": {"llm-lora": {"image_uri": "x"}}}, "ftl:evaluation.nlp.llm-lora.image_uri"),
        (
            {"nlp": {"llm-lora": {"gate": [{"metric": "golden_x_exact_match", "min": 1}]}}},
            "ftl:evaluation.nlp.llm-lora.gate[0].metric",
        ),
        (
            {"nlp": {"bert-large-qa": {"gate": [{"metric": "eval_accuracy", "min": 1}]}}},
            "ftl:evaluation.nlp.bert-large-qa.gate[0].metric",
        ),
        (
            {"nlp": {"llm-lora": {"golden_sets": [{"name": "a", "prefix": "a/"}] * 2}}},
            "ftl:evaluation.nlp.llm-lora.golden_sets[1].name",
        ),
        (
            {"nlp": {"llm-lora": {"golden_sets": [{"name": "s", "prefix": "a/../b"}]}}},
            "ftl:evaluation.nlp.llm-lora.golden_sets[0].prefix",
        ),
    ],
)
def test_bad_additions_are_refused_naming_the_key(catalog, raw, key):
    with pytest.raises(EvaluationSettingsError) as caught:
        _additions(raw, catalog)
    assert caught.value.key == key, str(caught.value)
    assert str(caught.value).startswith(f"'{key}': ")


# ----------------------------------------------------------- the evaluation job's arguments


def test_an_adapters_evaluation_gets_its_base_model_and_the_golden_sets(catalog):
    additions = _additions(
        {"nlp": {"llm-lora": {"golden_sets": [{"name": "support", "prefix": "golden/s.jsonl"}]}}},
        catalog,
    )
    policy = additions.policy(catalog["llm-lora"], "nlp")
    assert policy is not None
    hps = {"peft": "lora", "model_name_or_path": "meta-llama/x", "sagemaker_program": "train.py"}
    kind = archive_kind(hps)
    args = A.hyperparameters(policy, kind, hps)
    assert "sagemaker_program" not in args and args["peft"] == "lora"
    assert args["ftl_eval_archive_kind"] == "lora-adapter"
    assert args["ftl_eval_golden_sets"] == "support" and args["ftl_eval_lm_eval_tasks"] == ""
    chans = A.channels(
        policy,
        kind,
        model_data_url="s3://art/nlp/job/output/model.tar.gz",
        training_channels={"train": "s3://d/nlp/t/", "model": "s3://d/nlp/models/base/"},
        team_data_prefix="s3://d/nlp",
    )
    assert chans == {
        "archive": "s3://art/nlp/job/output/model.tar.gz",
        "base_model": "s3://d/nlp/models/base/",
        "golden_support": "s3://d/nlp/golden/s.jsonl",
    }


def test_a_merged_archive_needs_no_base_model_channel(catalog):
    policy = EvaluationPolicy.from_dict({"golden_sets": [{"name": "g", "prefix": "g/"}]})
    kind = archive_kind({"peft": "lora", "merge_adapter": "true"})
    chans = A.channels(
        policy,
        kind,
        model_data_url="s3://a/m.tar.gz",
        training_channels={"model": "s3://d/base/"},
        team_data_prefix="s3://d/",
    )
    assert set(chans) == {"archive", "golden_g"}


# ------------------------------------------------------------------ property tests

_numbers = st.floats(allow_nan=False, allow_infinity=False, width=32)
_gated = st.fixed_dictionaries(
    {"metric": st.sampled_from(["eval_f1", "eval_exact_match"])},
    optional={
        "min": _numbers,
        "max_regression": st.floats(0, 100),
        "higher_is_better": st.booleans(),
    },
)


@settings(max_examples=200, deadline=None)
@given(
    gate=st.lists(_gated, max_size=3, unique_by=lambda g: g["metric"]),
    runtime=st.integers(0, 3_000_000),
    spot=st.one_of(st.booleans(), st.none(), st.integers(0, 1)),
)
def test_any_policy_either_reads_back_or_is_refused_naming_evaluation(gate, runtime, spot):
    raw = {"task_metrics": {"channel": "validation"}, "gate": gate, "max_runtime_seconds": runtime}
    if spot is not None:
        raw["spot"] = spot
    try:
        policy = EvaluationPolicy.from_dict(raw, template="t")
    except TemplateError as exc:
        assert exc.rule == "evaluation" and exc.message.startswith("evaluation.")
        return
    assert 60 <= policy.max_runtime_seconds and type(policy.spot) is bool
    assert all(g.min is not None or g.max_regression is not None for g in policy.gate)
    assert EvaluationPolicy.from_dict(policy.to_dict()) == policy


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_junk_never_escapes_as_another_error(junk):
    try:
        EvaluationPolicy.from_dict(junk, template="t")
    except TemplateError as exc:
        assert exc.message.startswith("evaluation")
