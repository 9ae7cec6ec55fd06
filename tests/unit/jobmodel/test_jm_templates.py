"""Template specs: serialisation, public view, every synth-time rule, catalog files."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import jobmodel as jm
from tests.expected import SHIPPED_TEMPLATES

ENTRYPOINT_HYPERPARAMETERS = {
    "task", "model_name_or_path", "max_seq_length", "doc_stride", "pad_to_max_length",
    "learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size",
    "per_device_eval_batch_size", "gradient_accumulation_steps", "fp16", "bf16", "seed",
    "warmup_ratio", "weight_decay", "eval_steps", "save_steps", "save_total_limit",
    "logging_steps", "metric_for_best_model", "load_best_model_at_end", "text_column",
    "text_pair_column", "label_column", "num_labels", "label_mapping", "mlm_probability",
    # issue 11: the sft task (names fixed with the entrypoint)
    "dataset_format", "packing", "completion_only_loss", "peft", "lora_r", "lora_alpha",
    "lora_dropout", "lora_target_modules", "merge_adapter", "fsdp",
    "fsdp_transformer_layer_cls_to_wrap", "gradient_checkpointing", "attn_implementation",
    "optim", "lr_scheduler_type",
}  # fmt: skip
ENTRYPOINT_METRICS = {
    "train_loss", "eval_loss", "eval_f1", "eval_exact_match", "eval_accuracy",
    "learning_rate", "epoch", "train_samples_per_second", "train_tokens_per_second", "train_mfu",
}  # fmt: skip


@pytest.fixture(scope="module")
def shipped() -> dict[str, jm.TemplateSpec]:
    return jm.shipped_catalog()


def _spec(shipped: dict[str, jm.TemplateSpec], base: str, /, **changes: Any) -> jm.TemplateSpec:
    return dataclasses.replace(shipped[base], **changes)


def _rule_of(spec: jm.TemplateSpec, *, require_image: bool = False) -> str:
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(spec, require_image=require_image)
    assert spec.name in str(info.value) or info.value.template == str(spec.name)
    assert info.value.rule in str(info.value)
    return info.value.rule


# -- the shipped catalog ------------------------------------------------------------------


def test_shipped_catalog_has_one_template_per_seed(shipped: dict[str, jm.TemplateSpec]) -> None:
    assert list(shipped) == SHIPPED_TEMPLATES


@pytest.mark.parametrize("name", SHIPPED_TEMPLATES)
def test_shipped_template_is_valid(shipped: dict[str, jm.TemplateSpec], name: str) -> None:
    spec = shipped[name]
    jm.validate_template(spec, require_image=False)
    assert spec.image_uri is None
    assert spec.spot is True and spec.checkpoint is True
    assert spec.max_wait_seconds >= spec.max_runtime_seconds
    assert spec.retry_attempts == 2 and spec.tensorboard
    assert not spec.debugger and not spec.profiler
    assert set(spec.hyperparameters) | set(spec.overridable) <= ENTRYPOINT_HYPERPARAMETERS
    assert set(spec.metrics) <= ENTRYPOINT_METRICS
    assert spec.hyperparameters["task"] in {"qa", "classification", "mlm", "clm", "sft"}
    assert _rule_of(spec, require_image=True) == "image"
    jm.validate_template(spec.with_image("123456789012.dkr.ecr.eu-west-1.amazonaws.com/r:t"))


def test_shipped_distributions(shipped: dict[str, jm.TemplateSpec]) -> None:
    kinds = {name: spec.distribution.kind for name, spec in shipped.items()}
    assert kinds == {
        "bert-large-qa": "smddp",
        "roberta-large-mnli-mp": "smp",
        "distilbert-spot": "none",
        "distilbert-multilingual-sentiment": "smddp",
        "albert-mlm-pretrain": "smddp",
        "gpt-tp-sharded": "smp",
        "llm-sft-fsdp": "torchrun",
        "llm-lora": "torchrun",
        "llm-sft": "torchrun",
        "llm-smp-v2": "smp-v2",
    }
    roberta = shipped["roberta-large-mnli-mp"].distribution
    assert roberta.processes_per_host == 8
    assert dict(roberta.mp_parameters or {}) == {
        "partitions": 4,
        "microbatches": 4,
        "pipeline": "interleaved",
        "placement_strategy": "spread",
        "optimize": "speed",
        "ddp": True,
    }
    gpt = shipped["gpt-tp-sharded"].distribution.mp_parameters or {}
    assert gpt["tensor_parallel_degree"] == 8 and gpt["shard_optimizer_state"] is True
    assert shipped["albert-mlm-pretrain"].input_mode == "FastFile"
    bert = shipped["bert-large-qa"]
    assert (bert.default_instance_type, bert.default_instance_count) == ("ml.p4d.24xlarge", 2)
    assert bert.max_instance_count == 16


def _huggingface_training_versions() -> dict[str, Any]:
    spec = importlib.util.find_spec("sagemaker")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("sagemaker is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / "core" / "image_uri_config" / "huggingface.json"
    if not path.exists():
        pytest.skip("sagemaker has no huggingface image config")
    return json.loads(path.read_text())["training"]["versions"]


@pytest.mark.parametrize("name", SHIPPED_TEMPLATES)
def test_shipped_framework_versions_exist_in_sagemaker(
    shipped: dict[str, jm.TemplateSpec], name: str
) -> None:
    fw = shipped[name].framework
    if fw.get("image_family") == "pytorch-smp":
        pytest.skip("SMP v2 image: pinned in tests/infra/test_image_lookup.py")
    versions = _huggingface_training_versions()
    entry = versions[fw["transformers_version"]]
    base = entry[f"pytorch{fw['pytorch_version']}"]
    assert fw["py_version"] in base["py_versions"]


# -- serialisation ------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED_TEMPLATES)
def test_round_trip(shipped: dict[str, jm.TemplateSpec], name: str) -> None:
    spec = shipped[name]
    data = spec.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON
    again = jm.TemplateSpec.from_dict(json.loads(json.dumps(data)))
    assert again == spec
    assert again.to_dict() == data
    assert hash(again) == hash(spec)


def test_specs_are_immutable(shipped: dict[str, jm.TemplateSpec]) -> None:
    spec = shipped["bert-large-qa"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.hyperparameters["task"] = "mlm"  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.overridable["x"] = jm.HyperparameterRule("int")  # type: ignore[index]
    assert isinstance(spec.instance_types, tuple) and isinstance(spec.inputs, tuple)


def test_plain_dicts_are_frozen_on_construction() -> None:
    hp = {"task": "qa"}
    spec = jm.TemplateSpec(
        name="t",
        description="d",
        instance_types=["ml.g5.xlarge"],  # type: ignore[arg-type]
        default_instance_type="ml.g5.xlarge",
        hyperparameters=hp,
        overridable={"seed": {"type": "int", "min": 0, "max": 10}},  # type: ignore[dict-item]
        inputs=[{"name": "train", "default_prefix": "x/"}],  # type: ignore[list-item]
        distribution={"kind": "none"},  # type: ignore[arg-type]
    )
    hp["task"] = "mlm"
    assert spec.hyperparameters["task"] == "qa"
    assert spec.overridable["seed"] == jm.HyperparameterRule("int", 0, 10)
    assert spec.inputs == (jm.InputChannel("train", default_prefix="x/"),)
    assert spec.distribution == jm.Distribution("none")
    jm.validate_template(spec, require_image=False)


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda d: d.update(surprise=1), "unknown-key"),
        (lambda d: d.pop("instance_types"), "missing-key"),
        (lambda d: d["distribution"].update(nodes=2), "unknown-key"),
        (lambda d: d["inputs"][0].update(mode="Pipe"), "unknown-key"),
        (lambda d: d["overridable"]["seed"].update(step=2), "unknown-key"),
        (lambda d: d["overridable"]["seed"].pop("type"), "missing-key"),
        (lambda d: d.update(distribution="smddp"), "type"),
        (lambda d: d.update(inputs="train"), "type"),
        (lambda d: d.update(overridable=[]), "type"),
    ],
)
def test_from_dict_rejects_bad_shapes(
    shipped: dict[str, jm.TemplateSpec], mutate: Any, rule: str
) -> None:
    data = shipped["bert-large-qa"].to_dict()
    mutate(data)
    with pytest.raises(jm.TemplateError) as info:
        jm.TemplateSpec.from_dict(data)
    assert info.value.rule == rule


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(jm.TemplateError):
        jm.TemplateSpec.from_dict(["not", "a", "dict"])  # type: ignore[arg-type]


def test_hyperparameter_rule_dict_form_is_the_contracts() -> None:
    assert jm.HyperparameterRule("float", 1e-6, 1e-3).to_dict() == {
        "type": "float",
        "min": 1e-6,
        "max": 1e-3,
    }
    assert jm.HyperparameterRule("str", choices=("a", "b")).to_dict() == {
        "type": "str",
        "choices": ["a", "b"],
    }
    assert jm.HyperparameterRule("bool").to_dict() == {"type": "bool"}
    rule = jm.HyperparameterRule.from_dict({"type": "int", "choices": [1, 2]})
    assert rule.choices == (1, 2)


def test_public_view_is_the_contracts_templates_entry(shipped: dict[str, jm.TemplateSpec]) -> None:
    view = shipped["bert-large-qa"].public_view()
    assert set(view) == {
        "name",
        "description",
        "distribution",
        "instance_types",
        "default_instance_type",
        "default_instance_count",
        "max_instance_count",
        "spot",
        "max_runtime_seconds",
        "inputs",
        "hyperparameters",
    }
    assert view["distribution"] == "smddp"
    assert view["inputs"] == ["train", "validation"]
    assert view["hyperparameters"]["defaults"]["max_seq_length"] == 384
    assert view["hyperparameters"]["overridable"]["learning_rate"] == {
        "type": "float",
        "min": 1e-6,
        "max": 1e-3,
    }
    assert view["hyperparameters"]["overridable"]["num_train_epochs"] == {
        "type": "int",
        "min": 1,
        "max": 10,
    }
    json.dumps(view)
    for spec in shipped.values():
        for entry in spec.public_view()["hyperparameters"]["overridable"].values():
            assert entry["type"] in {"int", "float", "bool", "str"}
            assert ("choices" in entry) != ("min" in entry or "max" in entry) or entry[
                "type"
            ] == "bool"


# -- every validation rule ----------------------------------------------------------------


def _rule(**kwargs: Any) -> jm.HyperparameterRule:
    return jm.HyperparameterRule(**kwargs)


CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("name-upper", "bert-large-qa", {"name": "Bert_QA"}, "name"),
    ("name-too-long", "bert-large-qa", {"name": "a" * 41}, "name"),
    ("description", "bert-large-qa", {"description": ""}, "description"),
    ("type-int", "bert-large-qa", {"default_instance_count": "2"}, "type"),
    ("type-bool", "bert-large-qa", {"spot": 1}, "type"),
    ("type-list", "bert-large-qa", {"instance_types": ("ml.p4d.24xlarge", 3)}, "type"),
    ("framework", "bert-large-qa", {"framework": {"pytorch_version": 2.5}}, "framework"),
    ("no-types", "bert-large-qa", {"instance_types": ()}, "instance-types"),
    (
        "repeated-type",
        "bert-large-qa",
        {"instance_types": ("ml.p4d.24xlarge", "ml.p4d.24xlarge")},
        "instance-types",
    ),
    (
        "unknown-type",
        "bert-large-qa",
        {"instance_types": ("ml.p4d.24xlarge", "ml.z9.huge")},
        "instance-type-unknown",
    ),
    (
        "default-type",
        "gpt-tp-sharded",
        {"default_instance_type": "ml.p3dn.24xlarge"},
        "default-instance-type",
    ),
    ("default-count", "bert-large-qa", {"default_instance_count": 17}, "instance-count"),
    ("max-count", "bert-large-qa", {"max_instance_count": 0}, "instance-count"),
    ("volume", "bert-large-qa", {"volume_size_gb": 0}, "volume-size"),
    (
        "smddp-on-g5",
        "bert-large-qa",
        {"instance_types": ("ml.p4d.24xlarge", "ml.g5.48xlarge")},
        "smddp-instance",
    ),
    (
        "multi-node-without-efa",
        "bert-large-qa",
        {"instance_types": ("ml.p4d.24xlarge", "ml.p3.16xlarge")},
        "multi-node-efa",
    ),
    ("multi-node-none", "distilbert-spot", {"max_instance_count": 2}, "multi-node-distribution"),
    ("kind", "bert-large-qa", {"distribution": jm.Distribution("horovod")}, "distribution"),
    (
        "pph-on-smddp",
        "bert-large-qa",
        {"distribution": jm.Distribution("smddp", processes_per_host=8)},
        "distribution",
    ),
    (
        "mp-on-smddp",
        "bert-large-qa",
        {"distribution": jm.Distribution("smddp", mp_parameters={"partitions": 2})},
        "distribution",
    ),
    (
        "custom-mpi-type",
        "bert-large-qa",
        {"distribution": jm.Distribution("smddp", custom_mpi_options=3)},  # type: ignore[arg-type]
        "distribution",
    ),
    (
        "custom-mpi-long",
        "bert-large-qa",
        {"distribution": jm.Distribution("smddp", custom_mpi_options="-x A=1 " * 40)},
        "hyperparameter-length",
    ),
    (
        "pph-too-many",
        "roberta-large-mnli-mp",
        {"distribution": jm.Distribution("smp", 16, mp_parameters={"partitions": 4})},
        "processes-per-host",
    ),
    (
        "pph-missing",
        "roberta-large-mnli-mp",
        {"distribution": jm.Distribution("mpi")},
        "processes-per-host",
    ),
    (
        "smp-no-degree",
        "roberta-large-mnli-mp",
        {"distribution": jm.Distribution("smp", 8, mp_parameters={"microbatches": 4})},
        "smp-parameters",
    ),
    (
        "smp-no-params",
        "roberta-large-mnli-mp",
        {"distribution": jm.Distribution("smp", 8)},
        "smp-parameters",
    ),
    (
        "smp-bad-degree",
        "roberta-large-mnli-mp",
        {"distribution": jm.Distribution("smp", 8, mp_parameters={"partitions": 0})},
        "smp-parameters",
    ),
    (
        "smp-nested",
        "roberta-large-mnli-mp",
        {"distribution": jm.Distribution("smp", 8, mp_parameters={"partitions": 2, "x": [1]})},
        "smp-parameters",
    ),
    (
        "smp-tp-over-pph",
        "roberta-large-mnli-mp",
        {"distribution": jm.Distribution("smp", 4, mp_parameters={"tensor_parallel_degree": 8})},
        "smp-parameters",
    ),
    (
        "smp-long",
        "roberta-large-mnli-mp",
        {
            "distribution": jm.Distribution(
                "smp", 8, mp_parameters={"partitions": 2, "x": "y" * 250}
            )
        },
        "hyperparameter-length",
    ),
    ("runtime-over-28-days", "bert-large-qa", {"max_runtime_seconds": 2_419_201}, "runtime"),
    ("default-over-max", "bert-large-qa", {"default_runtime_seconds": 500_000}, "runtime"),
    ("runtime-zero", "bert-large-qa", {"default_runtime_seconds": 0}, "runtime"),
    ("max-wait", "bert-large-qa", {"max_wait_seconds": 3600}, "max-wait"),
    ("spot-checkpoint", "bert-large-qa", {"checkpoint": False}, "spot-checkpoint"),
    ("retry", "bert-large-qa", {"retry_attempts": 31}, "retry"),
    ("retry-negative", "bert-large-qa", {"retry_attempts": -1}, "retry"),
    ("keep-alive", "bert-large-qa", {"keep_alive_seconds": 3601}, "keep-alive"),
    ("image-not-ecr", "bert-large-qa", {"image_uri": "docker.io/library/python:3.11"}, "image"),
    (
        "image-no-tag",
        "bert-large-qa",
        {"image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r"},
        "image",
    ),
    ("entry-point", "bert-large-qa", {"entry_point": "../train.py"}, "entry-point"),
    ("entry-point-abs", "bert-large-qa", {"entry_point": "/opt/train.py"}, "entry-point"),
    (
        "default-not-scalar",
        "bert-large-qa",
        {"hyperparameters": {"task": "qa", "layers": [1, 2]}},
        "hyperparameter-default",
    ),
    (
        "default-breaks-rule",
        "bert-large-qa",
        {"hyperparameters": {"learning_rate": 0.5}},
        "hyperparameter-default",
    ),
    (
        "default-wrong-type",
        "bert-large-qa",
        {"hyperparameters": {"num_train_epochs": 2.5}},
        "hyperparameter-default",
    ),
    (
        "rule-type",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="complex")}},
        "hyperparameter-rule",
    ),
    (
        "rule-min-max",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", min=5, max=1)}},
        "hyperparameter-rule",
    ),
    (
        "rule-both",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", min=1, choices=(1, 2))}},
        "hyperparameter-rule",
    ),
    (
        "rule-bool-bounds",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="bool", min=0)}},
        "hyperparameter-rule",
    ),
    (
        "rule-str-bounds",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="str", max=3)}},
        "hyperparameter-rule",
    ),
    (
        "rule-int-float-bound",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", max=2.5)}},
        "hyperparameter-rule",
    ),
    (
        "rule-empty-choices",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="str", choices=())}},
        "hyperparameter-rule",
    ),
    (
        "rule-bad-choice",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="int", choices=(1, "2"))}},
        "hyperparameter-rule",
    ),
    (
        "rule-nan",
        "bert-large-qa",
        {"overridable": {"x": _rule(type="float", max=float("nan"))}},
        "hyperparameter-rule",
    ),
    (
        "reserved-default",
        "bert-large-qa",
        {"hyperparameters": {"sagemaker_program": "x.py"}},
        "hyperparameter-reserved",
    ),
    (
        "reserved-mp",
        "bert-large-qa",
        {"overridable": {"mp_parameters": _rule(type="str")}},
        "hyperparameter-reserved",
    ),
    (
        "value-too-long",
        "bert-large-qa",
        {"hyperparameters": {"task": "q" * 300}},
        "hyperparameter-length",
    ),
    (
        "too-many",
        "bert-large-qa",
        {"hyperparameters": {f"h{i}": i for i in range(93)}},
        "hyperparameter-count",
    ),
    ("input-mode", "bert-large-qa", {"input_mode": "Stream"}, "input-mode"),
    ("no-channels", "bert-large-qa", {"inputs": ()}, "inputs"),
    (
        "many-channels",
        "bert-large-qa",
        {"inputs": tuple(jm.InputChannel(f"c{i}") for i in range(21))},
        "inputs",
    ),
    ("channel-name", "bert-large-qa", {"inputs": (jm.InputChannel("train data"),)}, "inputs"),
    (
        "channel-twice",
        "bert-large-qa",
        {"inputs": (jm.InputChannel("a"), jm.InputChannel("a"))},
        "inputs",
    ),
    (
        "channel-distribution",
        "bert-large-qa",
        {"inputs": (jm.InputChannel("a", distribution="Sharded"),)},
        "inputs",
    ),
    (
        "channel-prefix",
        "bert-large-qa",
        {"inputs": (jm.InputChannel("a", default_prefix="x/../y/"),)},
        "inputs",
    ),
    (
        "channel-content-type",
        "bert-large-qa",
        {"inputs": (jm.InputChannel("a", content_type=""),)},
        "inputs",
    ),
    ("metric-name", "bert-large-qa", {"metrics": ("Train-Loss",)}, "metrics"),
    ("metric-twice", "bert-large-qa", {"metrics": ("train_loss", "train_loss")}, "metrics"),
    ("metric-count", "bert-large-qa", {"metrics": tuple(f"m{i}" for i in range(41))}, "metrics"),
    ("env-key", "bert-large-qa", {"environment": {"1BAD": "x"}}, "environment"),
    ("env-value", "bert-large-qa", {"environment": {"GOOD": "x" * 513}}, "environment"),
    (
        "env-count",
        "bert-large-qa",
        {"environment": {f"V{i}": "1" for i in range(96)}},
        "environment",
    ),
    ("tag-aws", "bert-large-qa", {"tags": {"AWS:owner": "x"}}, "tags"),
    ("tag-ftl", "bert-large-qa", {"tags": {"ftl:template": "x"}}, "tags"),
    ("tag-chars", "bert-large-qa", {"tags": {"team": "a,b"}}, "tags"),
    ("tag-count", "bert-large-qa", {"tags": {f"t{i}": "x" for i in range(47)}}, "tags"),
]


@pytest.mark.parametrize(
    ("base", "changes", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_every_rule_fires(
    shipped: dict[str, jm.TemplateSpec], base: str, changes: dict[str, Any], rule: str
) -> None:
    assert _rule_of(_spec(shipped, base, **changes)) == rule


def test_missing_image_only_when_required(shipped: dict[str, jm.TemplateSpec]) -> None:
    spec = shipped["distilbert-spot"]
    jm.validate_template(spec, require_image=False)
    assert _rule_of(spec, require_image=True) == "image"
    jm.validate_template(
        spec.with_image("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/repo/sub:1.0"),
        require_image=True,
    )


def test_edges_that_pass(shipped: dict[str, jm.TemplateSpec]) -> None:
    base = "bert-large-qa"
    jm.validate_template(_spec(shipped, base, checkpoint=False, spot=False), require_image=False)
    jm.validate_template(_spec(shipped, base, max_wait_seconds=432_000), require_image=False)
    jm.validate_template(
        _spec(shipped, base, retry_attempts=0, keep_alive_seconds=3600), require_image=False
    )
    jm.validate_template(
        _spec(shipped, base, tags={f"t{i}": "x" for i in range(46)}), require_image=False
    )
    jm.validate_template(
        _spec(shipped, base, tags={"équipe": "données", "team name": "a.b:c/d=e+f-g@h"}),
        require_image=False,
    )
    jm.validate_template(
        _spec(shipped, "distilbert-spot", max_instance_count=1), require_image=False
    )


def test_validate_rejects_non_spec() -> None:
    with pytest.raises(jm.TemplateError):
        jm.validate_template({"name": "x"})  # type: ignore[arg-type]


# -- catalog files -----------------------------------------------------------------------


def test_load_and_dump_catalog(tmp_path: Path, shipped: dict[str, jm.TemplateSpec]) -> None:
    data = jm.dump_catalog(shipped)
    assert data["version"] == 1 and len(data["templates"]) == len(SHIPPED_TEMPLATES)
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    assert jm.load_catalog(path) == shipped
    assert jm.load_catalog(str(path)) == shipped
    assert jm.load_catalog(data) == shipped
    assert jm.dump_catalog(list(shipped.values())) == data


def test_catalog_rejects_duplicates(shipped: dict[str, jm.TemplateSpec]) -> None:
    spec = shipped["bert-large-qa"]
    with pytest.raises(jm.TemplateError) as info:
        jm.dump_catalog([spec, spec])
    assert info.value.rule == "duplicate-name"
    data = {"version": 1, "templates": [spec.to_dict(), spec.to_dict()]}
    with pytest.raises(jm.TemplateError) as info:
        jm.load_catalog(data)
    assert info.value.rule == "duplicate-name"
    assert "bert-large-qa" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"version": 2, "templates": []},
        {"version": True, "templates": []},
        {"version": 1},
        {"version": 1, "templates": {}},
        {"version": 1, "templates": [], "extra": 1},
    ],
)
def test_catalog_rejects_bad_files(data: Any) -> None:
    with pytest.raises(jm.TemplateError):
        jm.load_catalog(data)


def test_load_catalog_validates(shipped: dict[str, jm.TemplateSpec]) -> None:
    bad = _spec(shipped, "bert-large-qa", max_wait_seconds=10).to_dict()
    with pytest.raises(jm.TemplateError) as info:
        jm.load_catalog({"version": 1, "templates": [bad]})
    assert info.value.rule == "max-wait"
    assert "bert-large-qa" in jm.load_catalog({"version": 1, "templates": [bad]}, validate=False)
    with pytest.raises(jm.TemplateError) as info:
        jm.load_catalog(jm.dump_catalog(shipped), require_image=True)
    assert info.value.rule == "image"
