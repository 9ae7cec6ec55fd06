"""Rules that decide whether a job really starts in the container
(jobmodel.templates.distribution_rules).

Each defect test rebuilds the template as it shipped before the fix and shows that the
rule now refuses it, so the defect cannot come back through the catalog.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import jobmodel as jm

# gpt-tp-sharded's mp_parameters as shipped before issue 11: no "partitions".
OLD_GPT_MP_PARAMETERS = {
    "tensor_parallel_degree": 8,
    "pipeline_parallel_degree": 1,
    "microbatches": 1,
    "ddp": True,
    "shard_optimizer_state": True,
    "optimize": "speed",
    "placement_strategy": "cluster",
    "offload_activations": True,
    "activation_loading_horizon": 4,
}


@pytest.fixture(scope="module")
def shipped() -> dict[str, jm.TemplateSpec]:
    return jm.shipped_catalog()


def _rule(spec: jm.TemplateSpec) -> jm.TemplateError:
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(spec, require_image=False)
    assert info.value.template == spec.name
    assert spec.name in str(info.value) and info.value.rule in str(info.value)
    return info.value


def _with_mp(spec: jm.TemplateSpec, params: dict[str, Any]) -> jm.TemplateSpec:
    return dataclasses.replace(
        spec, distribution=dataclasses.replace(spec.distribution, mp_parameters=params)
    )


# -- defect 1: SMP v1 must be enabled the way the HF Trainer detects it ---------------


def test_old_gpt_tp_sharded_is_refused(shipped: dict[str, jm.TemplateSpec]) -> None:
    err = _rule(_with_mp(shipped["gpt-tp-sharded"], OLD_GPT_MP_PARAMETERS))
    assert err.rule == "smp-partitions"
    assert "partitions" in err.message and "SM_HP_MP_PARAMETERS" in err.message


def test_shipped_smp_v1_templates_carry_partitions(shipped: dict[str, jm.TemplateSpec]) -> None:
    smp = [s for s in shipped.values() if s.distribution.kind == "smp"]
    assert {s.name for s in smp} == {"roberta-large-mnli-mp", "gpt-tp-sharded"}
    for spec in smp:
        assert "partitions" in (spec.distribution.mp_parameters or {}), spec.name
    gpt = shipped["gpt-tp-sharded"].distribution.mp_parameters or {}
    assert gpt["partitions"] == 1 and gpt["tensor_parallel_degree"] == 4


# -- issue 34: SMP v1 precision is SMP's own fp16, never bf16 -------------------------


@pytest.mark.parametrize(
    "mp_extra, hp_extra, words",
    [
        ({"bf16": True}, {}, "does not train in bf16"),
        ({}, {"bf16": True}, "does not train in bf16"),
        ({"fp16": False}, {"fp16": True}, "contradicts mp_parameters fp16 False"),
        ({"fp16": True}, {"fp16": False}, "contradicts mp_parameters fp16 True"),
    ],
)
def test_smp_v1_precision_is_set_where_smp_reads_it(
    shipped: dict[str, jm.TemplateSpec], mp_extra: dict, hp_extra: dict, words: str
) -> None:
    """The Trainer refuses bf16 with SMP v1 and trains with the SMP configuration's fp16
    (SMP >= 1.10): a template must not ask for either elsewhere."""
    for name in ("roberta-large-mnli-mp", "gpt-tp-sharded"):
        base = shipped[name]
        params = {**(base.distribution.mp_parameters or {}), **mp_extra}
        spec = dataclasses.replace(
            _with_mp(base, params), hyperparameters={**base.hyperparameters, **hp_extra}
        )
        err = _rule(spec)
        assert err.rule == "smp-parameters" and words in err.message, err.message
    agreeing = dataclasses.replace(
        shipped["gpt-tp-sharded"],
        hyperparameters={**shipped["gpt-tp-sharded"].hyperparameters, "fp16": True},
    )
    jm.validate_template(agreeing, require_image=False)


def test_smp_v1_alias_must_agree(shipped: dict[str, jm.TemplateSpec]) -> None:
    base = shipped["gpt-tp-sharded"]
    ok = {"partitions": 1, "pipeline_parallel_degree": 1, "tensor_parallel_degree": 8}
    jm.validate_template(_with_mp(base, ok), require_image=False)
    bad = {"partitions": 2, "pipeline_parallel_degree": 1, "tensor_parallel_degree": 4}
    assert _rule(_with_mp(base, bad)).rule == "smp-partitions"
    only_alias = {"pipeline_parallel_degree": 2, "tensor_parallel_degree": 4}
    assert _rule(_with_mp(base, only_alias)).rule == "smp-partitions"


def test_smp_v1_render_enables_the_trainer(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    """What the container sees: SM_HP_MP_PARAMETERS decodes to an object with partitions,
    and MPI is on (transformers' two checks in is_sagemaker_mp_enabled)."""
    spec = catalog["gpt-tp-sharded"]
    req = jm.validate_submit({"template": spec.name}, catalog, platform)
    hp = jm.render_create_training_job(req, spec, platform, job_name="j-1")["HyperParameters"]
    assert "partitions" in json.loads(hp["mp_parameters"])
    assert json.loads(hp["sagemaker_mpi_enabled"]) is True


# -- defect 2: network isolation renders the code channel and needs the model in S3 ---


def _isolated(spec: jm.TemplateSpec, *, model_required: bool = True) -> jm.TemplateSpec:
    model = jm.InputChannel("model", required=model_required, default_prefix="models/base/")
    return dataclasses.replace(spec, network_isolation=True, inputs=(*spec.inputs, model))


def test_isolated_render_stages_code_like_sdk_v2(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    spec = _isolated(catalog["bert-large-qa"])
    jm.validate_template(spec)
    req = jm.validate_submit({"template": spec.name}, {spec.name: spec}, platform)
    out = jm.render_create_training_job(req, spec, platform, job_name="iso-1")
    hp = out["HyperParameters"]
    assert json.loads(hp["sagemaker_submit_directory"]) == (
        "/opt/ml/input/data/code/sourcedir.tar.gz"
    )
    assert out["EnableNetworkIsolation"] is True
    channels = {c["ChannelName"]: c for c in out["InputDataConfig"]}
    assert list(channels)[-1] == "code"
    assert channels["code"] == {
        "ChannelName": "code",
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": platform.source_s3_uri,
                "S3DataDistributionType": "FullyReplicated",
            }
        },
    }
    assert "model" in channels
    # Nothing in the request points at S3 for code any more.
    assert platform.source_s3_uri not in json.dumps(hp)


def test_not_isolated_keeps_the_s3_submit_directory(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    spec = catalog["bert-large-qa"]
    req = jm.validate_submit({"template": spec.name}, catalog, platform)
    out = jm.render_create_training_job(req, spec, platform, job_name="open-1")
    assert json.loads(out["HyperParameters"]["sagemaker_submit_directory"]) == (
        platform.source_s3_uri
    )
    assert all(c["ChannelName"] != "code" for c in out["InputDataConfig"])


def test_isolation_needs_a_required_model_channel(shipped: dict[str, jm.TemplateSpec]) -> None:
    base = shipped["bert-large-qa"]
    err = _rule(dataclasses.replace(base, network_isolation=True))
    assert err.rule == "isolation-model" and "'model'" in err.message
    assert _rule(_isolated(base, model_required=False)).rule == "isolation-model"
    jm.validate_template(_isolated(base), require_image=False)


def test_isolation_reserves_the_code_channel(shipped: dict[str, jm.TemplateSpec]) -> None:
    base = _isolated(shipped["bert-large-qa"])
    clash = dataclasses.replace(base, inputs=(*base.inputs, jm.InputChannel("code")))
    assert _rule(clash).rule == "isolation-code-channel"
    full = tuple(jm.InputChannel(f"c{i}", required=False) for i in range(17))
    crowded = dataclasses.replace(base, inputs=(*base.inputs, *full))
    assert len(crowded.inputs) == 20
    assert _rule(crowded).rule == "isolation-code-channel"
    # Without isolation a channel may be called code (it is the template's own data).
    jm.validate_template(dataclasses.replace(clash, network_isolation=False), require_image=False)
