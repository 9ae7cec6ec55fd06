"""The IAM requests a tracked job's MLflow client makes (issue 27), for the authorization check.

SageMaker managed MLflow authorizes each MLflow REST call as one IAM action on the server: a
tracking server's calls as ``sagemaker-mlflow:<Action>`` on its ``mlflow-tracking-server``
ARN, a serverless MLflow app's as ``sagemaker:CallMlflowAppApi`` on its ``mlflow-app`` ARN
(Service Authorization Reference). :data:`CLIENT_CALLS` maps the ``MlflowClient`` methods
the entrypoint calls to the REST call's action; tests/training/test_train_tracking.py
records the methods the entrypoint really calls and checks each is mapped here, so a new
call cannot slip past the check.
"""

from __future__ import annotations

from testsupport.authz.evaluate import Request

CLIENT_CALLS = {
    "get_experiment_by_name": "GetExperimentByName",
    "create_experiment": "CreateExperiment",
    "search_runs": "SearchRuns",
    "create_run": "CreateRun",
    "get_run": "GetRun",
    "update_run": "UpdateRun",
    "set_terminated": "UpdateRun",
    "log_batch": "LogBatch",
    "set_tag": "SetTag",
}


def mlflow_requests(role: str, server: str, src: str) -> list[Request]:
    """Every request the job's role makes of its MLflow server (an ARN)."""
    if ":mlflow-app/" in server:
        return [Request(role, "sagemaker:CallMlflowAppApi", (server,), {}, src + " (MLflow)")]
    actions = sorted(set(CLIENT_CALLS.values()))
    return [
        Request(role, f"sagemaker-mlflow:{a}", (server,), {}, src + " (MLflow)") for a in actions
    ]
