"""Names the platform's parts share: written once here, read by synth, the Lambdas and the client.

Standard library only, like the rest of the job model.
"""

from __future__ import annotations

from datetime import datetime

__all__ = [
    "DEFAULT_SHARE",
    "ENV_CATALOG_PATH",
    "ENV_JOB_QUEUE",
    "ENV_JOB_TABLE",
    "ENV_PLATFORM_NAME",
    "ENV_PRICES",
    "ENV_QUEUE_SHARE_POLICY",
    "ENV_SCHEDULER",
    "ENV_TEAM_ROLES",
    "JOB_INDEX",
    "JOB_NAME_TAG_KEY",
    "PLATFORM_TAG_KEY",
    "TEAM_INDEX",
    "TEAM_TAG_KEY",
    "TRAINING_LOG_GROUP",
    "timestamp",
]

# The ledger's global secondary indexes: every job newest first, and one team's jobs newest
# first (sparse: only jobs with a team).
JOB_INDEX = "by-created"
TEAM_INDEX = "by-team"

# The tag every training job the launcher starts carries (value: the platform's name); the
# launch policy allows describe and stop only on jobs with it.
PLATFORM_TAG_KEY = "ftl:platform"
# In queue mode the payload handed to AWS Batch also carries the job's name: Batch names the
# training job ``AWSBatch<name><32 hex>`` and may have to cut a long name to fit SageMaker's
# 63 characters, so job events find the ledger job by this tag first.
JOB_NAME_TAG_KEY = "ftl:job-name"
# A team's training jobs carry their team (value: the team's name); the launch policy and the
# job-events function's ownership check read it.
TEAM_TAG_KEY = "ftl:team"

# The Batch share (fair-share identifier or quota share) of a single-team deployment's
# service jobs; a team's jobs use the team's name.
DEFAULT_SHARE = "default"

# Where SageMaker writes training jobs' logs (streams ``<job name>/...``).
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"

# The trigger's environment beyond ``PlatformConfig`` and ``TeamsConfig`` (their ``to_env``).
ENV_JOB_TABLE = "FTL_JOB_TABLE"
ENV_CATALOG_PATH = "FTL_CATALOG_PATH"
ENV_TEAM_ROLES = "FTL_TEAM_ROLES"
ENV_PRICES = "FTL_PRICES"
ENV_PLATFORM_NAME = "FTL_PLATFORM_NAME"
# How jobs start (``jobmodel.scheduler.SchedulerConfig``, whose ``to_env`` writes them).
ENV_SCHEDULER = "FTL_SCHEDULER"
ENV_JOB_QUEUE = "FTL_JOB_QUEUE"
ENV_QUEUE_SHARE_POLICY = "FTL_QUEUE_SHARE_POLICY"


def timestamp(moment: datetime) -> str:
    """The contract's timestamps: ISO 8601 with milliseconds and ``Z``."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
