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

import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from transformers import TrainerCallback

from .callbacks import format_metric
from .hparams import HyperparameterError, Hyperparameters

logger = logging.getLogger("ftl_train")


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


REQUIREMENTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "requirements-kernels.txt")


def pinned(package: str, path: str = REQUIREMENTS) -> str:
    """The ``name==version`` line for ``package`` in ``requirements-kernels.txt``."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            spec = line.split("#", 1)[0].strip()
            if spec.split("==", 1)[0].strip().lower() == package:
                return spec
    raise LookupError(f"{package} is not pinned in {path}")


def ensure_installed(package: str, module: str, environ: Mapping[str, str]) -> float | None:
    """pip-install the pinned ``package`` when ``module`` is missing; seconds spent, or None.

    One process per node installs (an exclusive lock on a file in the temporary folder; the
    other local ranks wait and then find it installed). A failure (no PyPI from this
    network) stops the job with what to do instead.
    """
    if importlib.util.find_spec(module) is not None:
        return None
    import fcntl
    import subprocess
    import tempfile
    import time

    spec = pinned(package)
    lock = os.path.join(tempfile.gettempdir(), f"ftl_install_{package}.lock")
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        importlib.invalidate_caches()
        if importlib.util.find_spec(module) is not None:
            return None
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
        done = subprocess.run([*cmd, spec], capture_output=True, text=True, env=dict(environ))
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise HyperparameterError(
            f"installing {spec} (requirements-kernels.txt) failed ({done.stderr.strip()[-300:]}); "
            "a job without PyPI access needs it in its image, or leave the option off"
        )
    importlib.invalidate_caches()
    logger.info("installed %s in %.1f s", spec, seconds)
    return seconds


def check(hp: Hyperparameters, cuda: bool, environ: Mapping[str, str] | None = None) -> None:
    """Refuse what cannot run here, before data or model are read; install what is pinned."""
    if not hp.liger_kernel:
        return
    if not cuda:
        raise HyperparameterError(
            "hyperparameter liger_kernel=true needs a CUDA GPU (liger-kernel's kernels are "
            "Triton GPU kernels); this machine has none. Leave it false on a CPU"
        )
    ensure_installed("liger-kernel", "liger_kernel", os.environ if environ is None else environ)


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
