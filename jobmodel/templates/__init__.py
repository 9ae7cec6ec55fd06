"""Templates: what the platform team decides about a job, the rules a template must follow at
synth time, and the catalog files that carry templates.

Holds: ``spec`` (the template types and the values their fields take), ``distribution_kinds``
(one row per distribution kind, and the ``Distribution`` type), ``hyperparameters`` (the rule
a template sets on a knob callers may turn, and the check of a caller's value),
``rules`` (``validate_template``), ``distribution_rules``, ``hyperparameter_rules``,
``chain_rules``, ``tracking_rules`` and ``evaluation_rules`` (the rules on those parts),
``evaluation_policy`` (a template's evaluation policy, issue 36), ``container_start`` (the
init that starts a job's container, and its rule), ``_shapes`` (reading and
freezing catalog data, the rules' error), ``catalog`` (reading and writing catalog files)
and the shipped catalog ``shipped_templates.json``.

May import (within jobmodel): contract, _rules, instances.
"""
