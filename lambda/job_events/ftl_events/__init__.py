"""The job-events function's internals: events in (``parse``), the ledger write (``apply``),
the announcement and metrics out (``publish``), and what the function needs from its
container (``events_runtime``). ``handler.py`` runs one event through them."""
