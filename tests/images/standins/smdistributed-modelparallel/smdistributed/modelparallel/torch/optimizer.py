"""``smp.DistributedOptimizer`` (stand-in): the same optimizer, with SMP's extra methods.

The real wrapper returns an object that is still an instance of the optimizer's class (LR
schedulers check ``isinstance(optimizer, torch.optim.Optimizer)``); so does this one: an
instance of a subclass of the optimizer's class sharing its parameter groups and state.
"""

from __future__ import annotations

from typing import Any

import torch

from .state import state, trace


class _SMPOptimizerMixin:
    optimizer: Any

    def local_state_dict(self, gather_if_shard: bool = True) -> dict[str, Any]:
        sd = dict(super().state_dict())  # type: ignore[misc]
        sd["_smp_is_partial"] = True
        trace("DistributedOptimizer.local_state_dict", gather_if_shard=gather_if_shard)
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        sd = dict(state_dict)
        sd.pop("_smp_is_partial", None)
        trace("DistributedOptimizer.load_state_dict")
        super().load_state_dict(sd)  # type: ignore[misc]

    def clip_master_grads(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        params = [p for g in self.param_groups for p in g["params"]]  # type: ignore[attr-defined]
        return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)


def DistributedOptimizer(  # noqa: N802 - the library's name
    optimizer: torch.optim.Optimizer,
    static_loss_scale: float | None = 1.0,
    dynamic_loss_scale: bool = False,
    **dynamic_loss_args: Any,
) -> torch.optim.Optimizer:
    cls = type(optimizer)
    wrapped_cls = type(f"DistributedOptimizer[{cls.__name__}]", (_SMPOptimizerMixin, cls), {})
    wrapped = wrapped_cls.__new__(wrapped_cls)
    wrapped.__dict__.update(optimizer.__dict__)  # same param_groups, state and defaults
    wrapped.optimizer = optimizer  # transformers reads .optimizer when SMP fp16 is on
    state.optimizer = wrapped
    trace("DistributedOptimizer", optimizer=cls.__name__)
    return wrapped
