"""Tokens per second and model FLOPs utilisation (MFU) for the metric lines and the benchmark.

``train_tokens_per_second``: non-padding input tokens of the whole job (every rank) per
second of wall time, over the last logging interval. ``train_mfu``: achieved model FLOP/s
over the job's peak, ``flops_per_token x tokens/s / (peak per GPU x GPUs)``, where
``flops_per_token`` is 6N for full training (forward 2N, backward 4N; attention's
sequence-length term and activation recomputation left out, the usual convention) and
4N_frozen + 6N_trainable with LoRA (a frozen weight needs no weight gradient).

The peak is the GPU's dense (no sparsity) bf16/fp16 tensor-core figure from the vendor's
data sheet, whatever precision the run uses, so an fp32 run shows how much it leaves on
the table. A device that is not in the table (or a CPU) gets no MFU line: no guessing.
"""

from __future__ import annotations

import time

import torch

# Dense bf16/fp16 tensor-core peak per GPU, TFLOP/s, from NVIDIA's data sheets (figures
# without sparsity; the data sheets print "with sparsity" figures at twice these).
# Checked in order: the first key contained in torch.cuda.get_device_name() wins.
PEAK_TFLOPS_16BIT: tuple[tuple[str, float, str], ...] = (
    ("H100 PCIe", 756.0, "NVIDIA H100 Tensor Core GPU data sheet, H100 PCIe"),
    ("H100 NVL", 835.0, "NVIDIA H100 Tensor Core GPU data sheet, H100 NVL"),
    ("H100", 989.0, "NVIDIA H100 Tensor Core GPU data sheet, H100 SXM (p5)"),
    ("H200", 989.0, "NVIDIA H200 Tensor Core GPU data sheet, H200 SXM (p5e/p5en)"),
    ("A100", 312.0, "NVIDIA A100 Tensor Core GPU data sheet (p4d/p4de)"),
    ("L40S", 362.0, "NVIDIA L40S data sheet (g6e)"),
    ("L4", 121.0, "NVIDIA L4 Tensor Core GPU data sheet (g6)"),
    ("V100", 125.0, "NVIDIA V100 data sheet, SXM2, fp16 (p3)"),
    ("T4", 65.0, "NVIDIA T4 data sheet, fp16 (g4dn)"),
)


def peak_flops(device_name: str | None) -> float | None:
    """Dense 16-bit peak FLOP/s of one GPU, or None when unknown (then no MFU)."""
    if not device_name:
        return None
    for key, tflops, _source in PEAK_TFLOPS_16BIT:
        if key in device_name:
            return tflops * 1e12
    return None


def cuda_device_name() -> str | None:
    try:
        return torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except Exception:  # pragma: no cover
        return None


def flops_per_token(model: object) -> float:
    """6N for trained weights, 4N for frozen ones (LoRA base)."""
    trainable = frozen = 0
    for p in model.parameters():  # type: ignore[attr-defined]
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    return 6.0 * trainable + 4.0 * frozen


def mfu(fpt: float, tokens_per_second: float, peak: float | None, world_size: int) -> float | None:
    if not peak or tokens_per_second <= 0:
        return None
    return fpt * tokens_per_second / (peak * max(1, world_size))


class TokenMeter:
    """Counts non-padding tokens on the device (no host sync per step); read at log time."""

    def __init__(self, pad_id: int | None):
        self.pad_id = pad_id
        self.total = None  # a device tensor, this process's count
        self.last_tokens = 0
        self.last_time: float | None = None

    def count(self, inputs: dict) -> None:
        mask = inputs.get("attention_mask")
        ids = inputs.get("input_ids")
        if mask is not None:
            n = mask.sum()
        elif ids is not None and self.pad_id is not None:
            n = (ids != self.pad_id).sum()
        elif ids is not None:
            n = ids.new_tensor(ids.numel())
        else:
            return
        n = n.to(dtype=torch.int64)
        self.total = n if self.total is None else self.total + n

    def start(self) -> None:
        self.last_tokens, self.last_time = self.global_total(1), time.perf_counter()

    def global_total(self, world_size: int) -> int:
        if self.total is None:
            return 0
        t = self.total.detach().clone()
        if world_size > 1:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.all_reduce(t)
        return int(t.item())

    def interval(self, now: float, world_size: int) -> float | None:
        """Tokens/s since the previous call (None on the first call, which starts the clock)."""
        tokens = self.global_total(world_size)
        rate = None
        if self.last_time is not None and now > self.last_time:
            rate = (tokens - self.last_tokens) / (now - self.last_time)
        self.last_tokens, self.last_time = tokens, now
        return rate
