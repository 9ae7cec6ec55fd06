"""Every AWS operation the trigger calls, by botocore service name.

The Lambda asset ships botocore service models trimmed to exactly these operations (generated
at synth from the installed botocore by ``ftl_constructs/botocore_models.py``), and the
trigger's clients load only those models: a call to an operation missing here fails with
``AttributeError`` on the client. ``tests/unit/trigger/test_trimmed_models.py`` scans the
trigger's code for client calls (clients live in attributes named after their service, such
as ``runtime.sagemaker``, or ``client``/``*_client``) and runs the launcher's flows on the
trimmed models, so adding a call means adding its operation here. Keep this module a plain
literal: synth reads it without importing it.
"""

OPERATIONS: dict[str, tuple[str, ...]] = {
    # ListTrainingJobs: whether a claimed job whose start went unanswered exists (direct mode).
    "sagemaker": (
        "CreateTrainingJob",
        "DescribeTrainingJob",
        "StopTrainingJob",
        "ListTrainingJobs",
        # The model registry (issue 27): a Completed job's version, models and review.
        "CreateModelPackage",
        "DescribeModelPackage",
        "ListModelPackages",
        "UpdateModelPackage",
        # Sweeps (issue 37): a sweep's tuning job and its trials.
        "CreateHyperParameterTuningJob",
        "DescribeHyperParameterTuningJob",
        "ListTrainingJobsForHyperParameterTuningJob",
        "StopHyperParameterTuningJob",
    ),
    # BatchGetItem: queue mode's estimated start reads the queue's jobs' limits.
    "dynamodb": ("GetItem", "PutItem", "UpdateItem", "TransactWriteItems", "Query", "BatchGetItem"),
    # A job's end effects and notices (jobmodel.jobs.effects, jobmodel.jobs.notifications).
    "sns": ("Publish",),
    # Notifications (ftl_ledger.notify): every platform event on the event bus too.
    "events": ("PutEvents",),
    # Quota-aware submit (ftl_trigger/quotas.py): the account's SageMaker quotas.
    "service-quotas": ("ListServiceQuotas",),
    # An evaluation's results (issue 36, ftl_ledger.evaluation): the evaluation job's
    # output.tar.gz read, the evaluated job's metrics JSON written.
    "s3": ("GetObject", "PutObject"),
    # The queue scheduler's service jobs (SageMaker training jobs run through AWS Batch).
    # GetJobQueueSnapshot gives a queued job's position.
    "batch": (
        "SubmitServiceJob",
        "DescribeServiceJob",
        "ListServiceJobs",
        "TerminateServiceJob",
        "GetJobQueueSnapshot",
    ),
}
