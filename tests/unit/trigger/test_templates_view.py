"""``templates`` names each input channel's default data in the platform's data bucket, under
the caller's team prefix in a teams deployment (issue 18, point 6)."""

from __future__ import annotations

from tests.unit.trigger.test_teams import teams  # noqa: F401  (the teams launcher fixture)


def _train(answer):
    bert = next(t for t in answer["templates"] if t["name"] == "bert-large-qa")
    return next(c for c in bert["channels"] if c["name"] == "train")


def test_single_team_default_uri_is_in_the_data_bucket(launcher):
    assert _train(launcher({"action": "templates"})) == {
        "name": "train",
        "required": True,
        "default_prefix": "squad/train/",
        "default_s3_uri": "s3://ftl-data/squad/train/",
    }


def test_a_teams_default_uri_is_under_its_prefix(teams):  # noqa: F811
    answer = teams({"action": "templates"}, alias="team-alpha")
    assert _train(answer)["default_s3_uri"] == "s3://ftl-data/alpha/squad/train/"
