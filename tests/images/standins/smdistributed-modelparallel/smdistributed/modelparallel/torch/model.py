"""``smp.DistributedModel`` (stand-in): wraps the module whole, on one partition."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from .exceptions import StepUsageError
from .state import state, trace


class _Handle:
    def __init__(self, hooks: list[Any], hook: Any) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


class DistributedModel(torch.nn.Module):
    """The whole model on this process's one partition; forward and backward only inside
    ``smp.step``, backward averaged over the step's microbatches."""

    def __init__(
        self,
        module: torch.nn.Module,
        trace_device: str = "gpu",
        trace_execution_times: bool = False,
        overlapping_allreduce: bool = True,
        backward_passes_per_step: int = 1,
        average_grads_across_microbatches: bool = True,
        **kwargs: Any,
    ) -> None:
        if isinstance(module, DistributedModel):
            raise StepUsageError("the model is already a DistributedModel")
        super().__init__()
        self.module = module
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.average_grads_across_microbatches = bool(average_grads_across_microbatches)
        self.partitioned = False
        self._post_step_hooks: list[Any] = []
        self._post_partition_hooks: list[Any] = []
        from . import tensor_parallel

        self._tp_layers = tensor_parallel.split(module)
        state.model = self
        trace(
            "DistributedModel",
            module=type(module).__name__,
            backward_passes_per_step=self.backward_passes_per_step,
            options=sorted(kwargs),
        )

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            modules = self.__dict__.get("_modules", {})
            if "module" in modules:
                return getattr(modules["module"], name)
            raise

    # -- forward and backward, inside smp.step only
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not state.in_step:
            raise StepUsageError("DistributedModel is called inside an smp.step function only")
        return self.module(*args, **kwargs)

    def backward(self, tensors: Any, grad_tensors: Any = None) -> None:
        if not state.in_step:
            raise StepUsageError("DistributedModel.backward runs inside an smp.step function only")
        scale = 1.0 / state.num_microbatches if self.average_grads_across_microbatches else 1.0
        outs = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
        if grad_tensors is None:
            for t in outs:
                if t.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
            grads = [torch.full_like(t, scale) for t in outs]
        else:
            given = (
                list(grad_tensors) if isinstance(grad_tensors, (list, tuple)) else [grad_tensors]
            )
            grads = [g * scale for g in given]
        torch.autograd.backward(outs, grads)
        if state.microbatch == 0:
            trace("DistributedModel.backward", microbatches=state.num_microbatches, scale=scale)

    # -- hooks
    def register_post_step_hook(self, hook: Any) -> _Handle:
        """``hook(model, optimizer)`` once, after the next ``smp.step`` call."""
        self._post_step_hooks.append(hook)
        trace("DistributedModel.register_post_step_hook")
        return _Handle(self._post_step_hooks, hook)

    def register_post_partition_hook(self, hook: Any) -> _Handle:
        self._post_partition_hooks.append(hook)
        return _Handle(self._post_partition_hooks, hook)

    def _run_partition_hooks(self) -> None:
        if self.partitioned:
            return
        self.partitioned = True
        hooks, self._post_partition_hooks = self._post_partition_hooks, []
        for hook in hooks:
            hook(self, state.optimizer)

    def _run_post_step_hooks(self) -> None:
        hooks, self._post_step_hooks = self._post_step_hooks, []
        for hook in hooks:
            trace("post_step_hook", hook=getattr(hook, "__name__", repr(hook)))
            hook(self, state.optimizer)

    # -- state
    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """The full model's state, under the wrapped module's own names."""
        trace("DistributedModel.state_dict")
        return self.module.state_dict(*args, **kwargs)

    def local_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        sd = self.module.state_dict(*args, **kwargs)
        sd["_smp_is_partial"] = True
        return sd

    def load_state_dict(self, state_dict: Any, strict: bool = True) -> Any:  # type: ignore[override]
        sd = dict(state_dict)
        partial = sd.pop("_smp_is_partial", False)
        trace("DistributedModel.load_state_dict", strict=strict, partial=bool(partial))
        return self.module.load_state_dict(sd, strict=strict)

    # -- this process's share: everything
    def local_parameters(self) -> Iterator[torch.nn.Parameter]:
        return self.module.parameters()

    def local_named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return self.module.named_parameters()

    def local_buffers(self) -> Iterator[torch.Tensor]:
        return self.module.buffers()

    def local_named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]:
        return self.module.named_buffers()

    def local_modules(self) -> Iterator[torch.nn.Module]:
        return self.module.modules()

    def local_named_modules(self) -> Iterator[tuple[str, torch.nn.Module]]:
        return self.module.named_modules()

    def distributed_modules(self) -> Iterator[torch.nn.Module]:
        """The tensor-parallel layers (split by ``tensor_parallel.split``)."""
        return (self.module.get_submodule(name) for name in self._tp_layers)

    def is_distributed_parameter(self, param: Any) -> bool:
        return any(param is p for m in self.distributed_modules() for p in m.parameters())

    def is_distributed_buffer(self, buf: Any) -> bool:
        return False

    def is_scaled_batch_parameter(self, param: Any) -> bool:
        return False

    def is_scaled_batch_buffer(self, buf: Any) -> bool:
        return False

    def default_reducer_named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return self.module.named_parameters()

    def scaled_batch_reducer_named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return iter(())
