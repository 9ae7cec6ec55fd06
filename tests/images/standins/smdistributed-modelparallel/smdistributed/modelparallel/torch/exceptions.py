"""Torch-side exception classes (stand-in); the training toolkit lists them."""

from ..backend.exceptions import SMPError, SMPValidationError


class SMPUnsupportedError(SMPError):
    """Something the single-process stand-in cannot do (more than one process)."""


class StepUsageError(SMPValidationError):
    """A DistributedModel call made outside an ``smp.step`` function."""


__all__ = ["SMPError", "SMPValidationError", "SMPUnsupportedError", "StepUsageError"]
