"""One table row per distribution kind: what it renders, what it needs of an instance, and
its launch rules; and ``Distribution``, a template's choice of kind (the rows render it).

Standard library only. The renderer (``render._hyperparameters``), the hyperparameter rules
(``hyperparameters.DISTRIBUTION_KEYS``: the reserved keys a template may not set and the
count in its length check), template validation (``distribution_rules.check_distribution``)
and request validation (``requests.submit_parts.instance_count``) all read :data:`KINDS`, so a new
kind is one new row here (and a test ties each row's rendered keys to its declared ``keys``).
``spec`` re-exports ``Distribution`` beside the other template types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from ._shapes import check_keys, freeze_map

__all__ = ["KINDS", "Distribution", "DistributionKind"]


@dataclass(frozen=True, slots=True)
class Distribution:
    """How the job spreads over processes and nodes (rendered to toolkit hyperparameters)."""

    kind: str = "none"
    processes_per_host: int | None = None
    custom_mpi_options: str = ""
    mp_parameters: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mp_parameters", freeze_map(self.mp_parameters))

    def __hash__(self) -> int:
        return hash((self.kind, self.processes_per_host, self.custom_mpi_options))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "processes_per_host": self.processes_per_host,
            "custom_mpi_options": self.custom_mpi_options,
            "mp_parameters": None if self.mp_parameters is None else dict(self.mp_parameters),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, template: str = "?") -> Distribution:
        check_keys(template, "distribution", d, [f.name for f in fields(cls)], ("kind",))
        return cls(**d)


Render = Callable[[Distribution, str], dict[str, Any]]


@dataclass(frozen=True)
class DistributionKind:
    """A distribution kind.

    ``keys``: the hyperparameters it renders (reserved: a template may not set them).
    ``render(distribution, instance_type)``: their values, as SDK v2's estimator sends them.
    ``multi_node``: it can run on more than one instance (which then need EFA).
    ``needs_smddp``: every instance type must support SageMaker's data-parallel library.
    ``processes_per_host``: it takes (and needs) ``processes_per_host``, at most one per
    accelerator. ``mp_parameters``: which model-parallel parameters it takes (``"smp"``: SMP
    v1, ``"smp-v2"``: SMP v2; ``None``: none), and so which of ``distribution``'s start rules
    check them. ``image_family``: the one image family it runs on (a family a kind names
    serves that kind only); ``None``: the default family.
    """

    name: str
    keys: tuple[str, ...]
    render: Render
    multi_node: bool = True
    needs_smddp: bool = False
    processes_per_host: bool = False
    mp_parameters: str | None = None
    image_family: str | None = None


def _none(dist: Distribution, instance_type: str) -> dict[str, Any]:
    return {}


def _torchrun(dist: Distribution, instance_type: str) -> dict[str, Any]:
    return {"sagemaker_torch_distributed_enabled": True, "sagemaker_instance_type": instance_type}


def _smddp(dist: Distribution, instance_type: str) -> dict[str, Any]:
    return {
        "sagemaker_distributed_dataparallel_enabled": True,
        "sagemaker_instance_type": instance_type,
        "sagemaker_distributed_dataparallel_custom_mpi_options": dist.custom_mpi_options,
    }


def _mpi(dist: Distribution, instance_type: str) -> dict[str, Any]:
    return {
        "sagemaker_mpi_enabled": True,
        "sagemaker_mpi_num_of_processes_per_host": dist.processes_per_host,
        "sagemaker_mpi_custom_mpi_options": dist.custom_mpi_options,
    }


def _smp(dist: Distribution, instance_type: str) -> dict[str, Any]:
    return {"mp_parameters": dict(dist.mp_parameters or {}), **_mpi(dist, instance_type)}


def _smp_v2(dist: Distribution, instance_type: str) -> dict[str, Any]:
    # SDK v2 PyTorch estimator with torch_distributed and smdistributed.modelparallel:
    # Framework._distribution_configuration adds mp_parameters, smddp off and the instance
    # type; _pytorch_distribution_configuration turns torchrun on.
    return {
        "mp_parameters": dict(dist.mp_parameters or {}),
        "sagemaker_distributed_dataparallel_enabled": False,
        "sagemaker_instance_type": instance_type,
        "sagemaker_torch_distributed_enabled": True,
    }


_MPI_KEYS = (
    "sagemaker_mpi_enabled",
    "sagemaker_mpi_num_of_processes_per_host",
    "sagemaker_mpi_custom_mpi_options",
)

KINDS: Mapping[str, DistributionKind] = MappingProxyType(
    {
        k.name: k
        for k in (
            DistributionKind("none", (), _none, multi_node=False),
            DistributionKind(
                "torchrun",
                ("sagemaker_torch_distributed_enabled", "sagemaker_instance_type"),
                _torchrun,
            ),
            DistributionKind(
                "smddp",
                (
                    "sagemaker_distributed_dataparallel_enabled",
                    "sagemaker_instance_type",
                    "sagemaker_distributed_dataparallel_custom_mpi_options",
                ),
                _smddp,
                needs_smddp=True,
            ),
            DistributionKind(
                "smp",
                ("mp_parameters", *_MPI_KEYS),
                _smp,
                processes_per_host=True,
                mp_parameters="smp",
            ),
            DistributionKind("mpi", _MPI_KEYS, _mpi, processes_per_host=True),
            DistributionKind(
                "smp-v2",
                (
                    "mp_parameters",
                    "sagemaker_distributed_dataparallel_enabled",
                    "sagemaker_instance_type",
                    "sagemaker_torch_distributed_enabled",
                ),
                _smp_v2,
                mp_parameters="smp-v2",
                image_family="pytorch-smp",
            ),
        )
    }
)
