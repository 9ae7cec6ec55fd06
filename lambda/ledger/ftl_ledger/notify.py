"""Sending notifications (``jobmodel.jobs.notifications``): the team's SNS topic and EventBridge.

Both functions build one :class:`Notifier` from their environment. Its performers do the
effects a job record owes (``ftl_ledger.effects.EndEffects``): the end announcement on the
platform's topic and the team's, and the job notices (started, a capacity chain's next step)
on the team's; each also as one EventBridge event. :class:`BudgetWatch` is the one writer's
hook after a write that changed a team's month spend: each budget threshold the spend has
reached and the team's usage item does not list is sent, then listed. A failure raises
before anything is recorded done, so the next holder sends it again with the same
deduplication id (at least once).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ftl_ledger.effects import NOTICE, Performer
from ftl_ledger.job_codec import from_record
from ftl_ledger.ledger import Ledger
from jobmodel.jobs import effects as E
from jobmodel.jobs import notifications as N
from jobmodel.teams import TeamsConfig

__all__ = ["BudgetWatch", "NotificationFailed", "Notifier", "NotifySettings"]

LOG = logging.getLogger("ftl.ledger")


class NotificationFailed(RuntimeError):
    """EventBridge did not take the event (``FailedEntryCount``)."""


@dataclass(frozen=True)
class NotifySettings:
    """Where notifications go beyond the platform's topic: ``team_topics`` (team -> its
    topic's ARN), ``bus`` (the event bus; empty: no events), the events' ``source``, the
    region (console links) and the teams' monthly budgets."""

    team_topics: Mapping[str, str] = field(default_factory=dict)
    bus: str = ""
    source: str = "ftl.ftl"
    region: str = "us-east-1"
    budgets: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, platform: str, region: str) -> NotifySettings:
        """From ``FTL_TEAM_TOPICS``, ``FTL_EVENT_BUS`` and the teams (``FTL_TEAMS``)."""
        raw = env.get(N.ENV_TEAM_TOPICS) or "{}"
        try:
            topics = json.loads(raw)
        except ValueError:
            topics = None
        if not isinstance(topics, dict) or not all(isinstance(v, str) for v in topics.values()):
            raise ValueError(f"{N.ENV_TEAM_TOPICS} must be a JSON object of topic ARNs: {raw}")
        teams = TeamsConfig.from_env(env)
        return cls(
            team_topics=topics,
            bus=env.get(N.ENV_EVENT_BUS, ""),
            source=N.event_source(platform),
            region=region,
            budgets={
                t.name: float(t.limits.monthly_budget_usd)
                for t in teams.teams
                if t.limits.monthly_budget_usd
            },
        )


@dataclass
class Notifier:
    """Sends notifications: ``sns`` and ``events`` (None: none put on EventBridge) are the
    clients, ``platform_topic`` the platform's topic (every job's end, and every notification
    of a platform without teams)."""

    sns: Any
    events: Any = None
    platform_topic: str = ""
    settings: NotifySettings = field(default_factory=NotifySettings)

    @property
    def budgets(self) -> Mapping[str, float]:
        return self.settings.budgets

    def topics_for(self, team: Any, *, ended: bool = False) -> list[str]:
        """The topics a notification of ``team`` goes to: the team's (the platform's without
        one); a job's end also the platform's, as before teams had topics."""
        own = self.settings.team_topics.get(str(team)) if team else None
        topics = [own or self.platform_topic]
        if ended and self.platform_topic and self.platform_topic not in topics:
            topics.insert(0, self.platform_topic)
        return [t for t in topics if t]

    def send(self, notice: N.Notice, topics: list[str]) -> None:
        """Publish ``notice`` on ``topics`` and put it on the event bus; raises on a failure."""
        for topic in topics:
            self.sns.publish(TopicArn=topic, **N.sns_publish(notice))
        if self.events is not None and self.settings.bus:
            entry = N.event_entry(notice, source=self.settings.source, bus=self.settings.bus)
            answer = self.events.put_events(Entries=[entry])
            if answer.get("FailedEntryCount"):
                failed = (answer.get("Entries") or [{}])[0]
                raise NotificationFailed(
                    f"EventBridge refused {notice.dedup_id}: {failed.get('ErrorCode')} "
                    f"{failed.get('ErrorMessage')}"
                )

    def performers(self) -> dict[str, Performer]:
        """The performers of what a job record owes (``EndEffects``)."""
        return {E.ANNOUNCE: self.announce_end, NOTICE: self.notify_job}

    def announce_end(self, record: Mapping[str, Any], dedup: str) -> None:
        job = from_record(record)
        notice = N.job_notice(N.ENDED, job, dedup, region=self.settings.region)
        self.send(notice, self.topics_for(job.team, ended=True))

    def notify_job(self, record: Mapping[str, Any], dedup: str) -> None:
        job = from_record(record)
        kind = N.notice_kind(dedup.rsplit("/", 1)[-1])
        notice = N.job_notice(kind, job, dedup, region=self.settings.region)
        self.send(notice, self.topics_for(job.team))


class BudgetWatch:
    """The writer's hook (``JobWriter.on_spend``): send the budget thresholds ``team``'s month
    spend has reached that its usage item does not list as sent, then list each."""

    def __init__(
        self, notifier: Callable[[], Notifier], ledger: Ledger, month: Callable[[], str]
    ) -> None:
        self.notifier = notifier  # the runtime's, when called (tests replace its clients)
        self.ledger = ledger
        self.month = month

    def __call__(self, team: str) -> list[str]:
        """The dedup ids sent now (raises on the first failure; the rest stay due)."""
        notifier = self.notifier()
        budget = notifier.budgets.get(team)
        if not budget:
            return []
        month = self.month()
        item = self.ledger.get_usage(team) or {}
        if item.get("month") != month:
            return []
        spend = float(item.get("spend") or 0)
        sent: list[str] = []
        for percent in N.thresholds_due(spend, budget, month, item.get(N.BUDGET_SENT) or []):
            notice = N.budget_notice(team, month, percent, spend_usd=spend, budget_usd=budget)
            notifier.send(notice, notifier.topics_for(team))
            self.ledger.update_if(N.budget_sent_update(self.ledger.table, team, month, percent))
            LOG.info("team %s: budget notice %s sent", team, notice.dedup_id)
            sent.append(notice.dedup_id)
        return sent
