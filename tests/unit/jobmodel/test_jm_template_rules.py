"""Template rules: every synth-time rule fires, and the edges that pass (jobmodel.templates.rules).

Hyperparameter rules are in test_jm_hyperparameters.py, start rules in test_jm_start_rules.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import jobmodel as jm
from tests.unit.jobmodel.template_support import rule_cases, rule_of, spec_with

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


@rule_cases(CASES)
def test_every_rule_fires(
    shipped: dict[str, jm.TemplateSpec], base: str, changes: dict[str, Any], rule: str
) -> None:
    assert rule_of(spec_with(shipped, base, **changes)) == rule


def test_missing_image_only_when_required(shipped: dict[str, jm.TemplateSpec]) -> None:
    spec = shipped["distilbert-spot"]
    jm.validate_template(spec, require_image=False)
    assert rule_of(spec, require_image=True) == "image"
    jm.validate_template(
        spec.with_image("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/repo/sub:1.0"),
        require_image=True,
    )


def test_edges_that_pass(shipped: dict[str, jm.TemplateSpec]) -> None:
    base = "bert-large-qa"
    jm.validate_template(
        spec_with(shipped, base, checkpoint=False, spot=False), require_image=False
    )
    jm.validate_template(spec_with(shipped, base, max_wait_seconds=432_000), require_image=False)
    jm.validate_template(
        spec_with(shipped, base, retry_attempts=0, keep_alive_seconds=3600), require_image=False
    )
    jm.validate_template(
        spec_with(shipped, base, tags={f"t{i}": "x" for i in range(46)}), require_image=False
    )
    jm.validate_template(
        spec_with(shipped, base, tags={"équipe": "données", "team name": "a.b:c/d=e+f-g@h"}),
        require_image=False,
    )
    jm.validate_template(
        spec_with(shipped, "distilbert-spot", max_instance_count=1), require_image=False
    )


def test_validate_rejects_non_spec() -> None:
    with pytest.raises(jm.TemplateError):
        jm.validate_template({"name": "x"})  # type: ignore[arg-type]
