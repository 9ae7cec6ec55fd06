"""How the platform starts jobs (``ftl:scheduler``), as the trigger Lambda sees it.

``direct`` (default): the trigger calls SageMaker's CreateTrainingJob. ``queue``: the trigger
submits the same rendered request to an AWS Batch job queue as a service job
(docs/QUEUE.md). The launcher construct writes :meth:`SchedulerConfig.to_env` into the
trigger's environment at synth; the trigger reads it back with :meth:`SchedulerConfig.from_env`.
Standard library only, like the rest of the job model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import _rules as R
from ..contract.names import (
    DEFAULT_SHARE,
    ENV_JOB_QUEUE,
    ENV_QUEUE_CAPACITY,
    ENV_QUEUE_SHARE_POLICY,
    ENV_QUEUE_SWEEPS,
    ENV_SCHEDULER,
)

__all__ = [
    "PRIORITY_LIMITS",
    "QUEUE_SWEEPS",
    "SCHEDULERS",
    "SHARE_DECAY_SECONDS",
    "SHARE_POLICIES",
    "SchedulerConfig",
    "share_of",
]

SCHEDULERS = ("direct", "queue")
# Batch's schedulingPriority range; a template's queue_priority_range lies inside it.
PRIORITY_LIMITS = (R.MIN_QUEUE_PRIORITY, R.MAX_QUEUE_PRIORITY)
SHARE_POLICIES = ("fairshare", "quotashare")
QUEUE_SWEEPS = ("off", "outside-queue")
# The fair-share policy's shareDecaySeconds: a team's use over the last hour still counts when
# the queue picks whose job starts next, so a team that just ran does not go first again.
SHARE_DECAY_SECONDS = 3600
# A fair-share identifier is at most 255 alphanumeric characters (botocore's batch model,
# ShareAttributes.shareIdentifier); team names hold '-', so each '-' is written as this
# upper-case letter, which no team name holds: the mapping is one-to-one.
SHARE_DASH = "X"
MAX_SHARE_IDENTIFIER = 255
_QUEUE_ARN_PREFIX = "arn:"
_QUEUE_ARN_MARK = ":job-queue/"


def share_of(team: str | None, share_policy: str = "fairshare") -> str:
    """The Batch share a team's service jobs go to (``team`` None: a single-team platform's
    ``default``): the one home of the mapping, used by the trigger's ``SubmitServiceJob``, the
    scheduling policy, the job-events ownership check, ``ftl queue`` and the dashboard.

    ``fairshare``: the ``shareIdentifier``, the team's name with each ``-`` written as
    ``X`` (``team-a`` is ``teamXa``, ``teama`` stays ``teama``). ``quotashare``: the
    ``quotaShareName``, the team's name as it is (quota share names may hold ``-``)."""
    name = team or DEFAULT_SHARE
    if share_policy == "quotashare":
        return name
    share = name.replace("-", SHARE_DASH)
    if not (share.isascii() and share.isalnum() and len(share) <= MAX_SHARE_IDENTIFIER):
        raise ValueError(f"team {name!r} has no fair-share identifier (alphanumeric, max 255)")
    return share


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig:
    """``scheduler``: ``direct`` or ``queue``. In queue mode ``job_queue_arn`` is the Batch job
    queue (``arn:<partition>:batch:<region>:<account>:job-queue/<name>``) and
    ``share_policy`` says whether the queue shares by ``shareIdentifier`` (``fairshare``) or
    by ``quotaShareName`` (``quotashare``). ``capacity_instances`` is the queue's capacity
    (``ftl:queueCapacityInstances``): a job needing more instances could never start, so
    submit refuses it; None when the environment does not say (a deployment from before
    the variable). Bad values raise ``ValueError``."""

    scheduler: str = "direct"
    job_queue_arn: str | None = None
    share_policy: str = "fairshare"
    capacity_instances: int | None = None
    # Queue mode (issue 37): ``off``, sweeps are refused (their trials are the tuner's, which
    # the queue cannot see); ``outside-queue``, they run beside it, admitted by the team's
    # quota and budget only (``ftl:queueSweeps``).
    queue_sweeps: str = "off"

    def __post_init__(self) -> None:
        if self.queue_sweeps not in QUEUE_SWEEPS:
            raise ValueError(
                f"queue_sweeps must be one of {', '.join(QUEUE_SWEEPS)}, got {self.queue_sweeps!r}"
            )
        if self.scheduler not in SCHEDULERS:
            raise ValueError(
                f"scheduler must be one of {', '.join(SCHEDULERS)}, got {self.scheduler!r}"
            )
        if self.share_policy not in SHARE_POLICIES:
            raise ValueError(
                f"share_policy must be one of {', '.join(SHARE_POLICIES)}, "
                f"got {self.share_policy!r}"
            )
        if self.queued and not self.job_queue_arn:
            raise ValueError("job_queue_arn is required when the scheduler is queue")
        if self.capacity_instances is not None and (
            type(self.capacity_instances) is not int or self.capacity_instances < 1
        ):
            raise ValueError(
                f"capacity_instances must be a whole number of 1 or more, "
                f"got {self.capacity_instances!r}"
            )

    @property
    def queued(self) -> bool:
        """True when jobs go through the Batch job queue."""
        return self.scheduler == "queue"

    def to_env(self) -> dict[str, str]:
        """The variables :meth:`from_env` reads: ``FTL_SCHEDULER`` always; ``FTL_JOB_QUEUE``,
        ``FTL_QUEUE_SHARE_POLICY`` and (when known) ``FTL_QUEUE_CAPACITY`` in queue mode
        (values may be CDK tokens)."""
        env = {ENV_SCHEDULER: self.scheduler}
        if self.queued:
            env[ENV_JOB_QUEUE] = str(self.job_queue_arn)
            env[ENV_QUEUE_SHARE_POLICY] = self.share_policy
            if self.capacity_instances is not None:
                env[ENV_QUEUE_CAPACITY] = str(self.capacity_instances)
            if self.queue_sweeps != "off":
                env[ENV_QUEUE_SWEEPS] = self.queue_sweeps
        return env

    @property
    def sweeps(self) -> bool:
        """Whether this deployment runs sweeps (direct mode always; queue mode if opted in)."""
        return not self.queued or self.queue_sweeps == "outside-queue"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SchedulerConfig:
        """Read ``FTL_SCHEDULER`` (``direct`` when unset or empty), ``FTL_JOB_QUEUE`` (required
        in queue mode: a Batch job queue ARN), ``FTL_QUEUE_SHARE_POLICY`` (``fairshare``
        when unset) and ``FTL_QUEUE_CAPACITY`` (optional, instances). A bad value raises
        ``ValueError`` naming the variable."""
        scheduler = env.get(ENV_SCHEDULER) or "direct"
        if scheduler not in SCHEDULERS:
            raise ValueError(
                f"environment variable {ENV_SCHEDULER} must be one of "
                f"{', '.join(SCHEDULERS)}, got {scheduler!r}"
            )
        if scheduler == "direct":
            return cls()
        queue = env.get(ENV_JOB_QUEUE) or ""
        if not queue:
            raise ValueError(
                f"environment variable {ENV_JOB_QUEUE} is required when {ENV_SCHEDULER} is queue"
            )
        if not queue.startswith(_QUEUE_ARN_PREFIX) or _QUEUE_ARN_MARK not in queue:
            raise ValueError(
                f"environment variable {ENV_JOB_QUEUE} must be a Batch job queue ARN "
                f"(arn:...:job-queue/<name>), got {queue[:200]!r}"
            )
        policy = env.get(ENV_QUEUE_SHARE_POLICY) or "fairshare"
        if policy not in SHARE_POLICIES:
            raise ValueError(
                f"environment variable {ENV_QUEUE_SHARE_POLICY} must be one of "
                f"{', '.join(SHARE_POLICIES)}, got {policy!r}"
            )
        raw = env.get(ENV_QUEUE_CAPACITY) or ""
        capacity = None
        if raw:
            if not raw.isdigit() or int(raw) < 1:
                raise ValueError(
                    f"environment variable {ENV_QUEUE_CAPACITY} must be a whole number of 1 or "
                    f"more, got {raw[:40]!r}"
                )
            capacity = int(raw)
        sweeps = env.get(ENV_QUEUE_SWEEPS) or "off"
        if sweeps not in QUEUE_SWEEPS:
            raise ValueError(
                f"environment variable {ENV_QUEUE_SWEEPS} must be one of "
                f"{', '.join(QUEUE_SWEEPS)}, got {sweeps[:40]!r}"
            )
        return cls(
            scheduler=scheduler,
            job_queue_arn=queue,
            share_policy=policy,
            capacity_instances=capacity,
            queue_sweeps=sweeps,
        )
