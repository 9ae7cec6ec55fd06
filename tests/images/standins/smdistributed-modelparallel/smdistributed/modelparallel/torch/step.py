"""``smp.step`` and ``StepOutput`` (stand-in): microbatches run one after another."""

from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import torch

from .exceptions import SMPValidationError
from .state import state, trace


class StepOutput:
    """A tensor's values across the microbatches of one step."""

    def __init__(self, outputs: list[Any]) -> None:
        self.outputs = list(outputs)

    def reduce_mean(self) -> torch.Tensor:
        return torch.stack([torch.as_tensor(t) for t in self.outputs]).mean(dim=0)

    def reduce_sum(self) -> torch.Tensor:
        return torch.stack([torch.as_tensor(t) for t in self.outputs]).sum(dim=0)

    def concat(self) -> torch.Tensor:
        return torch.cat([t if t.dim() else t.reshape(1) for t in self.outputs], dim=0)

    def stack(self) -> torch.Tensor:
        return torch.stack(self.outputs)

    def __len__(self) -> int:
        return len(self.outputs)

    def __repr__(self) -> str:
        return f"StepOutput({len(self.outputs)} microbatches)"


def _slice(value: Any, n: int, mb: int, axis: int) -> Any:
    if n == 1:
        return value
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return value
        total = value.size(axis)
        if total % n:
            raise SMPValidationError(
                f"batch size {total} (axis {axis}) is not divisible by microbatches {n}"
            )
        part = total // n
        return value.narrow(axis, mb * part, part)
    if hasattr(value, "smp_slice"):
        return value.smp_slice(n, mb, axis)
    if isinstance(value, Mapping):
        return type(value)({k: _slice(v, n, mb, axis) for k, v in value.items()})
    if isinstance(value, (list, tuple, set)):
        return type(value)(_slice(v, n, mb, axis) for v in value)
    return value


def _merge(outputs: list[Any], detach: bool) -> Any:
    first = outputs[0]
    if isinstance(first, torch.Tensor):
        return StepOutput([o.detach() if detach else o for o in outputs])
    if isinstance(first, Mapping):  # a ModelOutput becomes a plain dict of StepOutputs
        return {k: _merge([o[k] for o in outputs], detach) for k in first.keys()}
    if isinstance(first, (list, tuple)):
        merged = [_merge([o[i] for o in outputs], detach) for i in range(len(first))]
        return type(first)(merged) if not hasattr(first, "_fields") else type(first)(*merged)
    return first


class _StepFunction:
    def __init__(
        self,
        func: Callable[..., Any],
        non_split_inputs: list[str] | None,
        input_split_axes: dict[str, int] | None,
        detach_outputs: bool,
    ) -> None:
        functools.update_wrapper(self, func)
        self.func = func
        self.signature = inspect.signature(func)
        self.non_split = set(non_split_inputs or ())
        self.axes = dict(input_split_axes or {})
        self.detach = detach_outputs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from . import model as _model

        if state.model is None or not isinstance(state.model, _model.DistributedModel):
            raise SMPValidationError("smp.step needs a model wrapped in smp.DistributedModel")
        n = state.microbatches
        bound = self.signature.bind(*args, **kwargs)
        first = state.step_count == 0
        if first:
            state.model._run_partition_hooks()
        outputs = []
        state.in_step, state.num_microbatches = True, n
        try:
            for mb in range(n):
                state.microbatch = mb
                call_args = {
                    name: value
                    if name in self.non_split
                    else _slice(value, n, mb, self.axes.get(name, 0))
                    for name, value in bound.arguments.items()
                }
                sliced = inspect.BoundArguments(self.signature, OrderedDict(call_args))
                outputs.append(self.func(*sliced.args, **sliced.kwargs))
        finally:
            state.in_step = False
        state.step_count += 1
        trace("step", function=self.func.__name__, microbatches=n, step=state.step_count)
        state.model._run_post_step_hooks()
        return _merge(outputs, self.detach)


def step(
    func: Any = None,
    non_split_inputs: list[str] | None = None,
    input_split_axes: dict[str, int] | None = None,
    detach_outputs: bool = True,
    **_: Any,
) -> Any:
    """``@smp.step`` or ``@smp.step(non_split_inputs=..., input_split_axes=...)``."""
    if callable(func):
        return _StepFunction(func, non_split_inputs, input_split_axes, detach_outputs)
    if isinstance(func, (list, tuple)):  # step(non_split_inputs, ...) positionally
        non_split_inputs = list(func)

    def decorate(f: Callable[..., Any]) -> _StepFunction:
        return _StepFunction(f, non_split_inputs, input_split_axes, detach_outputs)

    return decorate
