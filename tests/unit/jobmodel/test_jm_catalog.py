"""The catalog: the shipped templates, and catalog files read and written
(jobmodel.templates.catalog)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import jobmodel as jm
from tests.expected import SHIPPED_TEMPLATES
from tests.unit.jobmodel.template_support import rule_of, spec_with

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
    assert rule_of(spec, require_image=True) == "image"
    jm.validate_template(spec.with_image("123456789012.dkr.ecr.eu-west-1.amazonaws.com/r:t"))


def test_shipped_distributions(shipped: dict[str, jm.TemplateSpec]) -> None:
    kinds = {name: spec.distribution.kind for name, spec in shipped.items()}
    assert kinds == {
        "bert-large-qa": "smddp",
        "roberta-large-mnli-mp": "smp",
        "distilbert-chain": "none",
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
        "fp16": True,  # issue 34: where SMP v1 reads it (the Trainer copies it)
    }
    gpt = shipped["gpt-tp-sharded"]
    gpt_mp = gpt.distribution.mp_parameters or {}
    assert gpt_mp["tensor_parallel_degree"] == 4 and gpt_mp["shard_optimizer_state"] is True
    # gpt2-large's 20 heads divide by the degree (gpt2-xl's 25 did not divide by 8)
    assert gpt.hyperparameters["model_name_or_path"] == "gpt2-large" and gpt_mp["fp16"] is True
    assert "fp16" not in gpt.hyperparameters and "bf16" not in gpt.hyperparameters
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


# The SMP v2 template's image is not a Hugging Face one: tests/infra/test_image_lookup.py
# pins it.
HUGGINGFACE_IMAGE_TEMPLATES = [
    name
    for name, spec in jm.shipped_catalog().items()
    if spec.framework.get("image_family") != "pytorch-smp"
]


def test_every_other_template_uses_a_hugging_face_image() -> None:
    smp = set(SHIPPED_TEMPLATES) - set(HUGGINGFACE_IMAGE_TEMPLATES)
    assert smp and all(jm.shipped_catalog()[name].distribution.kind == "smp-v2" for name in smp), (
        smp
    )


@pytest.mark.parametrize("name", HUGGINGFACE_IMAGE_TEMPLATES)
def test_shipped_framework_versions_exist_in_sagemaker(
    shipped: dict[str, jm.TemplateSpec], name: str
) -> None:
    fw = shipped[name].framework
    versions = _huggingface_training_versions()
    entry = versions[fw["transformers_version"]]
    base = entry[f"pytorch{fw['pytorch_version']}"]
    assert fw["py_version"] in base["py_versions"]


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
    bad = spec_with(shipped, "bert-large-qa", max_wait_seconds=10).to_dict()
    with pytest.raises(jm.TemplateError) as info:
        jm.load_catalog({"version": 1, "templates": [bad]})
    assert info.value.rule == "max-wait"
    assert "bert-large-qa" in jm.load_catalog({"version": 1, "templates": [bad]}, validate=False)
    with pytest.raises(jm.TemplateError) as info:
        jm.load_catalog(jm.dump_catalog(shipped), require_image=True)
    assert info.value.rule == "image"
