"""Performance defaults: what the entrypoint does when a hyperparameter is left unset.

``bench/train_throughput.py`` imports this module (and ``run.py``) so that it measures
exactly what ships. ``SEED_PROFILE`` is the seed article's configuration (BERT-large
SQuAD: fp16, batch 4 per device, every sequence padded to 384 tokens, eager attention,
plain AdamW), written as hyperparameter overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .compat import fused_adamw_available
from .env import DeviceCaps
from .hparams import Hyperparameters
from .parallel import smp_v1_precision

# The seed configuration, as overrides of this entrypoint's hyperparameters.
SEED_PROFILE: dict[str, object] = {
    "fp16": True,
    "bf16": False,
    "per_device_train_batch_size": 4,
    "max_seq_length": 384,
    "doc_stride": 128,
    "pad_to_max_length": True,
    "group_by_length": False,
    "attn_implementation": "eager",
    "optim": "adamw_torch",
    "tf32": False,
    "dataloader_num_workers": 0,
    "torch_compile": False,
}


@dataclass(frozen=True)
class Performance:
    bf16: bool
    fp16: bool
    tf32: bool | None
    optim: str
    attn_implementation: str
    pad_to_max_length: bool
    group_by_length: bool
    dataloader_num_workers: int
    dataloader_pin_memory: bool
    pad_to_multiple_of: int | None
    torch_compile: bool
    cuda: bool = False
    gradient_checkpointing: bool = False
    loss_kernel: str = "plain"  # chunked | plain (liger when liger_kernel)
    loss_chunk_tokens: int = 1024
    liger_kernel: bool = False
    optim_state_dtype: str = "float32"
    notes: tuple[str, ...] = ()


def flash_attention_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("flash_attn") is not None
    except (ImportError, ValueError):
        return False


def resolve_attention(requested: str, caps: DeviceCaps, half: bool, packed: bool = False) -> str:
    """``auto``: FlashAttention-2 on a CUDA GPU in 16-bit when the package is installed; for
    packed causal-LM rows (``packed``) on CUDA ``ftl_varlen`` (``attention.py``: PyTorch's
    variable-length flash kernel in 16-bit), so no dense block-diagonal mask is built, where
    the image's transformers can register it; else
    SDPA (on a CPU the per-example path measured slower than the dense mask,
    bench/RESULTS.md). All keep packed rows apart."""
    from . import attention

    if requested == "varlen":
        return attention.NAME
    if requested != "auto":
        return requested
    # FlashAttention-2 runs on Ampere or newer (compute capability 8.0+, its README), the
    # GPUs DeviceCaps marks tf32; a V100 or T4 keeps SDPA.
    if caps.cuda and caps.tf32 and half and flash_attention_available():
        return "flash_attention_2"
    if packed and caps.cuda and attention.available():  # issue 34: not in transformers 4.44
        return attention.NAME
    return "sdpa"


def resolve_loss(hp: Hyperparameters, caps: DeviceCaps) -> str:
    """``auto``: the chunked linear + cross-entropy for causal LMs on CUDA (exact;
    ``loss.py``), liger-kernel's when ``liger_kernel`` is on; ``plain`` for the other tasks
    and on a CPU (where it saved memory but cost tokens/s, bench/RESULTS.md)."""
    if hp.liger_kernel:
        return "liger"
    if hp.loss_kernel == "auto":
        return "chunked" if caps.cuda and hp.task in ("sft", "clm") else "plain"
    return hp.loss_kernel


def compile_default(hp: Hyperparameters, caps: DeviceCaps) -> bool:
    """torch.compile for full-parameter SFT on CUDA without FSDP: packed rows have one fixed
    shape, so it compiles once (about a minute) and then fuses the norms, activations and
    casts; measured +18% tokens/s on a 1B Llama on an H100 (bench/RESULTS.md). Left off for
    LoRA/QLoRA and FSDP (their wrappers and compile interact), and for the encoder tasks."""
    return bool(caps.cuda and hp.task == "sft" and hp.packing and hp.peft == "none" and not hp.fsdp)


def resolve(
    hp: Hyperparameters, caps: DeviceCaps, smp_v1: Mapping[str, Any] | None = None
) -> Performance:
    """The settings for this device. ``smp_v1``: SMP v1's parameters when the Trainer takes
    its SMP v1 path (``parallel.smp_v1_parameters``); precision then comes from them."""
    notes: list[str] = []
    bf16, fp16 = hp.bf16, hp.fp16
    if smp_v1 is not None:
        bf16, fp16 = smp_v1_precision(fp16, bf16, smp_v1, caps.cuda)
    elif bf16 is None and fp16 is None:
        bf16, fp16 = caps.bf16, caps.cuda and not caps.bf16
    elif bf16 is None:
        bf16 = bool(caps.bf16 and not fp16)
    elif fp16 is None:
        fp16 = bool(caps.cuda and not caps.bf16 and not bf16)
    if fp16 and not caps.cuda:
        notes.append("fp16 needs a CUDA GPU; training in float32 on this device")
        fp16 = False
    if bf16 and caps.cuda and not caps.bf16:
        notes.append("this GPU has no bfloat16; using float16")
        bf16, fp16 = False, True

    tf32 = hp.tf32
    if tf32 is None:
        tf32 = True if caps.tf32 else None
    elif tf32 and not caps.tf32:
        notes.append("tf32 needs an Ampere or newer GPU; ignored")
        tf32 = None if not caps.cuda else False

    optim = hp.optim or (
        "adamw_torch_fused" if caps.cuda and fused_adamw_available() else "adamw_torch"
    )
    workers = hp.dataloader_num_workers
    if workers is None:
        workers = 2 if caps.cuda else 0
    pad_multiple = 8 if (caps.cuda and not hp.pad_to_max_length) else None
    return Performance(
        bf16=bool(bf16),
        fp16=bool(fp16),
        tf32=tf32,
        optim=optim,
        attn_implementation=resolve_attention(
            hp.attn_implementation, caps, bool(bf16 or fp16), hp.task == "sft" and hp.packing
        ),
        pad_to_max_length=hp.pad_to_max_length,
        group_by_length=bool(hp.group_by_length and not hp.pad_to_max_length),
        dataloader_num_workers=int(workers),
        dataloader_pin_memory=caps.cuda,
        pad_to_multiple_of=pad_multiple,
        torch_compile=compile_default(hp, caps) if hp.torch_compile is None else hp.torch_compile,
        cuda=caps.cuda,
        gradient_checkpointing=(
            bool(hp.fsdp) if hp.gradient_checkpointing is None else hp.gradient_checkpointing
        ),
        loss_kernel=resolve_loss(hp, caps),
        loss_chunk_tokens=hp.loss_chunk_tokens,
        liger_kernel=bool(hp.liger_kernel),
        optim_state_dtype=hp.optim_state_dtype,
        notes=tuple(notes),
    )
