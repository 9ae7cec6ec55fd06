"""Requests: a caller's submit, read and stop requests, validated against the catalog.

Holds: ``submit`` (``SubmitRequest``, ``validate_submit``), ``submit_parts`` (one function
per part of a submit, in the order they are checked), ``_fields`` (reading one JSON field)
``queries`` (the read and stop actions), ``submit_fields`` (the submit fields declared once,
one row each: validation, the request's form and fingerprint, the client's flags) and
``submit_docs`` (the docs table and JSON Schema rendered from those rows).

May import (within jobmodel): contract, templates, after_training, teams, platform, _rules,
instances.
"""
