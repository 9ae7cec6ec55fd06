"""The instance catalog against the facts and sources in jobmodel/instances.py's docstring."""

from __future__ import annotations

import pytest

import jobmodel as jm

REQUIRED = [
    "ml.p3.2xlarge", "ml.p3.8xlarge", "ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge",
    "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.g4dn.xlarge",
    "ml.g4dn.12xlarge", "ml.g4dn.8xlarge", "ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.12xlarge",
    "ml.g5.48xlarge", "ml.g6.xlarge", "ml.g6.12xlarge", "ml.g6.48xlarge", "ml.trn1.32xlarge",
    "ml.trn1n.32xlarge", "ml.trn2.48xlarge", "ml.c5.xlarge", "ml.m5.xlarge",
]  # fmt: skip

SDK_EFA = {
    "ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g5.48xlarge", "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.trn1.32xlarge",
}  # fmt: skip
NEWER_EFA = {"ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge"}
SMDDP = {"ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"}


@pytest.mark.parametrize("name", REQUIRED)
def test_catalog_covers(name: str) -> None:
    it = jm.get_instance_type(name)
    assert it.name == name
    assert it.accelerators >= 0


def test_unknown_type_is_key_error() -> None:
    with pytest.raises(KeyError):
        jm.get_instance_type("ml.z9.huge")


def test_efa_facts() -> None:
    efa = {n for n, it in jm.INSTANCE_TYPES.items() if it.efa}
    assert SDK_EFA | NEWER_EFA <= efa
    for name in (
        "ml.p3.16xlarge",
        "ml.p3.2xlarge",
        "ml.g5.xlarge",
        "ml.c5.xlarge",
        "ml.g4dn.xlarge",
    ):
        assert not jm.INSTANCE_TYPES[name].efa


def test_rdma_facts() -> None:
    for name in ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.trn1.32xlarge", "ml.p5.48xlarge"):
        assert jm.INSTANCE_TYPES[name].gpudirect_rdma
    assert not jm.INSTANCE_TYPES["ml.p3dn.24xlarge"].gpudirect_rdma
    for it in jm.INSTANCE_TYPES.values():
        assert not it.gpudirect_rdma or it.efa, it.name


def test_smddp_is_exactly_the_sdk_list() -> None:
    assert {n for n, it in jm.INSTANCE_TYPES.items() if it.smddp} == SMDDP


def test_local_nvme_facts() -> None:
    nvme = {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge",
            "ml.g4dn.xlarge", "ml.g5.xlarge", "ml.g6.xlarge", "ml.trn1.32xlarge"}  # fmt: skip
    ebs = {"ml.p3.2xlarge", "ml.p3.8xlarge", "ml.p3.16xlarge", "ml.c5.xlarge", "ml.m5.xlarge"}
    for name in nvme:
        assert jm.INSTANCE_TYPES[name].local_nvme, name
    for name in ebs:
        assert not jm.INSTANCE_TYPES[name].local_nvme, name


def test_cpu_types_have_no_accelerators() -> None:
    for name in ("ml.c5.xlarge", "ml.m5.xlarge"):
        it = jm.INSTANCE_TYPES[name]
        assert (it.accelerators, it.accelerator) == (0, "none")
    assert jm.INSTANCE_TYPES["ml.p4d.24xlarge"].accelerators == 8
    assert jm.INSTANCE_TYPES["ml.trn1.32xlarge"].accelerators == 16


def test_efa_environment() -> None:
    assert jm.efa_environment(jm.INSTANCE_TYPES["ml.g5.xlarge"]) == {}
    assert jm.efa_environment(jm.INSTANCE_TYPES["ml.p3dn.24xlarge"]) == {
        "FI_PROVIDER": "efa",
        "NCCL_PROTO": "simple",
        "NCCL_SOCKET_IFNAME": "eth0",
    }
    rdma = jm.efa_environment(jm.INSTANCE_TYPES["ml.p4d.24xlarge"])
    assert rdma["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert rdma["RDMAV_FORK_SAFE"] == "1"
    assert rdma["FI_PROVIDER"] == "efa"
    rdma["FI_PROVIDER"] = "changed"  # callers get their own dict
    assert jm.efa_environment(jm.INSTANCE_TYPES["ml.p4d.24xlarge"])["FI_PROVIDER"] == "efa"


def test_catalog_is_read_only() -> None:
    with pytest.raises(TypeError):
        jm.INSTANCE_TYPES["ml.new"] = jm.INSTANCE_TYPES["ml.c5.xlarge"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        jm.INSTANCE_TYPES["ml.c5.xlarge"].efa = True  # type: ignore[misc]


def test_smddp_list_is_the_installed_sdks() -> None:
    """The smddp list is the SDK's own check (fw_utils), so it moves when the SDK moves."""
    fw_utils = pytest.importorskip("sagemaker.core.fw_utils")
    sdk = set(fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES) - {"local_gpu"}
    assert sdk == set(jm.instances.SMDDP_TYPES)


def test_named_lists_match_the_catalog() -> None:
    from jobmodel import instances

    assert {n for n, it in jm.INSTANCE_TYPES.items() if it.efa} == instances.EFA_TYPES
    assert {n for n, it in jm.INSTANCE_TYPES.items() if it.gpudirect_rdma} == instances.RDMA_TYPES
    assert instances.RDMA_TYPES <= instances.EFA_TYPES
    for name in ("ml.g6e.2xlarge", "ml.g6e.12xlarge", "ml.g6e.48xlarge"):
        assert jm.INSTANCE_TYPES[name].accelerator == "nvidia-l40s"
        assert jm.INSTANCE_TYPES[name].local_nvme


def test_every_gpu_the_catalog_names_has_a_family() -> None:
    """Issue 34: one table of GPU family -> capabilities, covering every NVIDIA accelerator."""
    from jobmodel.instances import GPU_FAMILIES, gpu_family

    named = {it.accelerator for it in jm.INSTANCE_TYPES.values()}
    assert {a for a in named if a.startswith("nvidia-")} == set(GPU_FAMILIES)
    caps = {
        a: (g.bf16, g.tf32, g.flash_attention, g.fp8)
        for a, g in GPU_FAMILIES.items()
        if a in ("nvidia-v100", "nvidia-t4", "nvidia-a100", "nvidia-l4", "nvidia-h100")
    }
    assert caps == {
        "nvidia-v100": (False, False, False, False),
        "nvidia-t4": (False, False, False, False),
        "nvidia-a100": (True, True, True, False),
        "nvidia-l4": (True, True, True, True),
        "nvidia-h100": (True, True, True, True),
    }
    assert gpu_family("ml.p4d.24xlarge") is GPU_FAMILIES["nvidia-a100"]
    assert gpu_family("ml.c5.xlarge") is None and gpu_family("ml.trn1.2xlarge") is None


def test_every_shipped_template_runs_on_known_gpu_families() -> None:
    from jobmodel.instances import gpu_family

    for spec in jm.shipped_catalog().values():
        assert all(gpu_family(t) is not None for t in spec.instance_types), spec.name
