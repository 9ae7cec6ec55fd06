"""Evaluation after training (issue 36): what a team adds to a template's evaluation policy,
the arguments the evaluation entrypoint reads, and the gate on the registered version.

Holds: ``additions`` (a team's additions in ``ftl:evaluation``, and the policy a team's job
gets), ``arguments`` (the evaluation job's channels and hyperparameters, which
``training/evaluate.py`` reads) and ``gate`` (metrics, policy and baseline -> verdict). The
policy itself is a template key: ``templates.evaluation_policy``.

May import (within jobmodel): contract, templates, after_training, _rules, instances.
"""
