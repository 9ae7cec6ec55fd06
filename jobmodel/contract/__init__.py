"""The contract's vocabulary (docs/API.md): what callers, the Lambdas and the stacks share.

Holds: ``errors`` (the error types, each with its HTTP status), ``statuses`` (job statuses,
their order and which are terminal), ``routes`` (the HTTP API's one table of routes) and
``names`` (environment variables, tags, index names and versions written once).

May import (within jobmodel): nothing. Everything else in the job model may import it.
"""
