"""Validation of list, describe and stop (jobmodel.requests.queries)."""

from __future__ import annotations

import pytest

from jobmodel import NotFound, ValidationError
from jobmodel.requests.queries import validate_job_action, validate_list
from jobmodel.teams import TeamsConfig


def _list(params, **kw):
    args = {"catalog": {"bert-large-qa"}, "teams": TeamsConfig(), "own_team": None, "admin": False}
    return validate_list(params, **{**args, **kw})


def test_list_defaults_and_own_team():
    query = _list({}, own_team="team-a")
    assert (query.team, query.limit, query.template, query.next_token) == ("team-a", 50, None, None)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"status": "Done"}, "status"),
        ({"template": 3}, "template"),
        ({"next_token": "x" * 3000}, "next_token"),
        ({"team": "team-a"}, "team"),  # only admins may name a team
        ({"colour": "red"}, "colour"),
    ],
)
def test_list_refuses(params, field):
    with pytest.raises(ValidationError) as err:
        _list(params)
    assert err.value.field == field


def test_list_unknown_template_is_not_found():
    with pytest.raises(NotFound):
        _list({"template": "nope"})


def test_job_actions_take_only_a_valid_job_name():
    assert validate_job_action({"job_name": "job-1"}) == "job-1"
    with pytest.raises(ValidationError) as err:
        validate_job_action({"job_name": "-bad"})
    assert err.value.field == "job_name"
    with pytest.raises(ValidationError) as err:
        validate_job_action({"job_name": "a", "extra": 1})
    assert err.value.field == "extra"
