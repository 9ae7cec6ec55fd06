"""The job model: instance catalog, templates, request validation, CreateTrainingJob renderer.

Rooms, bottom layer first; each subpackage's docstring says what it holds and what it may
import (tests/test_house.py checks it, and that no import cycle exists):

- ``contract/``: errors, job statuses, HTTP routes, shared names. Imports nothing.
- top-level modules: ``_rules`` (checks shared by templates and requests), ``instances``
  (the instance catalog), ``regions``, ``teams`` (who may do what), ``platform`` (the
  deployed platform's configuration).
- ``money/``: prices, costs and estimates, the teams' limits.
- ``templates/``: template types, their synth-time rules, catalog files.
- ``requests/``: a caller's submit, read and stop requests, validated.
- ``locations`` and ``render`` (top level): a job's name and S3 prefixes; any attempt of a
  validated request, on one step of capacity, becomes ``CreateTrainingJob`` kwargs.
- ``capacity/``: training plans, capacity chains, service quotas, the scheduler, queue ETA.
- ``jobs/``: the job record and every rule that changes it.
- ``fleet_metrics`` (top level): the fleet's CloudWatch metrics.

This module re-exports the public surface (``__all__``); new code may import either from
here or from a name's home. Standard library only: the CDK constructs use it at synth time
and the Lambda assets carry a copy at run time.
"""

from .capacity.scheduler import SchedulerConfig
from .contract.errors import (
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
from .contract.statuses import HTTP_STATUS, JOB_STATUSES, SAGEMAKER_STATUSES, TERMINAL_STATUSES
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
from .requests.submit import SUBMIT_FIELDS, SubmitRequest, validate_job_name, validate_submit
from .templates.catalog import CATALOG_VERSION, dump_catalog, load_catalog, shipped_catalog
from .templates.hyperparameters import HyperparameterRule
from .templates.rules import validate_template
from .templates.spec import (
    DISTRIBUTION_KINDS,
    INPUT_MODES,
    Distribution,
    InputChannel,
    TemplateSpec,
)

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
