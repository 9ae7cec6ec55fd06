"""Tensor parallelism (stand-in): which modules SMP v1 would split, and the rules it checks.

SMP v1 documents (SageMaker Developer Guide, "Tensor Parallelism" and "Support for Hugging
Face Transformer Models" of the SMP v1 library; seed 004 points to the same guide for the
"additional script changes"):

- tensor parallelism applies only to modules *created inside* ``smp.tensor_parallelism()``
  (or ``smp.model_creation(tensor_parallelism=True)``) or marked with
  ``smp.set_tensor_parallelism(module, True)``; everything else stays replicated, silently;
- the library replaces the supported modules when the model is wrapped in
  ``smp.DistributedModel``; for Hugging Face models it has built-in translations for GPT-2,
  BERT and RoBERTa (v1.7+), GPT-J (v1.8+) and GPT-Neo (v1.10+);
- attention is split by heads: the head count must divide by ``tensor_parallel_degree``.

What this does on one process: it records the split (per transformer layer: the heads and
MLP width each tensor-parallel rank holds) in ``smp.state.tp_split`` and the trace
(``tensor_parallel.split``), and refuses a head count the degree does not divide. No weight
is sharded and no tensor-parallel math runs; a run computes what the unsplit model computes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from .exceptions import SMPValidationError
from .state import state, trace

# Hugging Face model types with SMP v1's built-in tensor-parallel translation, and the class
# of their transformer layer (the unit the library replaces with DistributedTransformerLayer).
SUPPORTED = {
    "gpt2": "GPT2Block",
    "bert": "BertLayer",
    "roberta": "RobertaLayer",
    "gptj": "GPTJBlock",
    "gpt_neo": "GPTNeoBlock",
}


@contextlib.contextmanager
def creating(enabled: bool = True) -> Iterator[None]:
    """Marks every ``torch.nn.Module`` constructed inside (``tensor_parallelism()``)."""
    if not enabled:
        yield
        return
    original = torch.nn.Module.__init__

    def __init__(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        original(self, *args, **kwargs)
        state.tp_marked.add(id(self))

    torch.nn.Module.__init__ = __init__  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.__init__ = original  # type: ignore[method-assign]


def mark(module: torch.nn.Module, enabled: bool = True) -> None:
    """``smp.set_tensor_parallelism(module, enabled)``: the module and its submodules."""
    for sub in module.modules():
        if enabled:
            state.tp_marked.add(id(sub))
        else:
            state.tp_marked.discard(id(sub))
    trace("set_tensor_parallelism", module=type(module).__name__, enabled=enabled)


def _heads(config: Any) -> int | None:
    for name in ("num_attention_heads", "n_head", "num_heads"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return None


def split(model: torch.nn.Module) -> list[str]:
    """At ``DistributedModel``: the marked layers of a supported model, split by the degree.
    Returns the split layers' names (empty: nothing is tensor-parallel)."""
    degree = state.cfg.tensor_parallel_degree if state.cfg else 1
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    layer_class = SUPPORTED.get(str(model_type))
    marked = id(model) in state.tp_marked or any(id(m) in state.tp_marked for m in model.modules())
    names: list[str] = []
    if degree > 1 and marked and layer_class is not None:
        heads = _heads(config)
        if heads is None or heads % degree:
            raise SMPValidationError(
                f"tensor_parallel_degree {degree} does not divide the {heads} attention heads "
                f"of this {model_type} model"
            )
        names = [
            name
            for name, sub in model.named_modules()
            if type(sub).__name__ == layer_class and id(sub) in state.tp_marked
        ]
        hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
        record = {
            "model_type": model_type,
            "degree": degree,
            "layers": len(names),
            "heads": heads,
            "heads_per_rank": heads // degree,
            "hidden_per_rank": (hidden // degree) if hidden else None,
        }
        state.tp_split.append(record)
        trace("tensor_parallel.split", **record)
    elif degree > 1:
        trace(
            "tensor_parallel.none",
            degree=degree,
            model_type=model_type,
            marked=marked,
            supported=layer_class is not None,
        )
    return names
