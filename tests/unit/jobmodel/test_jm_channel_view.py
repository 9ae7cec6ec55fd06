"""A template's view says which input channels are required and where their default data
is (issue 18, point 6: before, only a dry run revealed where to upload data)."""

from __future__ import annotations

import jobmodel as jm


def test_channels_name_required_and_default_uri(shipped: dict[str, jm.TemplateSpec]) -> None:
    view = shipped["bert-large-qa"].public_view(data_bucket="data-b")
    assert view["channels"] == [
        {
            "name": "train",
            "required": True,
            "default_prefix": "squad/train/",
            "default_s3_uri": "s3://data-b/squad/train/",
        },
        {
            "name": "validation",
            "required": False,
            "default_prefix": "squad/validation/",
            "default_s3_uri": "s3://data-b/squad/validation/",
        },
    ]


def test_a_teams_default_uri_is_under_its_prefix(shipped: dict[str, jm.TemplateSpec]) -> None:
    view = shipped["bert-large-qa"].public_view(data_bucket="data-b", team="nlp")
    assert view["channels"][0]["default_s3_uri"] == "s3://data-b/nlp/squad/train/"


def test_without_a_bucket_only_the_prefix_is_known(shipped: dict[str, jm.TemplateSpec]) -> None:
    (model,) = [c for c in shipped["llm-sft"].public_view()["channels"] if c["name"] == "model"]
    assert model["required"] is True and model["default_s3_uri"] is None
