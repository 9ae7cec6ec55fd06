"""Experiment tracking: a tracked job logs to its MLflow run (issue 27).

The launcher sets the environment (jobmodel/after_training/tracking_job.py; the names below
are the same strings as jobmodel/contract/names.py's, which tests/training/test_train_tracking.py
checks):
``MLFLOW_TRACKING_URI`` (a SageMaker MLflow tracking server's or app's ARN, or in the sandbox a
plain http URI), ``MLFLOW_EXPERIMENT_NAME``, ``FTL_TRACKING_RUN_NAME`` (the platform's job
name) and the job's template, image, instance type, attempt, cost estimate and output path.

Only world process zero logs. At the start of training it installs the MLflow client and
SageMaker's auth plugin from ``requirements-tracking.txt`` when the image lacks them (the way
the optional kernels are), finds or creates the experiment, and continues the run whose id
it left in the checkpoint folder (a spot interruption's next attempt), else the run of the
experiment with the job's name, else creates it. It logs the hyperparameters as params, the
job's facts as tags, every logging step's training and eval metrics with their step, then
the final metrics (``final/<name>``) and the model's S3 URI. Tracking never fails training:
the first error is logged as a warning and tracking stops for the rest of the job.

A sweep's trial (issue 37: its hyperparameters carry the tuner's ``_tuning_objective_metric``)
has the sweep's environment, so its run name is the sweep's: the trial logs to a run of its
own, named as its training job, under the sweep's parent run (``mlflow.parentRunId``), which
the first trial to start creates (the oldest run of that name is the parent, should two
trials start at once).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import math
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from transformers import TrainerCallback

from .hparams import TUNING_OBJECTIVE

logger = logging.getLogger("ftl_train")

ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
ENV_EXPERIMENT_NAME = "MLFLOW_EXPERIMENT_NAME"
ENV_RUN_NAME = "FTL_TRACKING_RUN_NAME"
ENV_TEMPLATE = "FTL_TRACKING_TEMPLATE"
ENV_IMAGE = "FTL_TRACKING_IMAGE"
ENV_INSTANCE_TYPE = "FTL_TRACKING_INSTANCE_TYPE"
ENV_ATTEMPT = "FTL_TRACKING_ATTEMPT"
ENV_COST_ESTIMATE = "FTL_TRACKING_COST_ESTIMATE_USD"
ENV_OUTPUT_S3_URI = "FTL_TRACKING_OUTPUT_S3_URI"
# The tags a run carries, from the environment (tag name -> variable).
TAG_VARIABLES = {
    "ftl.template": ENV_TEMPLATE,
    "ftl.image": ENV_IMAGE,
    "ftl.instance_type": ENV_INSTANCE_TYPE,
    "ftl.attempt": ENV_ATTEMPT,
    "ftl.cost_estimate_usd": ENV_COST_ESTIMATE,
}
RUN_ID_FILE = "ftl_mlflow_run_id"  # in the checkpoint folder, which SageMaker syncs to S3
REQUIREMENTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "requirements-tracking.txt")
# Fail fast when the server cannot be reached (MLflow's default retries for minutes).
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
_MAX_PARAM = 6000  # MLflow's limit on a param's value
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own tag for a nested run


@dataclass(frozen=True)
class Settings:
    uri: str
    experiment: str
    run_name: str
    tags: Mapping[str, str]
    output_s3_uri: str
    training_job: str
    parent_run: str = ""  # a sweep's trial: the sweep's run, this run's parent

    @property
    def model_s3_uri(self) -> str:
        """Where SageMaker uploads this attempt's model (``S3OutputPath/<job>/output/``)."""
        if not self.output_s3_uri:
            return ""
        return f"{self.output_s3_uri.rstrip('/')}/{self.training_job}/output/model.tar.gz"


def settings(environ: Mapping[str, str]) -> Settings | None:
    """The job's tracking settings, or None when the job is not tracked."""
    uri = environ.get(ENV_TRACKING_URI, "")
    run_name = environ.get(ENV_RUN_NAME, "")
    if not uri or not run_name:
        return None
    tags = {tag: environ[var] for tag, var in TAG_VARIABLES.items() if environ.get(var)}
    # SageMaker names the training job in the container's environment; a chain's later
    # attempts are <job>-a<n>, a sweep's trials <sweep>-<n>-<hex>.
    training_job = environ.get("TRAINING_JOB_NAME") or run_name
    parent = ""
    if _is_trial(environ) and training_job != run_name:
        parent, run_name = run_name, training_job
    return Settings(
        uri=uri,
        experiment=environ.get(ENV_EXPERIMENT_NAME) or parent or run_name,
        run_name=run_name,
        tags=tags,
        output_s3_uri=environ.get(ENV_OUTPUT_S3_URI, ""),
        training_job=training_job,
        parent_run=parent,
    )


def _is_trial(environ: Mapping[str, str]) -> bool:
    """Whether this job is a tuner's trial: the toolkit's ``SM_HPS`` holds the objective the
    tuner adds to each trial's hyperparameters."""
    try:
        hps = json.loads(environ.get("SM_HPS") or "{}")
    except ValueError:
        return False
    return isinstance(hps, dict) and TUNING_OBJECTIVE in hps


def ensure_client(uri: str, environ: Mapping[str, str]) -> bool:
    """Install the pinned MLflow client (and, for an ARN, SageMaker's auth plugin) when the
    image lacks them; one process per node installs. False, with a warning, on failure."""
    modules = ["mlflow"] + (["sagemaker_mlflow"] if uri.startswith("arn:") else [])
    if all(importlib.util.find_spec(m) is not None for m in modules):
        return True
    import fcntl
    import subprocess
    import tempfile

    lock = os.path.join(tempfile.gettempdir(), "ftl_install_tracking.lock")
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        importlib.invalidate_caches()
        if all(importlib.util.find_spec(m) is not None for m in modules):
            return True
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check"]
        done = subprocess.run(
            [*cmd, "-r", REQUIREMENTS], capture_output=True, text=True, env=dict(environ)
        )
    if done.returncode != 0:
        logger.warning(
            "tracking off: installing requirements-tracking.txt failed (%s); a job without "
            "PyPI access needs mlflow in its image",
            done.stderr.strip()[-300:],
        )
        return False
    importlib.invalidate_caches()
    logger.info("installed the MLflow client in %.1f s", time.perf_counter() - start)
    return True


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


class Tracker(TrainerCallback):
    """Logs a job to its MLflow run from world process zero (see the module docstring).

    ``params`` (the hyperparameters) and ``checkpoint_dir`` are set once known, before
    training starts; every MLflow call goes through :meth:`_safe`.
    """

    def __init__(self, config: Settings, environ: Mapping[str, str]):
        self.config = config
        self.environ = environ
        self.params: Mapping[str, Any] = {}
        self.checkpoint_dir = ""
        self.client: Any = None
        self.run_id: str | None = None
        self.resumed = False

    # ------------------------------------------------------------------ start
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero and self.client is None:
            self._safe("start", self._start)

    def _start(self) -> None:
        if not ensure_client(self.config.uri, self.environ):
            return
        for key, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(key, value)
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=self.config.uri)
        experiment = client.get_experiment_by_name(self.config.experiment)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else client.create_experiment(self.config.experiment)
        )
        run_id = self._existing_run(client, experiment_id)
        tags = {**self.config.tags, "ftl.training_job": self.config.training_job}
        if self.config.parent_run:
            tags[PARENT_TAG] = self._parent(client, experiment_id)
            tags["ftl.sweep"] = self.config.parent_run
        if run_id is None:
            run = client.create_run(experiment_id, run_name=self.config.run_name, tags=tags)
            run_id = run.info.run_id
        else:
            self.resumed = True
            client.update_run(run_id, status="RUNNING")
            for key, value in tags.items():
                client.set_tag(run_id, key, value)
        self.client, self.run_id = client, run_id
        self._remember(run_id)
        self._log_params(client, run_id)
        logger.info(
            "tracking to MLflow run %s (%s) in experiment %s%s",
            self.config.run_name,
            run_id,
            self.config.experiment,
            " (continued)" if self.resumed else "",
        )

    def _existing_run(self, client: Any, experiment_id: str) -> str | None:
        """The run an earlier attempt left: its id in the checkpoint folder, else the
        experiment's run with the job's name."""
        path = os.path.join(self.checkpoint_dir, RUN_ID_FILE) if self.checkpoint_dir else ""
        if path and os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                run_id = fh.read().strip()
            if run_id:
                return run_id
        name = self.config.run_name.replace("'", "")
        found = client.search_runs(
            [experiment_id], filter_string=f"attributes.run_name = '{name}'", max_results=1
        )
        return found[0].info.run_id if found else None

    def _parent(self, client: Any, experiment_id: str) -> str:
        """The sweep's run (a trial's parent): found by its name, else created; of two
        created at once, the oldest."""
        name = self.config.parent_run.replace("'", "")
        query = f"attributes.run_name = '{name}'"
        found = client.search_runs([experiment_id], filter_string=query, max_results=1)
        if not found:
            tags = {"ftl.template": self.config.tags.get("ftl.template", ""), "ftl.kind": "sweep"}
            client.create_run(experiment_id, run_name=self.config.parent_run, tags=tags)
            found = client.search_runs(
                [experiment_id],
                filter_string=query,
                order_by=["attributes.start_time ASC"],
                max_results=1,
            )
        return str(found[0].info.run_id)

    def _remember(self, run_id: str) -> None:
        if self.checkpoint_dir:
            os.makedirs(self.checkpoint_dir, exist_ok=True)
            with open(os.path.join(self.checkpoint_dir, RUN_ID_FILE), "w", encoding="utf-8") as fh:
                fh.write(run_id)

    def _log_params(self, client: Any, run_id: str) -> None:
        """The hyperparameters, once: a continued run keeps the params it has (MLflow refuses
        a param logged again with another value)."""
        from mlflow.entities import Param

        have = client.get_run(run_id).data.params if self.resumed else {}
        params = [
            Param(str(k), str(v)[:_MAX_PARAM])
            for k, v in sorted(self.params.items())
            if k not in have
        ]
        for i in range(0, len(params), 100):  # LogBatch takes at most 100 params
            client.log_batch(run_id, params=params[i : i + 100])

    # --------------------------------------------------------------- metrics
    def on_log(
        self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kw: Any
    ) -> None:
        if self.client is None or not state.is_world_process_zero or not logs:
            return
        metrics = {k: v for k, v in ((k, _number(v)) for k, v in logs.items()) if v is not None}
        if metrics:
            self.log_metrics(metrics, int(state.global_step))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        def log() -> None:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            batch = [Metric(k, float(v), now, step) for k, v in metrics.items()]
            for i in range(0, len(batch), 1000):
                self.client.log_batch(self.run_id, metrics=batch[i : i + 1000])

        self._safe("metrics", log)

    # ------------------------------------------------------------------- end
    def finish(self, results: Mapping[str, Any], step: int) -> None:
        """The final metrics, the model's S3 URI, and the run ended ``FINISHED``."""
        if self.client is None:
            return
        final = {f"final/{k}": v for k, v in results.items() if _number(v) is not None}
        self.log_metrics({k: float(v) for k, v in final.items()}, step)

        def end() -> None:
            if self.config.model_s3_uri:
                self.client.set_tag(self.run_id, "ftl.model_s3_uri", self.config.model_s3_uri)
            self.client.set_terminated(self.run_id, status="FINISHED")

        self._safe("finish", end)

    def stop(self, status: str) -> None:
        """The run ended ``KILLED`` (SIGTERM: a later attempt continues it) or ``FAILED``."""
        if self.client is not None:
            self._safe("stop", lambda: self.client.set_terminated(self.run_id, status=status))

    def _safe(self, what: str, fn: Any) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - tracking must never fail training
            logger.warning("tracking off after an MLflow error (%s): %s", what, exc)
            self.client = None
