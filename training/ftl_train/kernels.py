"""Which kernels a run uses, the checks for the optional ones, and their metric lines.

Slots (each chosen by a hyperparameter, ``auto`` resolving in ``defaults.py``):

* ``attention``: the model's attention implementation as loaded (``sdpa``, ``eager``,
  ``flash_attention_2``, ``ftl_varlen``: ``attention.py``).
* ``loss``: ``chunked`` (``loss.py``, linear + cross-entropy without the full logits),
  ``liger`` (liger-kernel's fused linear cross-entropy) or ``plain``.
* ``norm_rope_swiglu``: ``liger`` (liger-kernel's Triton RMSNorm, RoPE and SwiGLU, CUDA
  only, ``liger_kernel=true``) or ``plain``.
* ``optimizer`` and ``optimizer_states`` (``float32``, or ``bfloat16``: ``optim.py``).

At the start of training the main process prints one metric line per slot,
``ftl_metric name=kernel_<slot>_<kernel> value=1.0 step=<step>`` (the DECISIONS.md line
format, so a template can chart it), and ``results.json`` gets the same under ``kernels``.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from transformers import TrainerCallback

from .callbacks import format_metric
from .hparams import HyperparameterError, Hyperparameters


@dataclass(frozen=True)
class Kernels:
    attention: str
    loss: str
    norm_rope_swiglu: str
    optimizer: str
    optimizer_states: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def metric_names(self) -> list[str]:
        return [f"kernel_{slot}_{name}" for slot, name in asdict(self).items()]


def liger_available() -> bool:
    try:
        return importlib.util.find_spec("liger_kernel") is not None
    except (ImportError, ValueError):
        return False


def check(hp: Hyperparameters, cuda: bool) -> None:
    """Refuse what cannot run here, before data or model are read."""
    if not hp.liger_kernel:
        return
    if not cuda:
        raise HyperparameterError(
            "hyperparameter liger_kernel=true needs a CUDA GPU (liger-kernel's kernels are "
            "Triton GPU kernels); this machine has none. Leave it false on a CPU"
        )
    if not liger_available():
        raise HyperparameterError(
            "hyperparameter liger_kernel=true needs the `liger-kernel` package; "
            "training/requirements.txt installs it on the LLM templates' images (Python >= 3.12)"
        )


class KernelLines(TrainerCallback):
    """Prints the run's kernels as metric lines when training begins (world process zero)."""

    def __init__(self, kernels: Kernels, stream: TextIO | None = None):
        self.kernels = kernels
        self.stream = stream

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        out = self.stream or sys.stdout
        for name in self.kernels.metric_names():
            print(format_metric(name, 1.0, state.global_step), file=out, flush=True)
