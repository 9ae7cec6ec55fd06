"""The trigger Lambda's internals: doors, runtime wiring, the launcher and the ledger."""
