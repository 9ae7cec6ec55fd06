"""Notifications: what a team hears about its jobs and its spend (docs/API.md, Notifications).

Standard library only. Four events, each sent to the team's SNS topic (the platform's topic
without teams) and to EventBridge, with one stable deduplication id on both channels:

* ``started`` (``FTL Job Started``): ``<job>/started``;
* ``ended`` (``FTL Job Ended``): ``<job>/announce``, the end effect's id;
* ``chain-step`` (``FTL Chain Step``): ``<job>/chain-step-<attempt>``;
* ``budget`` (``FTL Budget Threshold``): ``<team>/budget-<YYYY-MM>-<80|100>``;
* ``evaluated`` (``FTL Evaluation Completed``, issue 36): ``<job>/evaluated``, the gate's
  verdict on the job's evaluation.

The job events are owed durably, like a job's end effects (``jobmodel.jobs.effects``): the write
that moved the job (to ``InProgress``; to a capacity chain's next attempt; the write that gave
its ``evaluation`` a verdict) adds the notice to
the job's mark of owed effects (:func:`owed_notices`), and whoever holds the record next sends
it and clears it. A budget threshold is owed by the team's month spend itself: a threshold the
spend has reached that the team's usage item does not list as sent (:func:`thresholds_due`)
is sent by the next write that changes the team's spend, then listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..capacity.chain import attempt_name
from ..contract.names import EVALUATION_KIND
from ..contract.statuses import Status
from ..money.limits import USAGE
from .job import ENDED_FIELDS as JOB_ENDED_FIELDS
from .job import Job

__all__ = [
    "ATTRIBUTES",
    "BUDGET",
    "BUDGET_SENT",
    "BUDGET_THRESHOLDS",
    "CHAIN_STEP",
    "DETAIL_TYPES",
    "ENDED",
    "ENV_EVENT_BUS",
    "EVALUATED",
    "ENV_TEAM_TOPICS",
    "MAX_DETAIL_BYTES",
    "STARTED",
    "Notice",
    "NotificationError",
    "budget_dedup_id",
    "budget_notice",
    "budget_sent_update",
    "console_url",
    "event_entry",
    "event_source",
    "is_notice",
    "job_notice",
    "NOTICE_KEYS",
    "notice_kind",
    "notice_order",
    "owed_notices",
    "sns_publish",
    "thresholds_due",
]

# Both functions: team name -> its topic's ARN (JSON), and the event bus notifications go to.
ENV_TEAM_TOPICS = "FTL_TEAM_TOPICS"
ENV_EVENT_BUS = "FTL_EVENT_BUS"

STARTED = "started"
ENDED = "ended"
CHAIN_STEP = "chain-step"
BUDGET = "budget"
EVALUATED = "evaluated"
DETAIL_TYPES: dict[str, str] = {
    STARTED: "FTL Job Started",
    ENDED: "FTL Job Ended",
    CHAIN_STEP: "FTL Chain Step",
    BUDGET: "FTL Budget Threshold",
    EVALUATED: "FTL Evaluation Completed",
}
# The SNS message attributes every notification carries (absent ones are left out), so a
# subscription's filter policy can select by any of them.
ATTRIBUTES = ("event", "team", "template", "status", "requester", "dedup_id")
# The percentages of a team's monthly budget whose reaching is announced, once each a month.
BUDGET_THRESHOLDS: tuple[int, ...] = (80, 100)
# EventBridge's limit on one entry (Detail and the rest) and on Source / DetailType.
MAX_DETAIL_BYTES = 256 * 1024
_SOURCE_RE = re.compile(r"ftl\.[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
_MAX_ATTRIBUTE = 256
# The job notices a record may owe, one row each, in the order they are sent: the kind, and
# the owed-effects mark key it is owed under (a number in it orders notices of one kind). A
# new job notice is a row here and its message in ``job_notice``.
NOTICE_KEYS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (STARTED, re.compile(r"started")),
    (CHAIN_STEP, re.compile(r"chain-step-([1-9][0-9]{0,3})")),
    (EVALUATED, re.compile(r"evaluated")),
)
# An evaluated notice's message: the job's ``evaluation`` (``contract.names.EVALUATION``) as
# the results wrote it, under these names.
EVALUATION_FIELDS = {
    "job_name": "evaluation_job_name",
    "status": "evaluation_status",
    "verdict": "verdict",
    "reason": "reason",
    "metrics": "metrics",
    "failed_checks": "failed_checks",
}
# The ledger attributes an ended notification's message carries (marked ``notified`` on
# ``job.Job``).
ENDED_FIELDS = JOB_ENDED_FIELDS
# Statuses before a job runs: the write from one of these to InProgress owes ``started``.
_BEFORE_START = frozenset({Status.SUBMITTING, Status.QUEUED, Status.SCHEDULED})


class NotificationError(ValueError):
    """A notification that cannot be built (a bad source, a team without a name...)."""


@dataclass(frozen=True)
class Notice:
    """One notification, channel-free: its kind, id, attributes and JSON body."""

    kind: str
    dedup_id: str
    subject: str
    attributes: dict[str, str]
    message: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------ owed job notices
def _row(key: str) -> tuple[int, str, re.Match[str]] | None:
    for order, (kind, pattern) in enumerate(NOTICE_KEYS):
        match = pattern.fullmatch(key)
        if match is not None:
            return order, kind, match
    return None


def is_notice(key: str) -> bool:
    """Whether a key of the owed-effects mark is a job notice (a row of :data:`NOTICE_KEYS`)."""
    return _row(key) is not None


def notice_kind(key: str) -> str:
    """The kind of the job notice owed under ``key`` (``ValueError`` when no row has it)."""
    row = _row(key)
    if row is None:
        raise ValueError(f"{key!r} is not a job notice's key")
    return row[1]


def notice_order(key: str) -> tuple[int, int]:
    """Sort key of owed notices: by their row, then by the number in the key (a chain step's
    attempt)."""
    row = _row(key)
    if row is None:
        raise ValueError(f"{key!r} is not a job notice's key")
    order, _, match = row
    return (order, int(match.group(1)) if match.groups() else 0)


def owed_notices(before: Job, after: Job) -> dict[str, str]:
    """The job notices a write from ``before`` to ``after`` owes: mark key -> dedup id."""
    name = str(after.job_name or before.job_name)
    owed: dict[str, str] = {}
    # An evaluation job (issue 36) is heard of once, as its evaluated job's ``evaluated``
    # notice: it owes no started notice, as its end owes no announcement.
    starts = after.kind != EVALUATION_KIND
    if starts and after.status == Status.IN_PROGRESS and before.status in _BEFORE_START:
        owed[STARTED] = f"{name}/{STARTED}"
    # A chain's current attempt (1 until the record says otherwise).
    attempt_after = after.attempt
    if isinstance(attempt_after, int) and attempt_after > int(before.attempt or 1):
        key = f"{CHAIN_STEP}-{attempt_after}"
        owed[key] = f"{name}/{key}"
    if _verdict(after) and _verdict(after) != _verdict(before):
        owed[EVALUATED] = f"{name}/{EVALUATED}"
    return owed


def _verdict(job: Job) -> Any:
    evaluation = job.evaluation
    return evaluation.get("verdict") if isinstance(evaluation, Mapping) else None


# ---------------------------------------------------------------------- builders
def console_url(region: str, training_job_name: str) -> str:
    """The SageMaker console's page of a training job."""
    return (
        f"https://{region}.console.aws.amazon.com/sagemaker/home"
        f"?region={region}#/jobs/{training_job_name}"
    )


def _attributes(**values: Any) -> dict[str, str]:
    return {
        k: str(values[k])[:_MAX_ATTRIBUTE] for k in ATTRIBUTES if values.get(k) not in (None, "")
    }


def _training_job(job: Job) -> str:
    """The current attempt's training job (the job's name when it has no capacity chain)."""
    if not job.chain:
        return str(job.job_name)
    return attempt_name(str(job.job_name), int(job.attempt or 1))


def job_notice(kind: str, job: Job, dedup: str, *, region: str) -> Notice:
    """The notification of ``kind`` (started, ended, chain-step) for ``job`` as read."""
    if kind not in (STARTED, ENDED, CHAIN_STEP, EVALUATED):
        raise NotificationError(f"not a job notification: {kind!r}")
    name = job.job_name
    if not name:
        raise NotificationError("a job notification needs the job's name")
    status = str(job.status or "")
    training_job = str(job.training_job_name or _training_job(job))
    message: dict[str, Any] = {
        "event": kind,
        "job_name": str(name),
        "dedup_id": dedup,
        "team": job.team,
        "template": job.template,
        "status": status,
        "requester": job.requested_by,
        "training_job_name": training_job,
        "console_url": console_url(region, training_job),
    }
    if kind == ENDED:
        ended = {k: getattr(job, k) for k in ENDED_FIELDS}
        message.update({k: v for k, v in ended.items() if v is not None})
    if kind == CHAIN_STEP:
        attempt = int(job.attempt or 1)
        chain = job.chain or ()
        message["attempt"] = attempt
        message["steps"] = len(chain)
        if 0 < attempt <= len(chain):
            message["step"] = chain[attempt - 1]
    if kind == EVALUATED:
        message.update(_evaluated(job))
    subjects = {
        STARTED: f"Training job started: {name}",
        ENDED: f"Training job {status}: {name}",
        CHAIN_STEP: f"Training job {name}: capacity step {message.get('attempt')}",
        EVALUATED: f"Evaluation of {name}: {message.get('verdict')}",
    }
    message = {k: v for k, v in message.items() if v is not None}
    attributes = _attributes(**message)
    return Notice(kind, dedup, subjects[kind][:100], attributes, message)


def _evaluated(job: Job) -> dict[str, Any]:
    """An evaluated notice's fields: the evaluation's, and the version's; ``status`` is the
    verdict (what the version became, or stays), for filter policies."""
    evaluation = job.evaluation if isinstance(job.evaluation, Mapping) else {}
    out = {new: evaluation.get(old) for old, new in EVALUATION_FIELDS.items()}
    out["status"] = evaluation.get("verdict")
    out["model_package_arn"] = job.model_package_arn
    out["model_package_version"] = job.model_package_version
    return out


def budget_dedup_id(team: str, month: str, percent: int) -> str:
    return f"{team}/{BUDGET}-{month}-{percent}"


def budget_notice(
    team: str, month: str, percent: int, *, spend_usd: float, budget_usd: float
) -> Notice:
    """The notification that ``team``'s spend in ``month`` reached ``percent`` of its budget."""
    if not team:
        raise NotificationError("a budget notification needs a team")
    if percent not in BUDGET_THRESHOLDS:
        raise NotificationError(f"not a budget threshold: {percent} (one of {BUDGET_THRESHOLDS})")
    dedup = budget_dedup_id(team, month, percent)
    message = {
        "event": BUDGET,
        "dedup_id": dedup,
        "team": team,
        "month": month,
        "threshold_percent": percent,
        "month_spend_usd": round(spend_usd, 4),
        "monthly_budget_usd": budget_usd,
    }
    status = "budget-reached" if percent >= 100 else f"budget-{percent}"
    subject = f"Team {team} reached {percent}% of its {month} budget"
    attributes = _attributes(event=BUDGET, team=team, status=status, dedup_id=dedup)
    return Notice(BUDGET, dedup, subject[:100], attributes, {**message, "status": status})


def thresholds_due(
    spend_usd: float, budget_usd: float | None, month: str, sent: Iterable[str]
) -> list[int]:
    """The thresholds (percent) the spend has reached this month that are not yet ``sent``
    (keys ``<YYYY-MM>-<percent>`` as the usage item lists them), lowest first."""
    if not budget_usd or budget_usd <= 0:
        return []
    done = set(sent)
    return [
        p
        for p in BUDGET_THRESHOLDS
        if spend_usd >= budget_usd * p / 100 - 1e-9 and f"{month}-{p}" not in done
    ]


# ---------------------------------------------------------------------- channels
def sns_publish(notice: Notice) -> dict[str, Any]:
    """SNS ``Publish`` parameters (without ``TopicArn``) of ``notice``."""
    return {
        "Subject": notice.subject,
        "Message": json.dumps(notice.message, indent=2, sort_keys=True, default=str),
        "MessageAttributes": {
            k: {"DataType": "String", "StringValue": v} for k, v in notice.attributes.items()
        },
    }


def event_source(platform_name: str) -> str:
    """The EventBridge ``Source`` of a platform's events: ``ftl.<platform>``."""
    source = f"ftl.{platform_name}"
    if not _SOURCE_RE.fullmatch(source):
        raise NotificationError(f"not a valid EventBridge source: {source!r}")
    return source


def event_entry(notice: Notice, *, source: str, bus: str) -> dict[str, Any]:
    """One EventBridge ``PutEvents`` entry of ``notice`` on ``bus``. A detail over the entry
    limit loses its final metrics and step (marked ``truncated``) rather than the event."""
    detail = dict(notice.message)
    body = json.dumps(detail, sort_keys=True, default=str)
    overhead = len(source) + len(DETAIL_TYPES[notice.kind]) + 64
    if len(body.encode()) + overhead > MAX_DETAIL_BYTES:
        detail = {k: v for k, v in detail.items() if k not in ("final_metrics", "step", "metrics")}
        detail["truncated"] = True
        body = json.dumps(detail, sort_keys=True, default=str)
    if len(body.encode()) + overhead > MAX_DETAIL_BYTES:
        raise NotificationError(f"notification {notice.dedup_id} is over EventBridge's limit")
    return {
        "Source": source,
        "DetailType": DETAIL_TYPES[notice.kind],
        "Detail": body,
        "EventBusName": bus,
    }


# ------------------------------------------------------------------- budget marks
# The team usage item's list of thresholds sent (``<YYYY-MM>-<percent>``).
BUDGET_SENT = "budget_notices"


def budget_sent_update(table: str, team: str, month: str, percent: int) -> dict[str, Any]:
    """DynamoDB ``UpdateItem`` that lists ``percent`` as sent for ``month`` on ``team``'s
    usage item (refused when the item has moved on to another month)."""
    return {
        "TableName": table,
        "Key": {"pk": {"S": USAGE + team}},
        "UpdateExpression": "SET #b = list_append(if_not_exists(#b, :none), :sent)",
        "ConditionExpression": "#m = :m",
        "ExpressionAttributeNames": {"#b": BUDGET_SENT, "#m": "month"},
        "ExpressionAttributeValues": {
            ":m": {"S": month},
            ":none": {"L": []},
            ":sent": {"L": [{"S": f"{month}-{percent}"}]},
        },
    }
