"""The team model: context parsing names the bad key; principals match exactly as documented."""

from __future__ import annotations

import pytest

from jobmodel.teams import TeamsConfig, TeamsError, principal_matches

ACCOUNT = "123456789012"
ROLE_A = f"arn:aws:iam::{ACCOUNT}:role/ds-a"


def _team(**overrides):
    team = {"name": "team-a", "principals": [ROLE_A]}
    team.update(overrides)
    return team


def test_round_trip_through_the_environment():
    config = TeamsConfig.parse(
        [
            _team(limits={"max_instances": 4, "monthly_budget_usd": 1000}),
            {"name": "team-b", "principals": [f"arn:aws:iam::{ACCOUNT}:role/b-*"], "weight": 2},
        ],
        [f"arn:aws:iam::{ACCOUNT}:role/admin"],
    )
    assert TeamsConfig.from_env(config.to_env()) == config
    assert config.get("team-b").weight == 2.0
    assert config.get("team-a").limits.max_instances == 4


def test_a_role_matches_its_assumed_role_sessions_and_nothing_else():
    assert principal_matches(ROLE_A, f"arn:aws:sts::{ACCOUNT}:assumed-role/ds-a/alice")
    assert principal_matches(ROLE_A, ROLE_A)
    assert not principal_matches(ROLE_A, f"arn:aws:sts::{ACCOUNT}:assumed-role/ds-ab/alice")
    assert not principal_matches(ROLE_A, "arn:aws:sts::999999999999:assumed-role/ds-a/alice")
    pattern = f"arn:aws:sts::{ACCOUNT}:assumed-role/ds-*/*"
    assert principal_matches(pattern, f"arn:aws:sts::{ACCOUNT}:assumed-role/ds-x/bob")
    assert not principal_matches(pattern, f"arn:aws:iam::{ACCOUNT}:role/ds-x")


def test_no_teams_is_a_single_team_deployment():
    config = TeamsConfig.parse(None, None)
    assert not config.enabled
    assert config.matching(ROLE_A) == ()


@pytest.mark.parametrize(
    ("teams", "admins", "key"),
    [
        ({"name": "x"}, None, "ftl:teams"),
        ([_team(name="Team-A")], None, "ftl:teams[0].name"),
        ([_team(principals=[])], None, "ftl:teams[0].principals"),
        ([_team(principals=["*"])], None, "ftl:teams[0].principals[0]"),
        ([_team(principals=["arn:aws:iam::*"])], None, "ftl:teams[0].principals[0]"),
        ([_team(limits={"max_gpus": 1})], None, "ftl:teams[0].limits.max_gpus"),
        ([_team(limits={"max_instances": 0})], None, "ftl:teams[0].limits.max_instances"),
        (
            [_team(limits={"monthly_budget_usd": -5})],
            None,
            "ftl:teams[0].limits.monthly_budget_usd",
        ),
        ([_team(weight=True)], None, "ftl:teams[0].weight"),
        ([_team(buckets=["Bad_Bucket"])], None, "ftl:teams[0].buckets"),
        ([_team(colour="red")], None, "ftl:teams[0].colour"),
        ([_team(), _team()], None, "ftl:teams[1].name"),
        ([], [ROLE_A], "ftl:admins"),
        ([_team()], ["nope"], "ftl:admins[0]"),
    ],
)
def test_bad_team_config_names_the_key(teams, admins, key):
    with pytest.raises(TeamsError) as info:
        TeamsConfig.parse(teams, admins)
    assert info.value.key == key
    assert key in str(info.value)


def test_bad_team_context_fails_settings_naming_the_key():
    from ftl_constructs.settings import ContextError, PlatformSettings

    with pytest.raises(ContextError) as info:
        PlatformSettings.from_mapping({"teams": [_team(name="A")]})
    assert info.value.key == "ftl:teams[0].name"
    assert "'ftl:teams[0].name'" in str(info.value)
    settings = PlatformSettings.from_mapping({"teams": [_team()], "admins": [ROLE_A]})
    assert settings.teams.get("team-a").principals == (ROLE_A,)


@pytest.mark.parametrize(
    ("names", "key", "other_key"),
    [
        # team-a's jobs team-a-b-... would land in team-a-b's name space and IAM patterns
        (["team-a", "team-a-b"], "ftl:teams[1].name", "ftl:teams[0].name"),
        (["team-a-b", "team-a"], "ftl:teams[0].name", "ftl:teams[1].name"),
        # the same stack output / construct id (TeamTeamab...) once the dashes go
        (["team-ab", "team-a-b"], "ftl:teams[1].name", "ftl:teams[0].name"),
    ],
)
def test_overlapping_team_name_spaces_are_refused_naming_both_keys(names, key, other_key):
    with pytest.raises(TeamsError) as info:
        TeamsConfig.parse([_team(name=n) for n in names])
    assert info.value.key == key
    assert other_key in str(info.value)


def test_overlapping_team_names_fail_synth_naming_the_keys():
    from ftl_constructs.settings import ContextError
    from tests.infra.synth import synth

    teams = [_team(name="team-ab"), _team(name="team-a-b")]
    with pytest.raises(ContextError) as info:
        synth(**{"ftl:teams": teams})
    assert "ftl:teams[1].name" in str(info.value) and "ftl:teams[0].name" in str(info.value)


def test_teams_whose_names_only_share_a_start_are_fine():
    config = TeamsConfig.parse([_team(name="team-a"), _team(name="team-ab")])
    assert [t.name for t in config.teams] == ["team-a", "team-ab"]


# ------------------------------------------------------------------ Batch shares (issue 26)
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from jobmodel.capacity.scheduler import share_of  # noqa: E402
from jobmodel.teams import TEAM_NAME_RE  # noqa: E402

team_names = st.from_regex(TEAM_NAME_RE, fullmatch=True)


@given(team_names, team_names)
def test_every_team_has_its_own_alphanumeric_fair_share_identifier(a, b):
    """Batch: a shareIdentifier is at most 255 alphanumeric characters (ShareAttributes);
    the mapping is one-to-one, so team-a and teama stay two shares."""
    share = share_of(a)
    assert share.isascii() and share.isalnum() and len(share) <= 255
    assert (share_of(a) == share_of(b)) == (a == b)


def test_the_share_mapping_as_documented():
    assert share_of("team-a") == "teamXa" and share_of("teama") == "teama"
    assert share_of(None) == "default"
    # Quota share names may hold '-' (Batch's CreateQuotaShare): the team's name as it is.
    assert share_of("team-a", "quotashare") == "team-a"
