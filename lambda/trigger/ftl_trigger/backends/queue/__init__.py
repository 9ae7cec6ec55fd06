"""The queue backend (``FTL_SCHEDULER=queue``, docs/QUEUE.md): AWS Batch service jobs.

Holds ``backend`` (``QueueBackend``: the backend interface), ``service_jobs`` (Batch's calls
and the service job's payload), ``flow`` (a queued job's refresh, stop and place) and ``look``
(one look at the queue: positions and estimated starts).
"""
