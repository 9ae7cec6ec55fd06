"""Names the platform's parts share: written once here, read by synth, the Lambdas and the client.

Every name that crosses the synth/runtime boundary is here: the functions' environment
variables (the constructs write them, the Lambdas read them), the trigger's alias names (the
constructs create them, the trigger reads the invoked one), the tag keys the launcher puts on
training jobs (the renderer writes them, the launch policy and the job-events function read
them) and, derived from their list, how many tags the launcher adds. Standard library only,
like the rest of the job model.
"""

from __future__ import annotations

from datetime import datetime

__all__ = [
    "ADMIN_ALIAS",
    "ENV_EVALUATION",
    "ENV_QUEUE_SWEEPS",
    "SWEEP",
    "SWEEP_KIND",
    "SWEEP_TRIALS",
    "EVALUATION",
    "EVALUATION_KIND",
    "EVALUATION_OF",
    "EVALUATION_POLICY",
    "EVALUATE_EFFECT",
    "INSTANCES_HELD",
    "JOB_KIND",
    "BATCH_TRAINING_JOB_PREFIX",
    "CARE_INDEX",
    "CHAIN_ALIAS",
    "CLIENT_TOKEN_TAG_KEY",
    "DEFAULT_SHARE",
    "ENV_ADMINS",
    "ENV_ALLOWED_INPUT_BUCKETS",
    "ENV_ARTIFACT_BUCKET",
    "ENV_CAPACITY",
    "ENV_CATALOG_PATH",
    "ENV_CHAIN_FUNCTION",
    "ENV_CHECKPOINT_BUCKET",
    "ENV_DATA_BUCKET",
    "ENV_JOB_QUEUE",
    "ENV_JOB_TABLE",
    "ENV_KMS_KEY_ARN",
    "ENV_PLATFORM_NAME",
    "ENV_PLATFORM_TAGS",
    "ENV_PRICES",
    "ENV_QUEUE_CAPACITY",
    "ENV_QUEUE_SHARE_POLICY",
    "ENV_REGION",
    "ENV_ROLE_ARN",
    "ENV_SCHEDULER",
    "ENV_SECURITY_GROUPS",
    "ENV_SUBNETS",
    "ENV_TEAMS",
    "ENV_TEAM_ROLES",
    "ENV_TOPIC_ARN",
    "HTTP_ALIAS",
    "JOB_INDEX",
    "JOB_NAME_TAG_KEY",
    "LAUNCHER_TAG_KEYS",
    "PLATFORM_TAG_KEY",
    "REQUESTED_BY_TAG_KEY",
    "SWEEP_ALIAS",
    "TEAM_ALIAS_PREFIX",
    "TEAM_INDEX",
    "TRACKING_VARIABLES",
    "TEAM_TAG_KEY",
    "TEMPLATE_TAG_KEY",
    "TRAINING_LOG_GROUP",
    "launcher_tag_count",
    "team_alias_name",
    "timestamp",
]

# The ledger's global secondary indexes: every job newest first, one team's jobs newest
# first (sparse: only jobs with a team), and the jobs the sweep looks after (sparse: only
# jobs still claimed or owing end effects, ``claims.needs_care``).
JOB_INDEX = "by-created"
TEAM_INDEX = "by-team"
CARE_INDEX = "needs-care"

# ----------------------------------------------------------------------------- tag keys
# The tag every training job the launcher starts carries (value: the platform's name); the
# launch policy allows describe and stop only on jobs with it.
PLATFORM_TAG_KEY = "ftl:platform"
# In queue mode the payload handed to AWS Batch also carries the job's name: Batch names the
# training job ``AWSBatch<name><32 hex>`` and may have to cut a long name to fit SageMaker's
# 63 characters, so job events find the ledger job by this tag first. Every attempt of a
# capacity-chain job carries it too, in either mode (``jobmodel.render.render_attempt``).
JOB_NAME_TAG_KEY = "ftl:job-name"
# A team's training jobs carry their team (value: the team's name); the launch policy and the
# job-events function's ownership check read it.
TEAM_TAG_KEY = "ftl:team"
TEMPLATE_TAG_KEY = "ftl:template"
CLIENT_TOKEN_TAG_KEY = "ftl:client-token"  # only when the request has a client_token
REQUESTED_BY_TAG_KEY = "ftl:requested-by"
# The tags the launcher adds to every job it renders, whatever the request (the platform's,
# the template's and the caller's come on top); ``ftl:team`` is added in teams mode and
# ``ftl:job-name`` on the payload handed to AWS Batch in queue mode and on every attempt of a
# capacity-chain job.
LAUNCHER_TAG_KEYS = (PLATFORM_TAG_KEY, TEMPLATE_TAG_KEY, CLIENT_TOKEN_TAG_KEY, REQUESTED_BY_TAG_KEY)


def launcher_tag_count(*, team: bool = False, queued: bool = False, chained: bool = False) -> int:
    """How many tags the launcher adds at most: :data:`LAUNCHER_TAG_KEYS`, plus the team's
    and the job-name tag where they apply (queue mode, or a capacity-chain job in any mode:
    the one tag counts once)."""
    return len(LAUNCHER_TAG_KEYS) + int(team) + int(queued or chained)


# ------------------------------------------------------------------------ alias names
# The trigger's aliases (each a door): the HTTP API's integration, the admins', each team's.
HTTP_ALIAS = "http"
ADMIN_ALIAS = "admin"
TEAM_ALIAS_PREFIX = "team-"
# The job-events function's door: it asks the trigger to start a capacity chain's next attempt.
CHAIN_ALIAS = "chain"
ENV_CHAIN_FUNCTION = "FTL_CHAIN_FUNCTION"  # the job-events function's: the chain alias's ARN
# The scheduled sweep's door: an EventBridge schedule asks the trigger to look after claimed
# jobs and owed end effects (``claims``).
SWEEP_ALIAS = "sweep"


def team_alias_name(team: str) -> str:
    """The alias whose invokers act as ``team``."""
    return TEAM_ALIAS_PREFIX + team


# The Batch share (fair-share identifier or quota share) of a single-team deployment's
# service jobs; a team's jobs use the team's name.
DEFAULT_SHARE = "default"

# AWS Batch names the SageMaker training job it starts ``AWSBatch<job name><32 hex>``.
BATCH_TRAINING_JOB_PREFIX = "AWSBatch"

# Where SageMaker writes training jobs' logs (streams ``<job name>/...``).
TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"

# ---------------------------------------------------------------- environment variables
# The trigger's (and, where said, the job-events function's).
ENV_JOB_TABLE = "FTL_JOB_TABLE"  # both functions
ENV_TOPIC_ARN = "FTL_TOPIC_ARN"  # both functions: the SNS topic that announces ends
ENV_CATALOG_PATH = "FTL_CATALOG_PATH"
ENV_TEAM_ROLES = "FTL_TEAM_ROLES"
ENV_PRICES = "FTL_PRICES"
ENV_PLATFORM_NAME = "FTL_PLATFORM_NAME"  # both functions
# ``PlatformConfig`` (``to_env``/``from_env``)
ENV_REGION = "FTL_REGION"
ENV_ROLE_ARN = "FTL_ROLE_ARN"
ENV_DATA_BUCKET = "FTL_DATA_BUCKET"
ENV_CHECKPOINT_BUCKET = "FTL_CHECKPOINT_BUCKET"
ENV_ARTIFACT_BUCKET = "FTL_ARTIFACT_BUCKET"
ENV_KMS_KEY_ARN = "FTL_KMS_KEY_ARN"
ENV_SOURCE_S3_URI = "FTL_SOURCE_S3_URI"
ENV_PLATFORM_TAGS = "FTL_PLATFORM_TAGS"
ENV_ALLOWED_INPUT_BUCKETS = "FTL_ALLOWED_INPUT_BUCKETS"
ENV_SUBNETS = "FTL_SUBNETS"
ENV_SECURITY_GROUPS = "FTL_SECURITY_GROUPS"
# ``TeamsConfig`` (``to_env``/``from_env``)
ENV_TEAMS = "FTL_TEAMS"
ENV_ADMINS = "FTL_ADMINS"
# How jobs start (``jobmodel.capacity.scheduler.SchedulerConfig``, whose ``to_env`` writes them).
ENV_SCHEDULER = "FTL_SCHEDULER"
ENV_JOB_QUEUE = "FTL_JOB_QUEUE"
ENV_QUEUE_SHARE_POLICY = "FTL_QUEUE_SHARE_POLICY"
ENV_QUEUE_CAPACITY = "FTL_QUEUE_CAPACITY"
# Queue mode: whether sweeps (issue 37) run, outside the queue (``ftl:queueSweeps``).
ENV_QUEUE_SWEEPS = "FTL_QUEUE_SWEEPS"


def timestamp(moment: datetime) -> str:
    """The contract's timestamps: ISO 8601 with milliseconds and ``Z``."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Capacity sources (``jobmodel.capacity.plans.CapacityConfig``): the platform's training plans.
ENV_CAPACITY = "FTL_CAPACITY"

# Experiment tracking (``jobmodel.after_training.tracking``, issue 27). The trigger's: the
# platform's MLflow
# servers and defaults (``TrackingConfig.to_env``). A tracked job's container gets the MLflow
# client's own variables (the ARN, or an http(s) URI, as the tracking URI; the experiment; the
# run's name) and the platform's, which the entrypoint (training/ftl_train/tracking.py) logs
# as the run's tags; ``FTL_TRACKING_ATTEMPT`` and ``FTL_TRACKING_INSTANCE_TYPE`` are rewritten
# per attempt of a capacity chain (``jobmodel.render.render_attempt``).
ENV_MLFLOW = "FTL_MLFLOW"
# The teams' additions to the evaluation policies (context ``ftl:evaluation``, issue 36), as
# JSON, for the trigger (``jobmodel.evaluation.additions``); absent: none.
ENV_EVALUATION = "FTL_EVALUATION"
ENV_MLFLOW_TRACKING_URI = "MLFLOW_TRACKING_URI"
ENV_MLFLOW_EXPERIMENT_NAME = "MLFLOW_EXPERIMENT_NAME"
ENV_MLFLOW_RUN_NAME = "FTL_TRACKING_RUN_NAME"
ENV_TRACKING_TEMPLATE = "FTL_TRACKING_TEMPLATE"
ENV_TRACKING_IMAGE = "FTL_TRACKING_IMAGE"
ENV_TRACKING_INSTANCE_TYPE = "FTL_TRACKING_INSTANCE_TYPE"
ENV_TRACKING_ATTEMPT = "FTL_TRACKING_ATTEMPT"
ENV_TRACKING_COST_ESTIMATE = "FTL_TRACKING_COST_ESTIMATE_USD"
ENV_TRACKING_OUTPUT_S3_URI = "FTL_TRACKING_OUTPUT_S3_URI"

# The platform's version: the one home of the string (pyproject.toml reads it from here); each
# stack writes it as its ``PlatformVersion`` output, which ``ftl doctor`` compares.
PLATFORM_VERSION = "0.1.0"
VERSION_OUTPUT = "PlatformVersion"
# Queue mode's service-linked role (AWS Batch creates training jobs with it; ftl doctor checks it).
BATCH_SLR = "AWSServiceRoleForAWSBatchWithSagemaker"
BATCH_SLR_SERVICE = "sagemaker-queuing.batch.amazonaws.com"
# CDK bootstrap (ftl doctor checks it): the synthesizer's default qualifier (cdk.json's
# ``@aws-cdk/core:bootstrapQualifier`` overrides it), the SSM parameter the bootstrap stack
# writes its version to, and the lowest version the synthesized templates accept (their
# ``CheckBootstrapVersion`` rule; tests/infra/test_bootstrap_version.py pins both to aws-cdk-lib).
CDK_DEFAULT_QUALIFIER = "hnb659fds"
CDK_QUALIFIER_CONTEXT = "@aws-cdk/core:bootstrapQualifier"
CDK_MIN_BOOTSTRAP_VERSION = 6


def cdk_bootstrap_parameter(qualifier: str) -> str:
    """The bootstrap version's SSM parameter name, as the synthesized templates read it."""
    return f"/cdk-bootstrap/{qualifier}/version"


# Every variable a tracked job's environment may get (jobmodel.after_training.tracking_job;
# a template may set none of them).
TRACKING_VARIABLES = (
    ENV_MLFLOW_TRACKING_URI,
    ENV_MLFLOW_EXPERIMENT_NAME,
    ENV_MLFLOW_RUN_NAME,
    ENV_TRACKING_TEMPLATE,
    ENV_TRACKING_IMAGE,
    ENV_TRACKING_INSTANCE_TYPE,
    ENV_TRACKING_ATTEMPT,
    ENV_TRACKING_OUTPUT_S3_URI,
    ENV_TRACKING_COST_ESTIMATE,
)


# Evaluation jobs (issue 36): the job record's attributes that tie an evaluation job to the job
# it evaluates. An evaluation job's record has ``kind`` = ``evaluation``, names the evaluated job
# in ``evaluation_of`` and the policy it runs (``EvaluationPolicy.to_dict``, JSON) in
# ``evaluation_policy``; the evaluated job's record shows it under ``evaluation``.
JOB_KIND = "kind"
EVALUATION_KIND = "evaluation"
EVALUATION_OF = "evaluation_of"
EVALUATION_POLICY = "evaluation_policy"
EVALUATION = "evaluation"
# The evaluated job's end effect that starts its evaluation (``jobs.effects``): a job that owes
# it is registered with ModelMetrics naming the evaluation's metrics JSON.
EVALUATE_EFFECT = "evaluate"
# Sweeps (issue 37): a sweep's record has ``kind`` = ``sweep``; its tuning job has the job's
# name. ``sweep`` holds its definition and progress (describe and list show it),
# ``sweep_trials`` each trial's status, objective and charged cost, and ``instances_held``
# the instances its claim holds of the team's quota (its parallel trials' instances).
SWEEP_KIND = "sweep"
SWEEP = "sweep"
SWEEP_TRIALS = "sweep_trials"
INSTANCES_HELD = "instances_held"
