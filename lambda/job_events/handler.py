"""SageMaker training job state changes -> the job ledger and the platform's SNS topic.

EventBridge delivers ``SageMaker Training Job State Change`` events for jobs that run with the
platform's training role. Each updates the job's ledger item (status, secondary status,
billable and training time, spot savings); a terminal status is also published to SNS.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# No level of its own: Lambda sets the root logger from the function's application log
# level and writes every record as JSON with the request id (PlatformFunction).
LOG = logging.getLogger("ftl.job_events")

TERMINAL = ("Completed", "Failed", "Stopped")
_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 4})
TABLE = os.environ.get("FTL_JOB_TABLE", "")
TOPIC = os.environ.get("FTL_TOPIC_ARN", "")
DYNAMODB = boto3.client("dynamodb", config=_CONFIG)
SNS = boto3.client("sns", config=_CONFIG)


def summarize(detail: dict[str, Any]) -> dict[str, Any]:
    """The ledger fields an event carries; savings only for spot jobs with both times."""
    summary: dict[str, Any] = {
        "status": detail.get("TrainingJobStatus"),
        "secondary_status": detail.get("SecondaryStatus"),
    }
    if detail.get("FailureReason"):
        summary["failure_reason"] = str(detail["FailureReason"])[:1024]
    billable = detail.get("BillableTimeInSeconds")
    training = detail.get("TrainingTimeInSeconds")
    if billable is not None:
        summary["billable_seconds"] = int(billable)
    if training is not None:
        summary["training_seconds"] = int(training)
    if billable is not None and training and detail.get("EnableManagedSpotTraining"):
        summary["spot_savings_percent"] = round((1 - int(billable) / int(training)) * 100, 1)
    return {k: v for k, v in summary.items() if v is not None}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    detail = event.get("detail") or {}
    name = detail.get("TrainingJobName")
    if not name or not detail.get("TrainingJobStatus"):
        LOG.warning("ignoring event without a job name or status: %s", event.get("id"))
        return {"updated": False}
    summary = summarize(detail)
    summary["updated_at"] = (
        datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
    updated = _update_ledger(name, summary)
    if summary["status"] in TERMINAL:
        message = {"job_name": name, **summary}
        SNS.publish(
            TopicArn=TOPIC,
            Subject=f"Training job {summary['status']}: {name}"[:100],
            Message=json.dumps(message, indent=2),
            MessageAttributes={"status": {"DataType": "String", "StringValue": summary["status"]}},
        )
    return {"updated": updated, "job_name": name, **summary}


def _update_ledger(name: str, values: dict[str, Any]) -> bool:
    names = {f"#a{i}": k for i, k in enumerate(values)}
    vals = {f":v{i}": _enc(v) for i, v in enumerate(values.values())}
    try:
        DYNAMODB.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "job#" + name}},
            UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
            # Only jobs this platform started are in the ledger; never create stray items.
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=vals,
        )
    except ClientError as err:
        if err.response["Error"]["Code"] == "ConditionalCheckFailedException":
            LOG.warning("job %s is not in the ledger; event ignored", name)
            return False
        raise
    return True


def _enc(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value)}
    return {"S": str(value)}
