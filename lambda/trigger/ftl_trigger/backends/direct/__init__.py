"""The direct backend (``FTL_SCHEDULER=direct``): SageMaker's training jobs, called by the
trigger itself. Holds ``backend`` (``DirectBackend``: create, look up, describe and stop)."""
