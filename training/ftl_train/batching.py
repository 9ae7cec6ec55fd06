"""The global batch, split on the host over the devices this job actually got.

A capacity chain's on-demand step lets SageMaker pick the first instance type with capacity,
so the request cannot know how many GPUs (and so processes) a host has. With
``global_batch_size`` set, the entrypoint derives ``per_device_train_batch_size`` and
``gradient_accumulation_steps`` here, from the devices the Trainer counts, so every attempt of
a job takes the same number of examples per optimizer step whatever type it runs on.

The rule (docs/DECISIONS.md): devices = processes x GPUs per process (the Trainer's own count:
``world_size`` x ``n_gpu``, at least 1 each); ``global_batch_size`` must be a multiple of the
devices; each device then takes ``global_batch_size / devices`` examples per optimizer step,
as the largest micro-batch of at most ``per_device_train_batch_size`` (the cap) that divides it
evenly, times the accumulation steps that make up the rest.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .hparams import HyperparameterError, Hyperparameters

logger = logging.getLogger("ftl_train")


@dataclass(frozen=True)
class BatchPlan:
    global_batch_size: int
    devices: int
    per_device: int
    accumulation: int

    def as_dict(self) -> dict[str, int]:
        return {
            "global_batch_size": self.global_batch_size,
            "devices": self.devices,
            "per_device_train_batch_size": self.per_device,
            "gradient_accumulation_steps": self.accumulation,
        }


def plan_batch(global_batch_size: int, devices: int, cap: int) -> BatchPlan:
    """Split ``global_batch_size`` over ``devices`` with micro-batches of at most ``cap``."""
    if devices < 1 or cap < 1:
        raise ValueError(f"devices and cap must be at least 1, got {devices} and {cap}")
    if global_batch_size % devices:
        raise HyperparameterError(
            f"hyperparameter global_batch_size={global_batch_size} cannot be split evenly over "
            f"the {devices} devices this job got: it must be a multiple of {devices} "
            "(processes x GPUs per process)"
        )
    per_rank = global_batch_size // devices
    per_device = max(d for d in range(1, min(cap, per_rank) + 1) if per_rank % d == 0)
    return BatchPlan(global_batch_size, devices, per_device, per_rank // per_device)


def apply_global_batch(hp: Hyperparameters, args: Any) -> BatchPlan | None:
    """Set ``args``' per-device batch and accumulation from ``hp.global_batch_size`` (before the
    Trainer is built, which reads them); None when it is not set."""
    if hp.global_batch_size is None:
        return None
    devices = max(1, int(args.world_size)) * max(1, int(args.n_gpu))
    plan = plan_batch(hp.global_batch_size, devices, hp.per_device_train_batch_size)
    args.per_device_train_batch_size = plan.per_device
    args.gradient_accumulation_steps = plan.accumulation
    logger.info(
        "global_batch_size %d on %d device(s): per_device_train_batch_size %d x "
        "gradient_accumulation_steps %d",
        plan.global_batch_size,
        plan.devices,
        plan.per_device,
        plan.accumulation,
    )
    return plan
