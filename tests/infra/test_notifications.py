"""Notifications (issue 27): a KMS-encrypted topic per team that only the team may subscribe
to, the team's grant to subscribe, the functions' rights to publish and to put the platform's
events on the default bus (with its source only), the outputs and the environment."""

from __future__ import annotations

import json

import pytest

from ftl_constructs.team_topics import principal_arn_patterns
from tests.infra.synth import TEAMS_CONTEXT, template

TEAMS = ("team-a", "team-b")


@pytest.fixture(scope="module")
def launcher():
    return template("launcher", **TEAMS_CONTEXT)


@pytest.fixture(scope="module")
def single():
    return template("launcher")


def _topics(t):
    return {
        props["Properties"]["DisplayName"].rsplit(" ", 1)[-1]: (lid, props["Properties"])
        for lid, props in t.find_resources("AWS::SNS::Topic").items()
        if props["Properties"]["DisplayName"].startswith("Fine-tuning jobs of team")
    }


def _statements(t, action):
    out = []
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for lid, res in t.find_resources(kind).items():
            for s in res["Properties"]["PolicyDocument"]["Statement"]:
                acts = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
                if action in acts:
                    out.append((lid, s))
    return out


def test_one_encrypted_topic_per_team_under_the_platform_key(launcher):
    topics = _topics(launcher)
    assert sorted(topics) == list(TEAMS)
    platform_key = launcher.find_resources("AWS::SNS::Topic")
    keys = {json.dumps(p["Properties"]["KmsMasterKeyId"]) for p in platform_key.values()}
    assert len(keys) == 1  # the team topics and the platform's: one key (the platform's)


@pytest.mark.parametrize("team", TEAMS)
def test_only_the_team_and_the_admins_may_subscribe_and_only_over_tls(launcher, team):
    lid, _ = _topics(launcher)[team]
    (policy,) = launcher.find_resources(
        "AWS::SNS::TopicPolicy", {"Properties": {"Topics": [{"Ref": lid}]}}
    ).values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (deny,) = [s for s in statements if s.get("Sid") == "OnlyTheTeamSubscribes"]
    assert deny["Effect"] == "Deny" and deny["Action"] == "sns:Subscribe"
    principals = next(t for t in TEAMS_CONTEXT["ftl:teams"] if t["name"] == team)["principals"]
    allowed = deny["Condition"]["StringNotLike"]["aws:PrincipalArn"]
    allowed = allowed if isinstance(allowed, list) else [allowed]
    assert sorted(allowed) == sorted([*principals, *TEAMS_CONTEXT["ftl:admins"]])
    tls = [s for s in statements if s.get("Condition", {}).get("Bool")]
    assert tls and all(s["Effect"] == "Deny" for s in tls)
    assert all(s["Condition"]["Bool"] == {"aws:SecureTransport": "false"} for s in tls)
    actions = {
        a for s in tls for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    assert {"sns:Publish", "sns:Subscribe"} <= actions


@pytest.mark.parametrize("team", TEAMS)
def test_a_teams_policy_subscribes_to_its_own_topic_only(launcher, team):
    lid, _ = _topics(launcher)[team]
    grants = [
        (pid, s)
        for pid, s in _statements(launcher, "sns:Subscribe")
        if s.get("Sid") == "SubscribeOwnTopic"
    ]
    mine = [(pid, s) for pid, s in grants if s["Resource"] == {"Ref": lid}]
    assert len(grants) == 2 and len(mine) == 1
    (pid, statement) = mine[0]
    assert sorted(statement["Action"]) == ["sns:ListSubscriptionsByTopic", "sns:Subscribe"]
    policy = launcher.find_resources("AWS::IAM::ManagedPolicy")[pid]
    assert f"team-{team}" in policy["Properties"]["Description"]


def test_the_admins_subscribe_to_every_team_topic(launcher):
    (statement,) = [
        s for _, s in _statements(launcher, "sns:Subscribe") if s["Sid"] == "SubscribeTeamTopics"
    ]
    refs = sorted(r["Ref"] for r in statement["Resource"])
    assert refs == sorted(lid for lid, _ in _topics(launcher).values())


def test_both_functions_publish_to_the_team_topics_and_put_events_with_their_source(launcher):
    publishers = [
        s for _, s in _statements(launcher, "sns:Publish") if s.get("Sid") == "NotifyTeams"
    ]
    assert len(publishers) == 2
    puts = [s for _, s in _statements(launcher, "events:PutEvents")]
    assert len(puts) == 2
    for s in puts:
        assert s["Condition"] == {"StringEquals": {"events:source": "ftl.ftl"}}
        assert ":event-bus/default" in json.dumps(s["Resource"])


def test_the_functions_know_the_team_topics_and_the_bus(launcher):
    functions = launcher.find_resources(
        "AWS::Lambda::Function",
        {"Properties": {"Environment": {"Variables": {"FTL_EVENT_BUS": "default"}}}},
    )
    assert len(functions) == 2
    for f in functions.values():
        assert "FTL_TEAM_TOPICS" in f["Properties"]["Environment"]["Variables"]


def test_team_topic_outputs(launcher):
    outputs = launcher.find_outputs("*")
    assert {"TeamTeamaTopicArn", "TeamTeambTopicArn"} <= set(outputs)


def test_a_single_team_platform_notifies_on_its_own_topic(single):
    assert _topics(single) == {}
    functions = single.find_resources(
        "AWS::Lambda::Function",
        {"Properties": {"Environment": {"Variables": {"FTL_EVENT_BUS": "default"}}}},
    )
    assert len(functions) == 2
    for f in functions.values():
        assert "FTL_TEAM_TOPICS" not in f["Properties"]["Environment"]["Variables"]
    assert not [
        o for o in single.find_outputs("*") if o.endswith("TopicArn") and o != "JobEventsTopicArn"
    ]


def test_session_patterns_stand_for_their_role():
    got = principal_arn_patterns(
        ["arn:aws:sts::123456789012:assumed-role/Sci/*", "arn:aws:iam::123456789012:role/x-*"]
    )
    assert got == [
        "arn:aws:iam::123456789012:role/Sci",
        "arn:aws:iam::123456789012:role/*/Sci",
        "arn:aws:iam::123456789012:role/x-*",
    ]
