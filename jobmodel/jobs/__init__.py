"""Jobs: the job record in the ledger and every rule that changes it.

Holds: ``job`` (the record as types: ``Job``, ``Attempt``, the first record a submit claims,
and which attributes are public, described and notified), ``record`` (``JobRecord``,
``Change`` and the one rule for changing a job), ``settlement`` (a job's cost and its team's
usage, settled once),
``training_state`` and ``queue_state`` (SageMaker's and Batch's state as ledger fields),
``attempts`` and ``batch_end_hold`` (a capacity chain's attempts), ``claims`` (a submit's claim and
the sweep), ``view`` (the contract's job object, from a ``Job``), ``effects`` (end effects
owed on the record) and ``notifications`` (the job and budget notices on SNS and
EventBridge, their attributes and schema).

May import (within jobmodel): contract, money, capacity, _rules, requests, platform,
locations, after_training.
"""
