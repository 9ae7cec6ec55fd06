"""The instance catalog: the one place that knows what each training instance type offers.

Sources, per column (the facts are written here, with where each comes from):

* ``efa``: the SageMaker Python SDK v2's EFA list (g4dn.8xlarge,
  g4dn.12xlarge, g5.48xlarge, p3dn.24xlarge, p4d.24xlarge, p4de.24xlarge,
  p5.48xlarge, trn1.32xlarge) and, as newer AWS facts, p5e.48xlarge,
  p5en.48xlarge, trn1n.32xlarge, trn2.48xlarge and p6-b200.48xlarge.
  g6.48xlarge is marked EFA from the newer AWS facts (EC2 lists EFA for the large
  G6 sizes); the smaller g5/g6 sizes stay non-EFA because the SDK list, which is
  what SageMaker is known to wire up, does not name them.
* ``gpudirect_rdma``: AWS instance specs (p4d, p4de, trn1.32xlarge, the p5 family);
  trn1n, trn2 and p6-b200 from the newer AWS facts (same fabric generation).
* ``smddp``: the SDK's ``SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES``
  (p3.16xlarge, p3dn.24xlarge, p4d.24xlarge, p4de.24xlarge); p5 is *not* in the
  SDK v2 check, so it is not marked here.
* ``local_nvme``: SageMaker's CreateTrainingJob rule that ``VolumeKmsKeyId`` is not allowed
  on instance types with local NVMe storage (p4d, p4de, the p5 family, g4dn, g5); AWS
  instance specs add p3dn, g6, trn1/trn1n/trn2 and p6-b200. SageMaker rejects
  ``VolumeKmsKeyId`` on these (their storage is encrypted by the hardware).
  p3 (non-dn), c5 and m5 use EBS only.
* ``accelerators``: GPUs, or Neuron devices for Trainium (AWS instance specs).
* g6e (L40S, 1/4/8 GPUs, local NVMe): AWS instance specs; not marked EFA because no
  multi-node template uses it and the SDK's list does not name it.

``SMDDP_TYPES``, ``EFA_TYPES`` and ``RDMA_TYPES`` below are the same facts as named sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "EFA_TYPES",
    "GPU_FAMILIES",
    "INSTANCE_TYPES",
    "RDMA_TYPES",
    "SMDDP_TYPES",
    "GpuFamily",
    "InstanceType",
    "efa_environment",
    "get_instance_type",
    "gpu_family",
]


@dataclass(frozen=True, slots=True)
class InstanceType:
    """What a SageMaker training instance type offers to a distributed job."""

    name: str
    accelerators: int
    accelerator: str
    efa: bool
    gpudirect_rdma: bool
    smddp: bool
    local_nvme: bool


def _it(
    name: str,
    accelerators: int,
    accelerator: str,
    *,
    efa: bool = False,
    rdma: bool = False,
    smddp: bool = False,
    nvme: bool = False,
) -> InstanceType:
    return InstanceType(name, accelerators, accelerator, efa, rdma, smddp, nvme)


_CATALOG: tuple[InstanceType, ...] = (
    # P3: V100, EBS only except p3dn.
    _it("ml.p3.2xlarge", 1, "nvidia-v100"),
    _it("ml.p3.8xlarge", 4, "nvidia-v100"),
    _it("ml.p3.16xlarge", 8, "nvidia-v100", smddp=True),
    _it("ml.p3dn.24xlarge", 8, "nvidia-v100", efa=True, smddp=True, nvme=True),
    # P4: A100.
    _it("ml.p4d.24xlarge", 8, "nvidia-a100", efa=True, rdma=True, smddp=True, nvme=True),
    _it("ml.p4de.24xlarge", 8, "nvidia-a100", efa=True, rdma=True, smddp=True, nvme=True),
    # P5 family: H100 / H200 (no smddp in the SDK v2 check).
    _it("ml.p5.48xlarge", 8, "nvidia-h100", efa=True, rdma=True, nvme=True),
    _it("ml.p5e.48xlarge", 8, "nvidia-h200", efa=True, rdma=True, nvme=True),
    _it("ml.p5en.48xlarge", 8, "nvidia-h200", efa=True, rdma=True, nvme=True),
    # P6: B200 (newer AWS facts).
    _it("ml.p6-b200.48xlarge", 8, "nvidia-b200", efa=True, rdma=True, nvme=True),
    # G4dn: T4.
    _it("ml.g4dn.xlarge", 1, "nvidia-t4", nvme=True),
    _it("ml.g4dn.2xlarge", 1, "nvidia-t4", nvme=True),
    _it("ml.g4dn.8xlarge", 1, "nvidia-t4", efa=True, nvme=True),
    _it("ml.g4dn.12xlarge", 4, "nvidia-t4", efa=True, nvme=True),
    # G5: A10G.
    _it("ml.g5.xlarge", 1, "nvidia-a10g", nvme=True),
    _it("ml.g5.2xlarge", 1, "nvidia-a10g", nvme=True),
    _it("ml.g5.4xlarge", 1, "nvidia-a10g", nvme=True),
    _it("ml.g5.12xlarge", 4, "nvidia-a10g", nvme=True),
    _it("ml.g5.24xlarge", 4, "nvidia-a10g", nvme=True),
    _it("ml.g5.48xlarge", 8, "nvidia-a10g", efa=True, nvme=True),
    # G6: L4.
    _it("ml.g6.xlarge", 1, "nvidia-l4", nvme=True),
    _it("ml.g6.2xlarge", 1, "nvidia-l4", nvme=True),
    _it("ml.g6.12xlarge", 4, "nvidia-l4", nvme=True),
    _it("ml.g6.48xlarge", 8, "nvidia-l4", efa=True, nvme=True),
    # G6e: L40S (48 GB each), local NVMe (AWS instance specs).
    _it("ml.g6e.xlarge", 1, "nvidia-l40s", nvme=True),
    _it("ml.g6e.2xlarge", 1, "nvidia-l40s", nvme=True),
    _it("ml.g6e.4xlarge", 1, "nvidia-l40s", nvme=True),
    _it("ml.g6e.8xlarge", 1, "nvidia-l40s", nvme=True),
    _it("ml.g6e.12xlarge", 4, "nvidia-l40s", nvme=True),
    _it("ml.g6e.16xlarge", 1, "nvidia-l40s", nvme=True),
    _it("ml.g6e.24xlarge", 4, "nvidia-l40s", nvme=True),
    _it("ml.g6e.48xlarge", 8, "nvidia-l40s", nvme=True),
    # Trainium: Neuron devices.
    _it("ml.trn1.2xlarge", 1, "aws-trainium", nvme=True),
    _it("ml.trn1.32xlarge", 16, "aws-trainium", efa=True, rdma=True, nvme=True),
    _it("ml.trn1n.32xlarge", 16, "aws-trainium", efa=True, rdma=True, nvme=True),
    _it("ml.trn2.48xlarge", 16, "aws-trainium2", efa=True, rdma=True, nvme=True),
    # CPU only, EBS only.
    _it("ml.c5.xlarge", 0, "none"),
    _it("ml.c5.2xlarge", 0, "none"),
    _it("ml.m5.xlarge", 0, "none"),
    _it("ml.m5.2xlarge", 0, "none"),
)

# The three capability lists, each with its source, as the catalog above marks them.
# smddp: SageMaker Python SDK ``fw_utils.SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES`` (v2
# ``sagemaker/fw_utils.py``; unchanged in v3 ``sagemaker/core/fw_utils.py``, pinned by
# tests/unit/jobmodel/test_jm_instances.py against the installed SDK), without ``local_gpu``.
SMDDP_TYPES = frozenset(
    {"ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"}
)
# EFA: the SDK's EFA list (g4dn.8xlarge/12xlarge, g5.48xlarge, p3dn, p4d, p4de,
# p5, trn1.32xlarge) plus AWS's SageMaker/EC2 EFA-supported types for the newer families
# (p5e, p5en, p6-b200, trn1n, trn2, g6.48xlarge).
EFA_TYPES = frozenset(i.name for i in _CATALOG if i.efa)
# GPUDirect RDMA over EFA (FI_EFA_USE_DEVICE_RDMA=1): AWS instance specs (p4d, p4de, the p5
# family, p6-b200, trn1.32xlarge/trn1n/trn2).
RDMA_TYPES = frozenset(i.name for i in _CATALOG if i.gpudirect_rdma)
if {i.name for i in _CATALOG if i.smddp} != SMDDP_TYPES:  # pragma: no cover - edit guard
    raise AssertionError("instance catalog smddp marks differ from SMDDP_TYPES")

INSTANCE_TYPES: Mapping[str, InstanceType] = MappingProxyType({i.name: i for i in _CATALOG})
"""Every instance type the platform knows, by name (read-only)."""


def get_instance_type(name: str) -> InstanceType:
    """The catalog entry for ``name``; ``KeyError`` if the platform does not know it."""
    return INSTANCE_TYPES[name]


_EFA_BASE = {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "NCCL_SOCKET_IFNAME": "eth0"}
_EFA_RDMA = {**_EFA_BASE, "FI_EFA_USE_DEVICE_RDMA": "1", "RDMAV_FORK_SAFE": "1"}


def efa_environment(instance: InstanceType) -> dict[str, str]:
    """Environment variables that the SageMaker SDK sets for EFA instances (a new dict).

    Empty for non-EFA types; ``FI_PROVIDER``, ``NCCL_PROTO`` and ``NCCL_SOCKET_IFNAME``
    for EFA types; plus ``FI_EFA_USE_DEVICE_RDMA`` and ``RDMAV_FORK_SAFE`` where the
    hardware does GPUDirect RDMA.
    """
    if not instance.efa:
        return {}
    return dict(_EFA_RDMA if instance.gpudirect_rdma else _EFA_BASE)


# ---------------------------------------------------------------- GPU families (issue 34)


@dataclass(frozen=True, slots=True)
class GpuFamily:
    """What one GPU of an instance family can do, as the training libraries decide it.

    ``compute_capability`` is NVIDIA's (the CUDA GPUs table, developer.nvidia.com/cuda-gpus:
    V100 7.0, T4 7.5, A100 8.0, A10G 8.6, L4 and L40S 8.9, H100 and H200 9.0, B200 10.0).
    The capabilities follow from it as the libraries test them: bfloat16 and TF32 tensor
    cores from Ampere (8.0; torch's ``is_bf16_supported``, transformers'
    ``is_torch_tf32_available``); FlashAttention-2 on Ampere, Ada and Hopper (its README:
    8.0 and up); FP8 tensor cores from Ada (8.9; Transformer Engine's FP8 support).
    The training entrypoint cannot import this package in the image: it detects the same
    facts from the device (``ftl_train.env.DeviceCaps.detect``); the image matrix's
    "as on" runs build ``DeviceCaps`` from this table (tests/images/test_as_on_gpu.py).
    """

    accelerator: str
    name: str
    compute_capability: tuple[int, int]

    @property
    def bf16(self) -> bool:
        return self.compute_capability >= (8, 0)

    @property
    def tf32(self) -> bool:
        return self.compute_capability >= (8, 0)

    @property
    def flash_attention(self) -> bool:
        return self.compute_capability >= (8, 0)

    @property
    def fp8(self) -> bool:
        return self.compute_capability >= (8, 9)


GPU_FAMILIES: Mapping[str, GpuFamily] = MappingProxyType(
    {
        g.accelerator: g
        for g in (
            GpuFamily("nvidia-v100", "Tesla V100", (7, 0)),
            GpuFamily("nvidia-t4", "Tesla T4", (7, 5)),
            GpuFamily("nvidia-a100", "A100", (8, 0)),
            GpuFamily("nvidia-a10g", "A10G", (8, 6)),
            GpuFamily("nvidia-l4", "L4", (8, 9)),
            GpuFamily("nvidia-l40s", "L40S", (8, 9)),
            GpuFamily("nvidia-h100", "H100", (9, 0)),
            GpuFamily("nvidia-h200", "H200", (9, 0)),
            GpuFamily("nvidia-b200", "B200", (10, 0)),
        )
    }
)
"""Every NVIDIA GPU the instance catalog names, by its ``accelerator`` value (read-only)."""


def gpu_family(instance_type: str) -> GpuFamily | None:
    """The GPU family of an instance type; None for CPU and Trainium types.
    ``KeyError`` if the platform does not know the type."""
    return GPU_FAMILIES.get(INSTANCE_TYPES[instance_type].accelerator)
