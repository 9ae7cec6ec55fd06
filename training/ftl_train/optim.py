"""AdamW with its moment estimates stored in bfloat16 (``optim_state_dtype=bfloat16``).

Full fine-tuning keeps float32 master weights; ``torch.optim.AdamW`` then keeps both moments
(``exp_avg``, ``exp_avg_sq``) in float32 too: 8 bytes per parameter, as much as the weights
and their gradients together. Here the moments are stored in bfloat16 (4 bytes per
parameter saved, and half the optimizer's memory traffic); each step reads them into
float32, does the update in float32 and rounds them back (round to nearest). The weights
stay float32. Not exact: the moments lose mantissa bits, which is why this is an option
and not a default; ``tests/training/test_train_kernels.py`` bounds the drift.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch


class AdamWBf16States(torch.optim.Optimizer):
    """Decoupled weight decay Adam (Loshchilov & Hutter), bf16 moments, float32 arithmetic."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.bfloat16)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.bfloat16)
                state["step"] += 1
                step = float(state["step"])
                grad = p.grad.float()
                m = state["exp_avg"].float().lerp_(grad, 1 - beta1)
                v = state["exp_avg_sq"].float().mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                state["exp_avg"].copy_(m)
                state["exp_avg_sq"].copy_(v)
                if wd:
                    p.mul_(1 - lr * wd)
                bias1 = 1 - beta1**step
                bias2 = 1 - beta2**step
                denom = (v.sqrt() / math.sqrt(bias2)).add_(eps)
                p.addcdiv_(m.to(p.dtype), denom.to(p.dtype), value=-lr / bias1)
        return loss
