"""Capacity: where a job's instances come from and when it will get them.

Holds: ``plans`` (training plans, ``CapacityConfig``; the chain's step kinds, which
``templates.spec`` defines), ``chain`` (a job's capacity chain and each attempt's request),
``service_quotas`` (the account's SageMaker quotas), ``scheduler`` (direct or queue mode)
and ``queue_eta`` (a queued job's latest start).

May import (within jobmodel): contract, templates, after_training, requests, _rules,
instances.
"""
