"""SageMaker training job state changes -> the job ledger and the platform's SNS topic.

EventBridge delivers ``SageMaker Training Job State Change`` events (source ``aws.sagemaker``)
for jobs that run with the platform's training roles. Each updates the job's ledger item
(status, secondary status, billable and training time, spot savings, and on a terminal status
``cost_usd`` and the team's usage given back); a terminal status is also published to SNS.

Only well-formed events are stored: the right source and detail type, a valid job name, a
status from SageMaker's list, and non-negative whole numbers of seconds. Anything else is
logged and dropped. A ledger item that already holds a terminal status is never changed by an
event, and an event older than the last one stored (its ``time``) is dropped.

Ships with ``jobmodel`` (the price and usage rules it shares with the trigger).
"""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from jobmodel import SAGEMAKER_STATUSES, TERMINAL_STATUSES
from jobmodel import quotas as Q
from jobmodel.pricing import cost_usd

# No level of its own: Lambda sets the root logger from the function's application log
# level and writes every record as JSON with the request id (PlatformFunction).
LOG = logging.getLogger("ftl.job_events")

DETAIL_TYPE = "SageMaker Training Job State Change"
_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
MAX_SECONDS = 100_000_000  # ~3 years; SageMaker's own limit is 28 days of runtime
_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 4})
TABLE = os.environ.get("FTL_JOB_TABLE", "")
TOPIC = os.environ.get("FTL_TOPIC_ARN", "")
DYNAMODB = boto3.client("dynamodb", config=_CONFIG)
SNS = boto3.client("sns", config=_CONFIG)


class Malformed(ValueError):
    """The event is not a well-formed SageMaker training job state change."""


def _seconds(detail: dict[str, Any], key: str) -> int | None:
    value = detail.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise Malformed(f"{key} is not a number")
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_SECONDS:
        raise Malformed(f"{key} must be a whole number of seconds from 0 to {MAX_SECONDS}")
    return value


def parse(event: Any) -> tuple[str, dict[str, Any], str | None]:
    """``(job name, ledger fields, event time)`` of a well-formed event, else ``Malformed``."""
    if not isinstance(event, dict) or event.get("source") != "aws.sagemaker":
        raise Malformed("not an aws.sagemaker event")
    if event.get("detail-type") != DETAIL_TYPE:
        raise Malformed(f"detail-type is not {DETAIL_TYPE!r}")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise Malformed("no detail object")
    name = detail.get("TrainingJobName")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise Malformed("TrainingJobName is not a training job name")
    status = detail.get("TrainingJobStatus")
    if status not in SAGEMAKER_STATUSES:
        raise Malformed(f"TrainingJobStatus must be one of {', '.join(SAGEMAKER_STATUSES)}")
    when = event.get("time")
    if when is not None and (not isinstance(when, str) or not _TIME_RE.fullmatch(when)):
        raise Malformed("time is not an ISO 8601 UTC timestamp")
    summary: dict[str, Any] = {"status": status}
    secondary = detail.get("SecondaryStatus")
    if secondary is not None:
        if not isinstance(secondary, str) or len(secondary) > 64:
            raise Malformed("SecondaryStatus is not a short string")
        summary["secondary_status"] = secondary
    if detail.get("FailureReason"):
        summary["failure_reason"] = str(detail["FailureReason"])[:1024]
    billable = _seconds(detail, "BillableTimeInSeconds")
    training = _seconds(detail, "TrainingTimeInSeconds")
    if billable is not None:
        summary["billable_seconds"] = billable
    if training is not None:
        summary["training_seconds"] = training
    if billable is not None and training and detail.get("EnableManagedSpotTraining") is True:
        summary["spot_savings_percent"] = round((1 - billable / training) * 100, 1)
    return name, summary, when


def summarize(detail: dict[str, Any]) -> dict[str, Any]:
    """The ledger fields a state-change event's detail carries (``Malformed`` if bad)."""
    detail = {"TrainingJobName": "job", **detail}
    event = {"source": "aws.sagemaker", "detail-type": DETAIL_TYPE, "detail": detail}
    return parse(event)[1]


def handler(event: Any, context: Any) -> dict[str, Any]:
    try:
        name, summary, when = parse(event)
    except Malformed as err:
        event_id = event.get("id") if isinstance(event, dict) else None
        LOG.warning("dropped a malformed event %s: %s", event_id, err)
        return {"updated": False, "dropped": str(err)}
    summary["updated_at"] = _now().isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if when is not None:
        summary["event_time"] = when
    updated = _record(name, summary, when)
    if updated and summary["status"] in TERMINAL_STATUSES:
        message = {"job_name": name, **summary}
        SNS.publish(
            TopicArn=TOPIC,
            Subject=f"Training job {summary['status']}: {name}"[:100],
            Message=json.dumps(message, indent=2),
            MessageAttributes={"status": {"DataType": "String", "StringValue": summary["status"]}},
        )
    return {"updated": updated, "job_name": name, **summary}


def _now() -> datetime:
    return datetime.now(UTC)


def _record(name: str, summary: dict[str, Any], when: str | None) -> bool:
    item = DYNAMODB.get_item(
        TableName=TABLE, Key={"pk": {"S": "job#" + name}}, ConsistentRead=True
    ).get("Item")
    if item is None:
        # Only jobs this platform started are in the ledger; never create stray items.
        LOG.warning("job %s is not in the ledger; event ignored", name)
        return False
    job = {k: next(iter(v.values())) for k, v in item.items()}
    if job.get("status") in TERMINAL_STATUSES:
        LOG.info("job %s already ended (%s); event ignored", name, job.get("status"))
        return False
    terminal = summary["status"] in TERMINAL_STATUSES
    count = int(job.get("instance_count", 1))
    if terminal:
        price = float(job["price_usd_per_hour"]) if "price_usd_per_hour" in job else None
        cost = cost_usd(price, count, summary.get("billable_seconds"))
        if cost is not None:
            summary["cost_usd"] = cost
    update = _job_update(name, summary, when)
    items = [{"Update": update}]
    team = job.get("team")
    if terminal and team and not job.get("usage_released"):
        update["UpdateExpression"] += ", usage_released = :released"
        update["ExpressionAttributeValues"][":released"] = {"BOOL": True}
        estimate = float(job["estimated_max_cost_usd"]) if "estimated_max_cost_usd" in job else None
        items.append({"Update": _release(team, count, estimate, summary.get("cost_usd"))})
    try:
        DYNAMODB.transact_write_items(TransactItems=items)
    except ClientError as err:
        if err.response["Error"]["Code"] != "TransactionCanceledException":
            raise
        LOG.info("event for %s is older than the ledger's record; ignored", name)
        return False
    return True


def _job_update(name: str, values: dict[str, Any], when: str | None) -> dict[str, Any]:
    names = {f"#a{i}": k for i, k in enumerate(values)}
    vals = {f":v{i}": _enc(v) for i, v in enumerate(values.values())}
    ended = sorted(TERMINAL_STATUSES)
    vals.update({f":end{i}": {"S": s} for i, s in enumerate(ended)})
    condition = "attribute_exists(pk) AND NOT #status IN ({})".format(
        ", ".join(f":end{i}" for i in range(len(ended)))
    )
    names["#status"] = "status"
    if when is not None:
        names["#time"] = "event_time"
        vals[":when"] = {"S": when}
        condition += " AND (attribute_not_exists(#time) OR #time <= :when)"
    return {
        "TableName": TABLE,
        "Key": {"pk": {"S": "job#" + name}},
        "UpdateExpression": "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": vals,
    }


def _release(team: str, count: int, estimate: float | None, cost: float | None) -> dict[str, Any]:
    """The team's usage release for this month (starting the month first if it turned)."""
    month = Q.month_of(_now())
    key = {"pk": {"S": Q.USAGE + team}}
    usage = DYNAMODB.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
    if usage is not None and usage.get("month", {}).get("S") != month:
        try:
            DYNAMODB.update_item(**Q.rollover_update(TABLE, team, usage["month"]["S"], month))
        except ClientError as err:
            if err.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
    return Q.release_update(TABLE, team, month, count=count, estimate=estimate, cost=cost)


def _enc(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value)}
    return {"S": str(value)}
