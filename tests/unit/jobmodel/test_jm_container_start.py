"""The container's start in the rendered request (issue 34): the platform's init as PID 1,
the image's ENTRYPOINT with ``train`` as its arguments, within the request's limits."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

import jobmodel as jm
from jobmodel.templates.container_start import (
    INIT_SCRIPT,
    MAX_ITEM,
    container_start,
    training_process_pattern,
)
from testsupport import IMAGE_ENTRYPOINT


def _render(spec: jm.TemplateSpec, platform: jm.PlatformConfig) -> dict:
    req = jm.validate_submit({"template": spec.name}, {spec.name: spec}, platform)
    return jm.render_create_training_job(req, spec, platform, job_name="j-20261122-0153-a1b2")


def test_every_shipped_template_starts_under_the_init(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    for spec in catalog.values():
        algo = _render(spec, platform)["AlgorithmSpecification"]
        assert algo["ContainerEntrypoint"] == [
            "bash",
            "-c",
            INIT_SCRIPT,
            training_process_pattern(spec.entry_point),
        ]
        assert algo["ContainerArguments"] == [*IMAGE_ENTRYPOINT, "train"]
        for item in algo["ContainerEntrypoint"] + algo["ContainerArguments"]:
            assert len(item) <= MAX_ITEM and "\n" not in item


def test_without_the_images_entrypoint_the_image_starts_itself(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    spec = dataclasses.replace(catalog["bert-large-qa"], image_entrypoint=())
    algo = _render(spec, platform)["AlgorithmSpecification"]
    assert "ContainerEntrypoint" not in algo and "ContainerArguments" not in algo


@pytest.mark.parametrize(
    "entrypoint",
    [("bash", ""), ("bash", "a\nb"), ["bash"], ("x" * 300,), ("a",) * 100],
    ids=["empty-item", "line-break", "not-a-tuple", "long-item", "too-many"],
)
def test_an_entrypoint_that_breaks_the_limits_is_refused(
    catalog: dict[str, jm.TemplateSpec], entrypoint: object
) -> None:
    spec = dataclasses.replace(catalog["bert-large-qa"], image_entrypoint=())
    object.__setattr__(spec, "image_entrypoint", entrypoint)
    with pytest.raises(jm.TemplateError) as err:
        jm.validate_template(spec)
    assert err.value.rule == "image-entrypoint", err.value


def test_the_spec_carries_the_entrypoint_through_the_catalog_file(
    catalog: dict[str, jm.TemplateSpec],
) -> None:
    spec = catalog["llm-sft"]
    again = jm.TemplateSpec.from_dict(spec.to_dict())
    assert again.image_entrypoint == IMAGE_ENTRYPOINT == spec.image_entrypoint
    assert container_start(again.image_entrypoint, again.entry_point)["ContainerArguments"] == [
        *IMAGE_ENTRYPOINT,
        "train",
    ]


TRAINING = [
    "/opt/conda/bin/python3.9 train.py --task qa --max_steps 10",  # the toolkit's process runner
    "/usr/bin/python -u train.py --fsdp full_shard auto_wrap",  # a torchrun worker
    "python3 -m mpi4py train.py --task qa",  # an mpirun rank (SMDDP, SMP v1)
    "python /opt/ml/code/train.py",
]
NOT_TRAINING = [
    "/usr/bin/python3 /usr/local/bin/torchrun --nproc_per_node 8 train.py --task qa",  # agent
    "/usr/bin/python3 -m torch.distributed.run --nproc_per_node 8 train.py",  # agent too
    "/bin/sh -c /opt/conda/bin/python3.9 train.py --task qa",  # the toolkit's shell
    "/opt/conda/bin/python3.9 /usr/local/bin/train",  # the toolkit
    "mpirun --host algo-1 -np 8 python -m mpi4py train.py",  # mpirun itself
    "bash -m start_with_right_hostname.sh train",
    "python train.pyc",
    "python xtrain.py",
]


@pytest.mark.parametrize("cmdline", TRAINING + NOT_TRAINING)
def test_the_pattern_picks_the_training_processes_only_in_bash(cmdline: str) -> None:
    """The init matches with bash's own ``=~`` (POSIX extended expressions)."""
    done = subprocess.run(
        ["bash", "-c", "[[ $1 =~ $0 ]]", training_process_pattern("train.py"), cmdline],
        check=False,
    )
    assert (done.returncode == 0) == (cmdline in TRAINING), cmdline


def test_the_pattern_takes_the_entry_points_file_name_literally() -> None:
    pattern = training_process_pattern("scripts/run+it.py")
    assert pattern.endswith(r"run\+it\.py( |$)")
