"""``make demo``'s last lines: the job's registered model version (issue 27).

The demo's job is described through the launcher: moto reports every training job
``Completed``, so the describe records the end and registers the model (the end effect
``register``), and the answer carries the version; its lineage is read back from SageMaker."""

from __future__ import annotations

import json
from typing import Any

import boto3


def show_model_version(target: str, job_name: str) -> dict[str, Any]:
    """Describe ``job_name`` through ``target`` (the launcher's door) and print its version."""
    reply = boto3.client("lambda").invoke(
        FunctionName=target,
        Payload=json.dumps({"action": "describe", "job_name": job_name}).encode(),
    )
    job: dict[str, Any] = json.loads(reply["Payload"].read())
    arn = job.get("model_package_arn")
    if not arn:
        print(f"\nno model version registered for {job_name} (status {job.get('status')})")
        return job
    version = boto3.client("sagemaker").describe_model_package(ModelPackageName=arn)
    lineage = version.get("CustomerMetadataProperties", {})
    print("\nthe job's registered model version (SageMaker model registry, moto):")
    rows = [
        ("model package", arn),
        ("group / version", f"{job['model_package_group']} / {job['model_package_version']}"),
        ("approval", job["model_approval_status"]),
        ("artifact", version["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]),
        ("lineage", ", ".join(f"{k}={v}" for k, v in sorted(lineage.items()))),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    return job
