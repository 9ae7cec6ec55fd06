"""The causal-LM templates of issue 11: they validate, render, and keep the entrypoint contract."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import jobmodel as jm

LLM = ["llm-sft-fsdp", "llm-lora", "llm-sft", "llm-smp-v2"]
# Hyperparameter names fixed with the entrypoint engineer (issue 11).
SFT_NAMES = {
    "task", "model_name_or_path", "dataset_format", "max_seq_length", "packing",
    "completion_only_loss", "peft", "lora_r", "lora_alpha", "lora_dropout",
    "lora_target_modules", "merge_adapter", "fsdp", "fsdp_transformer_layer_cls_to_wrap",
    "gradient_checkpointing", "attn_implementation", "bf16", "optim", "learning_rate",
    "num_train_epochs", "max_steps", "per_device_train_batch_size",
    "gradient_accumulation_steps", "warmup_ratio", "weight_decay", "seed", "logging_steps",
    "save_steps", "save_total_limit", "lr_scheduler_type",
}  # fmt: skip
EFA_P = {"ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge"}


@pytest.fixture(scope="module")
def shipped() -> dict[str, jm.TemplateSpec]:
    return jm.shipped_catalog()


def _rule(spec: jm.TemplateSpec) -> str:
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(spec, require_image=False)
    assert info.value.template == spec.name and info.value.rule in str(info.value)
    return info.value.rule


@pytest.mark.parametrize("name", LLM)
def test_llm_template_contract(shipped: dict[str, jm.TemplateSpec], name: str) -> None:
    spec = shipped[name]
    jm.validate_template(spec, require_image=False)
    hp = spec.hyperparameters
    assert set(hp) | set(spec.overridable) <= SFT_NAMES
    assert hp["task"] == "sft" and hp["bf16"] is True and hp["packing"] is True
    assert hp["completion_only_loss"] is True and hp["gradient_checkpointing"] is True
    assert hp["optim"] == "adamw_torch_fused" and hp["attn_implementation"] == "auto"
    assert {"train_tokens_per_second", "train_mfu", "train_loss"} <= set(spec.metrics)
    channels = spec.channels
    assert list(channels) == ["train", "validation", "model"]
    assert channels["train"].required and not channels["validation"].required
    assert channels["model"].required
    assert spec.spot and spec.checkpoint and spec.legacy is None
    assert spec.framework.get("py_version") in {"py311", "py312"}


def test_llm_template_shapes(shipped: dict[str, jm.TemplateSpec]) -> None:
    fsdp = shipped["llm-sft-fsdp"]
    assert fsdp.distribution.kind == "torchrun"
    assert (fsdp.default_instance_count, fsdp.max_instance_count) == (2, 16)
    assert EFA_P <= set(fsdp.instance_types)
    assert all(jm.INSTANCE_TYPES[t].efa for t in fsdp.instance_types)
    assert fsdp.hyperparameters["fsdp"] == "full_shard auto_wrap"
    lora = shipped["llm-lora"]
    assert lora.max_instance_count == 1 and lora.hyperparameters["peft"] == "lora"
    assert lora.overridable["peft"].choices == ("lora", "qlora")
    assert lora.overridable["merge_adapter"].type == "bool"
    assert {t.split(".")[1] for t in lora.instance_types} == {"g5", "g6e", "p4d"}
    sft = shipped["llm-sft"]
    assert sft.max_instance_count == 1 and sft.hyperparameters["peft"] == "none"
    smp = shipped["llm-smp-v2"]
    assert smp.distribution.kind == "smp-v2"
    assert smp.framework["image_family"] == "pytorch-smp"
    params = dict(smp.distribution.mp_parameters or {})
    assert params["tensor_parallel_degree"] == 8 and params["sm_activation_offloading"] is True
    assert "hybrid_shard_degree" in params and "partitions" not in params
    fw = fsdp.framework
    assert (fw["transformers_version"], fw["pytorch_version"]) == ("5.3.0", "2.9.0")


def test_legacy_templates_say_why(shipped: dict[str, jm.TemplateSpec]) -> None:
    legacy = {n: s.legacy for n, s in shipped.items() if s.legacy is not None}
    assert set(legacy) == {"roberta-large-mnli-mp", "gpt-tp-sharded"}
    for name, reason in legacy.items():
        assert "out of support" in reason and "llm-smp-v2" in reason
        assert shipped[name].public_view()["legacy"] == reason
    assert "legacy" not in shipped["llm-sft"].public_view()
    assert (
        jm.TemplateSpec.from_dict(shipped["gpt-tp-sharded"].to_dict()) == shipped["gpt-tp-sharded"]
    )
    assert _rule(dataclasses.replace(shipped["llm-sft"], legacy=" ")) == "legacy"
    assert _rule(dataclasses.replace(shipped["llm-sft"], legacy="x" * 257)) == "legacy"


@pytest.mark.parametrize("name", LLM)
def test_llm_template_renders(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig, name: str
) -> None:
    spec = catalog[name]
    payload: dict[str, Any] = {
        "template": name,
        "inputs": {
            "train": "s3://ftl-data-123456789012/chat/train/",
            "model": "s3://ftl-data-123456789012/models/qwen2.5-7b/",
        },
        "hyperparameters": {"learning_rate": 1e-5, "max_seq_length": 2048},
    }
    req = jm.validate_submit(payload, catalog, platform)
    out = jm.render_create_training_job(req, spec, platform, job_name=f"{name}-1")
    hp = {k: json.loads(v) for k, v in out["HyperParameters"].items()}
    assert hp["task"] == "sft" and hp["learning_rate"] == 1e-5 and hp["max_seq_length"] == 2048
    assert hp["sagemaker_torch_distributed_enabled"] is True
    assert hp["sagemaker_instance_type"] == spec.default_instance_type
    channels = {
        c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in out["InputDataConfig"]
    }
    assert channels["model"].endswith("/models/qwen2.5-7b/")
    assert out["EnableManagedSpotTraining"] is True and "CheckpointConfig" in out
    if name == "llm-smp-v2":
        assert hp["mp_parameters"] == dict(spec.distribution.mp_parameters or {})
        assert hp["sagemaker_distributed_dataparallel_enabled"] is False
        assert "sagemaker_mpi_enabled" not in hp
    else:
        assert "mp_parameters" not in hp


def test_llm_lora_overrides(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    ok = {"template": "llm-lora", "hyperparameters": {"peft": "qlora", "merge_adapter": True}}
    req = jm.validate_submit(ok, catalog, platform)
    assert req.hyperparameters["peft"] == "qlora"
    for bad in ({"peft": "none"}, {"merge_adapter": "yes"}, {"lora_r": 0}):
        payload = {"template": "llm-lora", "hyperparameters": bad}
        with pytest.raises(jm.ValidationError) as info:
            jm.validate_submit(payload, catalog, platform)
        assert info.value.field == f"hyperparameters.{next(iter(bad))}"
    with pytest.raises(jm.ValidationError):  # single node only
        jm.validate_submit({"template": "llm-lora", "instance_count": 2}, catalog, platform)


def _smp_v2(shipped: dict[str, jm.TemplateSpec], **params: Any) -> jm.TemplateSpec:
    spec = shipped["llm-smp-v2"]
    return dataclasses.replace(
        spec, distribution=dataclasses.replace(spec.distribution, mp_parameters=params)
    )


@pytest.mark.parametrize(
    ("params", "rule"),
    [
        ({}, "smp-v2-parameters"),
        ({"partitions": 1, "tensor_parallel_degree": 8}, "smp-v2-parameters"),
        ({"tensor_parallel_degree": 0}, "smp-v2-parameters"),
        ({"tensor_parallel_degree": "8"}, "smp-v2-parameters"),
        ({"sm_activation_offloading": 1}, "smp-v2-parameters"),
        ({"hybrid_shard_degree": -1}, "smp-v2-parameters"),
        ({"tensor_parallel_degree": 16}, "smp-v2-instance"),
    ],
)
def test_smp_v2_rules(
    shipped: dict[str, jm.TemplateSpec], params: dict[str, Any], rule: str
) -> None:
    assert _rule(_smp_v2(shipped, **params)) == rule


def test_smp_v2_needs_gpus_and_its_image(shipped: dict[str, jm.TemplateSpec]) -> None:
    spec = shipped["llm-smp-v2"]
    trn = dataclasses.replace(
        spec, instance_types=("ml.trn1.32xlarge",), default_instance_type="ml.trn1.32xlarge"
    )
    assert _rule(trn) == "smp-v2-instance"
    hf = dataclasses.replace(spec, framework=shipped["llm-sft-fsdp"].framework)
    assert _rule(hf) == "framework"
    smp_image_on_torchrun = dataclasses.replace(shipped["llm-sft-fsdp"], framework=spec.framework)
    assert _rule(smp_image_on_torchrun) == "framework"
    unknown = dataclasses.replace(spec, framework={**spec.framework, "image_family": "x"})
    assert _rule(unknown) == "framework"
    missing = dataclasses.replace(spec, framework={"image_family": "pytorch-smp"})
    assert _rule(missing) == "framework"
    with_pph = dataclasses.replace(
        spec, distribution=dataclasses.replace(spec.distribution, processes_per_host=8)
    )
    assert _rule(with_pph) == "distribution"
    # An explicit image needs no framework entry.
    jm.validate_template(
        dataclasses.replace(spec, framework={}).with_image(
            "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:t"
        )
    )


def test_llm_templates_can_run_isolated(shipped: dict[str, jm.TemplateSpec]) -> None:
    """The LLM templates already carry a required model channel: isolation is one flag away."""
    for name in LLM:
        jm.validate_template(
            dataclasses.replace(shipped[name], network_isolation=True), require_image=False
        )
