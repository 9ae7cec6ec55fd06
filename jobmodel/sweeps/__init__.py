"""Sweeps (issue 37): a hyperparameter tuning request checked against its template.

Holds: ``request`` (``SweepRequest``, its parameter ranges and their validation against the
template's overridable hyperparameters, and the worst-case price check).

May import (within jobmodel): contract, templates.
"""

from .request import ParameterRange, SweepRequest, check_worst_case, parse_sweep, worst_case_usd

__all__ = [
    "ParameterRange",
    "SweepRequest",
    "check_worst_case",
    "parse_sweep",
    "worst_case_usd",
]
