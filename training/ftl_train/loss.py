"""Linear + cross-entropy in chunks (``loss_kernel=chunked``): no ``[tokens, vocab]`` logits.

A causal LM's training forward computes ``logits = lm_head(hidden)`` for every position and
then the cross-entropy in float32: for a 128k vocabulary and 8k tokens that is 4 GiB of
float32 logits plus as much again for their gradient, all memory traffic. Here the
output head and the loss run together, a chunk of ``chunk`` labelled tokens at a time, and
the gradients for the hidden states and the head's weight are computed in the same pass;
only the positions that carry a label (answer tokens with ``completion_only_loss``) are
computed at all. Nothing is approximated: the matmul runs in the same dtype as the plain
path (the autocast dtype under bf16/fp16 autocast), softmax and loss in float32, and the
loss is reduced like transformers' ``ForCausalLMLoss`` (sum over labelled tokens divided by
``num_items_in_batch`` when the Trainer passes it, else their mean).

Installed per model instance (``install``) on the standard ``*ForCausalLM`` layout
(``model.model`` the decoder, ``model.lm_head`` a bias-free linear, no logit scaling or
soft-capping), for the model types in ``SUPPORTED``; only training forwards with labels
take this path (evaluation keeps the plain forward and its logits).
"""

from __future__ import annotations

import logging
import types
from typing import Any

import torch

from . import compat

logger = logging.getLogger("ftl_train")

IGNORE = -100
DEFAULT_CHUNK = 1024
# Model types whose *ForCausalLM forward is exactly decoder -> lm_head -> ForCausalLMLoss.
SUPPORTED = frozenset({"llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "smollm3"})
_SCALING_ATTRS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier")


class _LinearCrossEntropy(torch.autograd.Function):
    """sum_i CE(h_i @ W^T, y_i) * scale, gradients computed chunk by chunk in the forward."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        scale: torch.Tensor,
        chunk: int,
        compute_dtype: torch.dtype,
    ) -> torch.Tensor:
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.empty_like(hidden) if want_h else None
        grad_w = None
        if want_w:
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        w = weight.to(compute_dtype)
        for a in range(0, hidden.shape[0], chunk):
            h = hidden[a : a + chunk].to(compute_dtype)
            y = targets[a : a + chunk]
            logits = (h @ w.t()).float()
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, y[:, None]).squeeze(1)).sum()
            # d loss / d logits = softmax - onehot, in float32, then the matmul dtype
            g = torch.exp(logits - lse[:, None])
            g[torch.arange(y.shape[0], device=y.device), y] -= 1.0
            g = (g * scale).to(compute_dtype)
            if grad_h is not None:
                grad_h[a : a + chunk] = (g @ w).to(hidden.dtype)
            if grad_w is not None:
                grad_w += (g.t() @ h).float()
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype) if grad_w is not None else None)
        return total * scale

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple:
        grad_h, grad_w = ctx.saved_tensors
        gh = grad_h * grad_out if grad_h is not None else None
        gw = grad_w * grad_out if grad_w is not None else None
        return gh, gw, None, None, None, None


@compat.compiler_disable
def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    num_items_in_batch: Any = None,
    chunk: int = DEFAULT_CHUNK,
) -> torch.Tensor:
    """Causal-LM loss of ``hidden [B, S, H]`` through the head ``weight [V, H]``.

    Labels are shifted by one as in transformers (position t predicts label t+1); -100 is
    ignored. Reduction: sum / ``num_items_in_batch`` if given, else the mean.
    """
    shifted = torch.nn.functional.pad(labels, (0, 1), value=IGNORE)[..., 1:]
    flat = shifted.reshape(-1).to(hidden.device)
    keep = (flat != IGNORE).nonzero().squeeze(-1)
    h = hidden.reshape(-1, hidden.shape[-1])[keep]
    y = flat[keep]
    n = num_items_in_batch if num_items_in_batch is not None else max(1, y.numel())
    # a device tensor stays one (no host sync per step)
    scale = 1.0 / torch.as_tensor(n, dtype=torch.float32, device=hidden.device)
    device_type = hidden.device.type
    dtype = compat.autocast_dtype(device_type) or hidden.dtype
    if y.numel() == 0:
        return (hidden.sum() * 0.0 + weight.sum() * 0.0).float()
    with torch.autocast(device_type, enabled=False):
        return _LinearCrossEntropy.apply(h, weight, y, scale, int(chunk), dtype)


def supported(model: Any) -> str | None:
    """None when ``install`` applies to this model, else why not."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in SUPPORTED:
        return f"model type {kind!r} is not one of {', '.join(sorted(SUPPORTED))}"
    head = getattr(model, "lm_head", None)
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        return "the output head is not a bias-free torch.nn.Linear (quantised or replaced)"
    if not isinstance(getattr(model, "model", None), torch.nn.Module):
        return "no decoder at model.model"
    scaled = [a for a in _SCALING_ATTRS if getattr(config, a, None) not in (None, 1, 1.0)]
    if scaled:
        return f"the model scales its logits ({', '.join(scaled)})"
    return None


def _forward(
    self: Any,
    input_ids: Any = None,
    attention_mask: Any = None,
    position_ids: Any = None,
    labels: Any = None,
    **kwargs: Any,
) -> Any:
    """The ``*ForCausalLM`` forward with the head and loss fused; plain without labels."""
    if labels is None or not self.training:
        return self._ftl_plain_forward(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            labels=labels, **kwargs,
        )  # fmt: skip
    from transformers.modeling_outputs import CausalLMOutputWithPast

    num_items = kwargs.pop("num_items_in_batch", None)
    kwargs.pop("logits_to_keep", None)
    kwargs.pop("use_cache", None)
    outputs = self.model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
        use_cache=False, **kwargs,
    )  # fmt: skip
    hidden = outputs.last_hidden_state
    loss = linear_cross_entropy(hidden, self.lm_head.weight, labels, num_items, self._ftl_chunk)
    return CausalLMOutputWithPast(loss=loss, logits=None)


def install(model: Any, chunk: int = DEFAULT_CHUNK) -> bool:
    """Route this model's training loss through ``linear_cross_entropy``; False if unsupported."""
    why = supported(model)
    if why is not None:
        logger.info("loss_kernel: plain cross-entropy (%s)", why)
        return False
    model._ftl_plain_forward = model.forward
    model._ftl_chunk = int(chunk)
    model.forward = types.MethodType(_forward, model)
    return True
