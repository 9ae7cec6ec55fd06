"""The evaluation's results on the evaluated job's MLflow run (issue 36).

An evaluation job of a tracked job gets the training job's MLflow variables
(``jobmodel.evaluation.tracking.evaluation_tracking_environment``): the tracking URI, the
experiment and the run's name, which is the evaluated job's name. At the end the entrypoint
finds that run and logs every metric as ``eval/<name>`` (step 0), with the tags
``ftl.evaluation_job`` (this training job), ``ftl.evaluation_status`` (``Completed`` or
``Failed``) and, for a failure, ``ftl.evaluation_reason``. The run keeps its status (training
ended it). As in training, tracking never fails the evaluation: a missing run, a missing
client or an MLflow error is one warning.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping
from typing import Any

from ftl_train import tracking

logger = logging.getLogger("ftl_eval")

PREFIX = "eval/"
_MAX_TAG = 5000  # MLflow's limit on a tag's value


def log_results(
    metrics: Mapping[str, float],
    status: str,
    environ: Mapping[str, str],
    reason: str | None = None,
) -> bool:
    """Log the evaluation on the evaluated job's run; whether it was logged."""
    config = tracking.settings(environ)
    if config is None:
        return False
    try:
        return _log(config, metrics, status, environ, reason)
    except Exception as exc:  # noqa: BLE001 - tracking must never fail the evaluation
        logger.warning("evaluation not logged to MLflow: %s", exc)
        return False


def _log(
    config: Any,
    metrics: Mapping[str, float],
    status: str,
    environ: Mapping[str, str],
    reason: str | None,
) -> bool:
    if not tracking.ensure_client(config.uri, environ):
        return False
    for key, value in tracking.HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=config.uri)
    experiment = client.get_experiment_by_name(config.experiment)
    name = config.run_name.replace("'", "")
    runs = (
        client.search_runs(
            [experiment.experiment_id],
            filter_string=f"attributes.run_name = '{name}'",
            max_results=1,
        )
        if experiment is not None
        else []
    )
    if not runs:
        logger.warning("evaluation not logged: no MLflow run %s in %s", name, config.experiment)
        return False
    run_id = runs[0].info.run_id
    now = int(time.time() * 1000)
    batch = [
        Metric(PREFIX + k, float(v), now, 0) for k, v in sorted(metrics.items()) if math.isfinite(v)
    ]
    for i in range(0, len(batch), 1000):  # LogBatch takes at most 1000 metrics
        client.log_batch(run_id, metrics=batch[i : i + 1000])
    client.set_tag(run_id, "ftl.evaluation_job", environ.get("TRAINING_JOB_NAME", ""))
    client.set_tag(run_id, "ftl.evaluation_status", status)
    if reason:
        client.set_tag(run_id, "ftl.evaluation_reason", reason[:_MAX_TAG])
    logger.info("evaluation logged to MLflow run %s (%d metrics)", run_id, len(batch))
    return True
