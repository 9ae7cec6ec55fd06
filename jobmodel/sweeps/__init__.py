"""Sweeps (issue 37): a hyperparameter search on SageMaker's tuner, as one job.

Holds: ``request`` (``SweepRequest``, its parameter ranges and their validation against the
template's overridable hyperparameters, and the worst-case price check), ``render`` (the
``CreateHyperParameterTuningJob`` request from a trial's training request, and what the tuner
cannot carry) and ``progress`` (the tuner's word as the change to the sweep's record).

May import (within jobmodel): contract, templates, jobs, money.
"""

from .request import (
    SWEEP_FIELDS,
    ParameterRange,
    SweepRequest,
    check_worst_case,
    parse_sweep,
    worst_case_usd,
)

__all__ = [
    "SWEEP_FIELDS",
    "ParameterRange",
    "SweepRequest",
    "check_worst_case",
    "parse_sweep",
    "worst_case_usd",
]
