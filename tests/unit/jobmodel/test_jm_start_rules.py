"""Rules that decide whether a job really starts in the container (jobmodel.distribution).

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
    assert gpt["partitions"] == 1 and gpt["tensor_parallel_degree"] == 8


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
