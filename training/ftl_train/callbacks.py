"""Trainer callbacks: metric lines for the templates' metric definitions; SIGTERM checkpoints."""

from __future__ import annotations

import logging
import re
import signal
import sys
import threading
from numbers import Real
from typing import Any, TextIO

from transformers import TrainerCallback

logger = logging.getLogger("ftl_train")

# docs/DECISIONS.md: one metric per line, exactly this shape.
METRIC_LINE = "ftl_metric name={name} value={value} step={step}"
_NAME_BAD = re.compile(r"[^a-z0-9_]+")

# HF Trainer log keys -> metric names. The per-step training loss is `train_loss`; the
# average over the whole run, logged once at the end, becomes `train_loss_mean`.
RENAME_STEP = {"loss": "train_loss"}
RENAME_SUMMARY = {"train_loss": "train_loss_mean"}
SKIP = {"total_flos"}


def metric_name(key: str) -> str:
    name = _NAME_BAD.sub("_", key.strip().lower()).strip("_")
    return name or "metric"


def format_metric(name: str, value: float, step: int) -> str:
    return METRIC_LINE.format(name=metric_name(name), value=repr(float(value)), step=int(step))


def metric_lines(logs: dict, step: int) -> list[str]:
    summary = "train_runtime" in logs
    lines = []
    for key, value in logs.items():
        if key in SKIP or isinstance(value, bool) or not isinstance(value, Real):
            continue
        name = (RENAME_SUMMARY if summary else RENAME_STEP).get(key, key)
        lines.append(format_metric(name, value, step))
    return lines


class MetricLineCallback(TrainerCallback):
    """Print every logged metric as a ``ftl_metric`` line, from the world's main process only."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero or not logs:
            return
        out = self.stream or sys.stdout
        for line in metric_lines(logs, state.global_step):
            print(line, file=out, flush=True)


class SigtermCheckpointCallback(TrainerCallback):
    """On SIGTERM (spot reclaim, StopTrainingJob) save a checkpoint at the next step end and stop.

    The handler only sets a flag; the save happens on the training thread at
    ``on_step_end`` (or right after an evaluation), through the Trainer's own
    ``should_save`` path, so every process of a distributed job saves the same step.
    In multi-process runs the flag is OR-reduced across ranks so that a rank that got
    the signal a moment later still saves at the same step as the others.
    """

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)):
        self.requested = threading.Event()
        self.triggered_at_step: int | None = None
        self._previous: dict[int, Any] = {}
        self._signals = signals
        self._installed = False

    # -- signal handling
    def install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        for sig in self._signals:
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handler)
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed:
            return
        for sig, prev in self._previous.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        if not self.requested.is_set():
            # Keep the handler tiny: no logging machinery inside a signal handler.
            print(
                f"ftl_train: received signal {signum}; checkpointing at the next step",
                file=sys.stderr,
                flush=True,
            )
        self.requested.set()

    # -- agreement across ranks
    def _any_rank_requested(self, args: Any) -> bool:
        flag = self.requested.is_set()
        try:
            import torch
            import torch.distributed as dist

            if args.world_size > 1 and dist.is_available() and dist.is_initialized():
                t = torch.tensor([1.0 if flag else 0.0], device=args.device)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                flag = bool(t.item() > 0)
                if flag:
                    self.requested.set()
        except Exception as exc:  # never let the check itself kill training
            logger.debug("SIGTERM flag reduction failed: %s", exc)
        return flag

    def _stop_and_save(self, state: Any, control: Any) -> Any:
        control.should_save = True
        control.should_training_stop = True
        if self.triggered_at_step is None:
            self.triggered_at_step = state.global_step
            logger.warning(
                "SIGTERM: saving a checkpoint at step %d and stopping", state.global_step
            )
        return control

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.install()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self._any_rank_requested(args):
            return self._stop_and_save(state, control)
        return control

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # A signal that came during a long evaluation: save right after it.
        if state.global_step > 0 and self._any_rank_requested(args):
            return self._stop_and_save(state, control)
        return control

    @property
    def stopped(self) -> bool:
        return self.triggered_at_step is not None
