"""The demo's experiment tracking (issue 27): the MLflow run a job logs to.

moto completes training jobs without running any code, so no entrypoint ever logs a run in
the sandbox demo. The demo deploys with ``ftl:mlflow`` naming a tracking server (an ARN that
exists nowhere: nothing calls it) so its job is tracked as on AWS, and prints the run the job's
entrypoint would log to, as ``describe`` reports it. The entrypoint's logging itself is tested
against a real MLflow server on localhost (tests/training/test_train_tracking.py).
"""

from __future__ import annotations

import json
from typing import Any

DEMO_MLFLOW_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ftl-demo-mlflow"


def tracking_context() -> dict[str, str]:
    """The ``-c`` context that makes the demo's jobs tracked."""
    return {"ftl:mlflow": json.dumps({"trackingServerArn": DEMO_MLFLOW_ARN})}


def show_tracking(lambda_client: Any, target: str, job_name: str) -> None:
    """Print the MLflow run ``describe`` names for the job (or that it is not tracked)."""
    reply = lambda_client.invoke(
        FunctionName=target,
        Payload=json.dumps({"action": "describe", "job_name": job_name}).encode(),
    )
    described = json.loads(reply["Payload"].read())
    tracking = described.get("tracking")
    print("\nthe job's MLflow run (describe's tracking; moto runs no training, so nothing logs):")
    if not tracking:
        print("  not tracked")
        return
    print(f"  tracking server  {tracking['mlflow_resource_arn']}")
    print(f"  experiment       {tracking['experiment_name']}")
    print(f"  run              {tracking['run_name']}")
