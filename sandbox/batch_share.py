"""The Batch stand-in's dispatch order (``sandbox/batch.py``): fair share with usage decay.

Rules (an approximation of AWS Batch's fair-share scheduling; the real service is the
reference):

- A share's usage is the instances its jobs hold now (SCHEDULED to RUNNING) plus, when the
  queue's scheduling policy has ``shareDecaySeconds`` (D), what its ended jobs used over the
  last D seconds: each ended job adds ``instances x (seconds it held them within the window)
  / D``, so a job that ran the whole window counts as if it still ran and one that ended D
  seconds ago counts nothing. With D = 0 only what is held now counts.
- Repeatedly take the share whose (usage + instances already ordered ahead) x weightFactor is
  lowest (ties: the share whose next job is older); within a share, higher
  ``schedulingPriority`` first, then oldest.
- A ``fifo`` queue (no Batch counterpart: the queue benchmark's baseline) puts every job in
  one share, so jobs start first come, first served.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

ACTIVE = ("SCHEDULED", "STARTING", "RUNNING")
ENDED = ("SUCCEEDED", "FAILED")


class _Job(Protocol):
    share: str
    instances: int
    created: float
    status: str
    scheduled: float | None
    stopped: float | None
    request: dict[str, Any]


def share_usage(jobs: Iterable[_Job], share: str, *, now: float, decay_s: float) -> float:
    """Instances ``share`` holds now plus its decayed recent use (module rules)."""
    used = 0.0
    for job in jobs:
        if job.share != share:
            continue
        if job.status in ACTIVE:
            used += job.instances
        elif decay_s > 0 and job.status in ENDED and job.scheduled is not None and job.stopped:
            held = min(job.stopped, now) - max(job.scheduled, now - decay_s)
            used += job.instances * max(0.0, held) / decay_s
    return used


def dispatch_order(
    queue_jobs: list[_Job],
    *,
    now: float,
    decay_s: float,
    weights: dict[str, float],
    fifo: bool = False,
) -> list[_Job]:
    """The RUNNABLE jobs of one queue in the order the queue would start them."""
    waiting = [j for j in queue_jobs if j.status == "RUNNABLE"]
    by_share: dict[str, list[_Job]] = {}
    for job in sorted(waiting, key=lambda j: (-priority(j), j.created)):
        by_share.setdefault("" if fifo else job.share, []).append(job)
    usage = {
        s: 0.0 if fifo else share_usage(queue_jobs, s, now=now, decay_s=decay_s) for s in by_share
    }
    order: list[_Job] = []
    while by_share:
        share = min(
            by_share, key=lambda s: (usage[s] * weights.get(s, 1.0), by_share[s][0].created)
        )
        job = by_share[share].pop(0)
        order.append(job)
        usage[share] += job.instances
        if not by_share[share]:
            del by_share[share]
    return order


def priority(job: _Job) -> int:
    return int(job.request.get("schedulingPriority") or 0)
