"""The job model: instance catalog, templates, request validation, CreateTrainingJob renderer.

Templates: types in ``spec`` and ``hyperparameters``, rules in ``template_rules`` and
``distribution``, catalog files in ``catalog`` (``templates`` maps them).

Standard library only: the CDK constructs use it at synth time and the trigger
Lambda carries a copy at run time.
"""

from .catalog import CATALOG_VERSION, dump_catalog, load_catalog, shipped_catalog
from .contract import HTTP_STATUS, JOB_STATUSES, SAGEMAKER_STATUSES, TERMINAL_STATUSES
from .errors import (
    ERROR_TYPES,
    CapacityError,
    Conflict,
    Forbidden,
    JobModelError,
    NotFound,
    QuotaExceeded,
    TemplateError,
    Throttled,
    UpstreamError,
    ValidationError,
)
from .hyperparameters import HyperparameterRule
from .instances import INSTANCE_TYPES, InstanceType, efa_environment, get_instance_type
from .platform import PlatformConfig
from .render import (
    CHECKPOINT_LOCAL_PATH,
    TENSORBOARD_LOCAL_PATH,
    checkpoint_s3_uri,
    encode_hyperparameters,
    make_job_name,
    metric_regex,
    output_s3_uri,
    render_create_training_job,
    request_hash,
)
from .request import SUBMIT_FIELDS, SubmitRequest, validate_job_name, validate_submit
from .scheduler import SchedulerConfig
from .spec import DISTRIBUTION_KINDS, INPUT_MODES, Distribution, InputChannel, TemplateSpec
from .template_rules import validate_template

__all__ = [
    "CATALOG_VERSION",
    "CHECKPOINT_LOCAL_PATH",
    "ERROR_TYPES",
    "HTTP_STATUS",
    "SAGEMAKER_STATUSES",
    "CapacityError",
    "Conflict",
    "Throttled",
    "UpstreamError",
    "Forbidden",
    "QuotaExceeded",
    "JOB_STATUSES",
    "DISTRIBUTION_KINDS",
    "INPUT_MODES",
    "INSTANCE_TYPES",
    "SUBMIT_FIELDS",
    "TENSORBOARD_LOCAL_PATH",
    "TERMINAL_STATUSES",
    "Distribution",
    "HyperparameterRule",
    "InputChannel",
    "InstanceType",
    "JobModelError",
    "NotFound",
    "PlatformConfig",
    "SchedulerConfig",
    "SubmitRequest",
    "TemplateError",
    "TemplateSpec",
    "ValidationError",
    "checkpoint_s3_uri",
    "dump_catalog",
    "efa_environment",
    "encode_hyperparameters",
    "get_instance_type",
    "load_catalog",
    "make_job_name",
    "metric_regex",
    "output_s3_uri",
    "render_create_training_job",
    "request_hash",
    "shipped_catalog",
    "validate_job_name",
    "validate_submit",
    "validate_template",
]
