"""Requests: a caller's submit, read and stop requests, validated against the catalog.

Holds: ``submit`` (``SubmitRequest``, ``validate_submit``), ``submit_parts`` (one function
per part of a submit, in the order they are checked), ``_fields`` (reading one JSON field)
and ``queries`` (the read and stop actions).

May import (within jobmodel): contract, templates, teams, platform, _rules, instances.
"""
