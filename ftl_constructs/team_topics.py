"""Notifications: one KMS-encrypted SNS topic per team, and the platform's events on EventBridge.

Both functions send what ``jobmodel.jobs.notifications`` builds (``ftl_ledger.notify``): a job
started, ended, moved to its capacity chain's next step, and a team's monthly budget reached
80% and 100%. Without teams the platform's own topic (``JobEvents.topic``) carries them all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from jobmodel.jobs.notifications import ENV_EVENT_BUS, ENV_TEAM_TOPICS, event_source
from jobmodel.teams import TeamsConfig

__all__ = ["EVENT_BUS", "TeamTopics", "principal_arn_patterns"]

# Notifications go to the account's default event bus: rules there route them anywhere
# (another account's bus, an API destination for chat) with no bus of the platform's own.
EVENT_BUS = "default"
_STS_SESSION = re.compile(r"arn:(aws[a-z-]*):sts::([0-9*]+):assumed-role/([^/]+)/.*")


def principal_arn_patterns(patterns: Sequence[str]) -> list[str]:
    """``aws:PrincipalArn`` patterns matching ``patterns`` (``jobmodel.teams``): a session
    pattern of a role stands for the role, since ``aws:PrincipalArn`` names the role."""
    out: list[str] = []
    for pattern in patterns:
        session = _STS_SESSION.fullmatch(pattern)
        if session:
            part, account, role = session.groups()
            out += [
                f"arn:{part}:iam::{account}:role/{role}",
                f"arn:{part}:iam::{account}:role/*/{role}",
            ]
        else:
            out.append(pattern)
    return list(dict.fromkeys(out))


class TeamTopics(Construct):
    """One encrypted topic per team (under the platform key), the notifying functions' rights
    to publish on them and to put the platform's events on the event bus, and the environment
    that tells the functions where notifications go.

    A team's topic may be subscribed to only by its own principals (and the admins): its
    policy denies ``sns:Subscribe`` to every other principal, and publishing and subscribing
    without TLS.
    The team's managed policy grants the subscription (``TeamAccess.grant_topics``).

    Attributes:
        topics: team name -> its topic.
        event_bus_arn: the bus the platform's events go to.
        source: the events' ``Source`` (``ftl.<platform>``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        platform_name: str,
        teams: TeamsConfig,
        encryption_key: kms.IKey,
        publishers: Sequence[tuple[lambda_.Function, iam.Policy]],
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.source = event_source(platform_name)
        self.event_bus_arn = stack.format_arn(
            service="events", resource="event-bus", resource_name=EVENT_BUS
        )
        self.topics: dict[str, sns.Topic] = {}
        for team in teams.teams:
            topic = sns.Topic(
                self,
                f"Topic-{team.name}",
                display_name=f"Fine-tuning jobs of team {team.name}",
                master_key=encryption_key,
                enforce_ssl=True,
            )
            allowed = principal_arn_patterns([*team.principals, *teams.admins])
            topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="OnlyTheTeamSubscribes",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["sns:Subscribe"],
                    resources=[topic.topic_arn],
                    conditions={"StringNotLike": {"aws:PrincipalArn": allowed}},
                )
            )
            # enforce_ssl denies Publish without TLS; subscriptions are refused the same way.
            topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="SubscribeOverTlsOnly",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["sns:Subscribe", "sns:ListSubscriptionsByTopic"],
                    resources=[topic.topic_arn],
                    conditions={"Bool": {"aws:SecureTransport": "false"}},
                )
            )
            self.topics[team.name] = topic
        for function, policy in publishers:
            self._grant(function, policy)

    def _grant(self, function: lambda_.Function, policy: iam.Policy) -> None:
        """``function`` publishes on every team topic and puts the platform's events (only
        with its source) on the bus; the platform key's use is granted with the function."""
        if self.topics:
            policy.add_statements(
                iam.PolicyStatement(
                    sid="NotifyTeams",
                    actions=["sns:Publish"],
                    resources=[t.topic_arn for t in self.topics.values()],
                )
            )
            topics = {name: t.topic_arn for name, t in sorted(self.topics.items())}
            function.add_environment(ENV_TEAM_TOPICS, Stack.of(self).to_json_string(topics))
        policy.add_statements(
            iam.PolicyStatement(
                sid="PutPlatformEvents",
                actions=["events:PutEvents"],
                resources=[self.event_bus_arn],
                conditions={"StringEquals": {"events:source": self.source}},
            )
        )
        function.add_environment(ENV_EVENT_BUS, EVENT_BUS)
