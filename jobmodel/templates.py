"""Template specs, their rules and catalog files: a map of where each part lives.

This module holds no code of its own; it re-exports the names it used to define, so
``from jobmodel.templates import ...`` keeps working. New code imports from the home:

- ``jobmodel.spec``: the template types (``TemplateSpec``, ``Distribution``,
  ``InputChannel``) and the values their fields take (``DISTRIBUTION_KINDS``,
  ``INPUT_MODES``, ``S3_DISTRIBUTIONS``).
- ``jobmodel.hyperparameters``: ``HyperparameterRule``, ``check_override`` (a caller's
  value at submit time), ``json_type``, and the template rules on hyperparameters.
- ``jobmodel.template_rules``: ``validate_template`` and the generic synth-time rules.
- ``jobmodel.distribution``: the distribution's shape rules and the start rules.
- ``jobmodel.catalog``: ``load_catalog``, ``dump_catalog``, ``shipped_catalog``.
- ``jobmodel._shapes``: reading and freezing catalog data, the shared ``fail`` helper.
"""

from __future__ import annotations

from .catalog import (
    CATALOG_VERSION,
    SHIPPED_CATALOG_FILE,
    dump_catalog,
    load_catalog,
    shipped_catalog,
)
from .distribution import SMP_DEGREE_KEYS
from .hyperparameters import (
    DISTRIBUTION_KEYS,
    RESERVED_HYPERPARAMETER_PREFIX,
    RESERVED_HYPERPARAMETERS,
    SCRIPT_MODE_KEYS,
    HyperparameterRule,
    check_override,
)

# request.py still imports the old private name; kept until it imports json_type itself.
from .hyperparameters import json_type as _json_type  # noqa: F401
from .spec import (
    DISTRIBUTION_KINDS,
    INPUT_MODES,
    S3_DISTRIBUTIONS,
    Distribution,
    InputChannel,
    TemplateSpec,
)
from .template_rules import validate_template

__all__ = [
    "CATALOG_VERSION",
    "DISTRIBUTION_KEYS",
    "DISTRIBUTION_KINDS",
    "INPUT_MODES",
    "RESERVED_HYPERPARAMETERS",
    "RESERVED_HYPERPARAMETER_PREFIX",
    "S3_DISTRIBUTIONS",
    "SCRIPT_MODE_KEYS",
    "SHIPPED_CATALOG_FILE",
    "SMP_DEGREE_KEYS",
    "Distribution",
    "HyperparameterRule",
    "InputChannel",
    "TemplateSpec",
    "check_override",
    "dump_catalog",
    "load_catalog",
    "shipped_catalog",
    "validate_template",
]
