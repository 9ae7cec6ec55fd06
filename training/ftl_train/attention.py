"""Attention over packed rows without a dense mask (``attn_implementation=varlen``).

A packed row holds several examples back to back; ``position_ids`` restart at 0 for each
(``sft.pack_rows``). SDPA and eager get a dense block-diagonal ``[batch, 1, seq, seq]`` mask
for that, which costs memory and makes SDPA leave its flash kernel. This attention cuts
each row into its examples instead (a new example wherever a position is not the previous
one plus 1, transformers' own packed-sequence rule) and attends within each, causally:

* on a CUDA GPU in bf16/fp16, PyTorch's variable-length flash kernel
  (``torch.nn.attention.varlen.varlen_attn``, torch >= 2.10) over all examples at once;
* otherwise (a CPU, float32, attention dropout, or a torch without it) SDPA once per
  example with ``is_causal``: no mask is built, and the result is the same attention.

A 2D padding mask (unpacked, padded batches) is honoured: padding tokens are dropped first
and their outputs are zero. Registered with transformers' attention and mask interfaces
under ``ftl_varlen``; the mask interface is FlashAttention-2's, which hands over no mask for
a packed batch and the 2D padding mask otherwise.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from . import compat

logger = logging.getLogger("ftl_train")

NAME = "ftl_varlen"


def torch_varlen() -> Any:
    """``varlen_attn`` when this torch has it (a CUDA kernel), else None."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def segment_starts(position_ids: torch.Tensor | None, batch: int, seq: int, device: Any) -> Any:
    """Boolean ``[batch, seq]``: True where an example starts (each row's first token too)."""
    starts = torch.zeros(batch, seq, dtype=torch.bool, device=device)
    starts[:, 0] = True
    if position_ids is not None and seq > 1:
        pos = position_ids.to(device).expand(batch, -1)
        starts[:, 1:] = pos[:, 1:] != pos[:, :-1] + 1
    return starts


def cu_seqlens(
    position_ids: torch.Tensor | None, padding_mask: torch.Tensor | None, batch: int, seq: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(flat indices of the kept tokens, int32 cumulative lengths of the examples, longest).

    Tokens are taken row by row; a padding mask (1 = token) drops padding, and an example
    never crosses a row or a dropped token.
    """
    device = position_ids.device if position_ids is not None else None
    if padding_mask is not None:
        device = padding_mask.device
    starts = segment_starts(position_ids, batch, seq, device)
    keep = torch.ones(batch, seq, dtype=torch.bool, device=device)
    if padding_mask is not None:
        keep = padding_mask.to(torch.bool)
        # a token right after a dropped one starts an example
        starts[:, 1:] |= ~keep[:, :-1]
    flat_keep = keep.reshape(-1)
    index = flat_keep.nonzero().squeeze(-1)
    first = starts.reshape(-1)[index]
    bounds = torch.cat([first.nonzero().squeeze(-1), index.new_tensor([index.numel()])])
    lengths = bounds[1:] - bounds[:-1]
    longest = int(lengths.max()) if lengths.numel() else 0
    return index, bounds.to(torch.int32), longest


def compute_dtype(q: torch.Tensor) -> Any:
    """The dtype the kernel should see: under autocast, autocast's 16-bit dtype. Full
    fine-tuning keeps float32 weights, and the rotary embedding then hands attention float32
    queries and keys even inside bf16 autocast; SDPA casts them down itself (it is on
    autocast's lower-precision list), so the fused varlen kernel gets the same inputs."""
    dtype = compat.autocast_dtype(q.device.type) if q.is_cuda else None
    return dtype if dtype in (torch.float16, torch.bfloat16) else q.dtype


def use_fused(q: torch.Tensor, dropout: float, training: bool) -> bool:
    """The flash kernel takes CUDA 16-bit tensors (after autocast's cast) and has no dropout."""
    dtype = compute_dtype(q)
    return q.is_cuda and dtype in (torch.float16, torch.bfloat16) and not (dropout and training)


def fused_call(
    kernel: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bounds: torch.Tensor,
    longest: int,
    scaling: float | None,
    causal: bool,
) -> torch.Tensor:
    """The varlen kernel on ``[T, H, D]`` tensors in the compute dtype; grouped key/value heads
    passed as they are where the kernel takes ``enable_gqa``, repeated where it does not."""
    dtype = compute_dtype(q)
    q, k, v = (t.to(dtype) for t in (q, k, v))
    gqa = k.shape[1] != q.shape[1]
    extra: dict[str, Any] = {}
    if compat.varlen_takes_gqa(kernel):
        extra["enable_gqa"] = gqa
    elif gqa:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    window = (-1, 0) if causal else (-1, -1)
    return kernel(
        q, k, v, bounds, bounds, longest, longest, scale=scaling, window_size=window, **extra
    )


def _per_example_sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bounds: torch.Tensor,
    scaling: float | None,
    dropout: float,
    causal: bool,
    gqa: bool,
) -> torch.Tensor:
    """SDPA once per example ([T, H, D] in, [T, H, D] out): no mask anywhere."""
    out = torch.empty(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype, device=q.device)
    edges = bounds.tolist()
    for a, b in zip(edges[:-1], edges[1:]):
        qs, ks, vs = (t[a:b].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(
            qs, ks, vs, dropout_p=dropout, is_causal=causal, scale=scaling, enable_gqa=gqa
        )
        out[a:b] = o.squeeze(0).transpose(0, 1)
    return out


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: ``[B, H, S, D]`` in, ``[B, S, H, D]`` out."""
    if sliding_window is not None or softcap is not None:
        raise ValueError("attn_implementation=varlen has no sliding window or logit soft-capping")
    if attention_mask is not None and attention_mask.dim() != 2:
        raise ValueError("attn_implementation=varlen takes a 2D padding mask only")
    batch, heads, seq, _ = query.shape
    causal = bool(module.is_causal if is_causal is None else is_causal)
    index, bounds, longest = cu_seqlens(kwargs.get("position_ids"), attention_mask, batch, seq)

    def flat(t: torch.Tensor) -> torch.Tensor:
        return t.transpose(1, 2).reshape(batch * seq, t.shape[1], t.shape[-1])[index]

    q, k, v = flat(query), flat(key), flat(value)
    gqa = key.shape[1] != heads
    kernel = torch_varlen()
    if kernel is not None and use_fused(q, dropout, module.training):
        out = fused_call(kernel, q, k, v, bounds, longest, scaling, causal)
    else:
        p = dropout if module.training else 0.0
        out = _per_example_sdpa(q, k, v, bounds, scaling, p, causal, gqa)
    full = out.new_zeros(batch * seq, heads, out.shape[-1])
    full[index] = out
    return full.view(batch, seq, heads, out.shape[-1]), None


def available() -> bool:
    """Whether this transformers takes a registered attention: ``AttentionInterface`` and
    ``masking_utils.AttentionMaskInterface`` (recent releases; not the SMP v2 image's 4.44)."""
    try:
        import transformers
        from transformers import masking_utils
    except ImportError:
        return False
    return hasattr(transformers, "AttentionInterface") and hasattr(
        masking_utils, "AttentionMaskInterface"
    )


def register() -> str:
    """Make ``ftl_varlen`` known to transformers (attention and mask); returns the name."""
    if not available():
        from importlib.metadata import version  # named in the message only, never compared

        from .hparams import HyperparameterError

        raise HyperparameterError(
            f"attn_implementation=varlen needs a transformers with AttentionInterface and "
            f"masking_utils; this image has transformers {version('transformers')}"
        )
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register(NAME, varlen_attention)
    AttentionMaskInterface.register(NAME, flash_attention_mask)
    return NAME
