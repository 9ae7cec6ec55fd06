"""The tuner backend (issue 37): a sweep's trials on SageMaker's automatic model tuning.
Holds ``backend`` (``TunerBackend``: create, look up, refresh with its trials' costs, stop)."""
