"""The job-events function's internals: events in (``parse``), the ledger write (``apply``),
the announcement and metrics out (``publish``), wired once per container (``runtime``)."""
