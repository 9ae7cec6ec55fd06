"""Error objects: the contract's shape."""

from __future__ import annotations

import jobmodel as jm


def test_validation_error_to_dict_has_field() -> None:
    err = jm.ValidationError("instance_count", "instance_count must be between 1 and 16, got 40")
    assert err.to_dict() == {
        "error": {
            "type": "ValidationError",
            "message": "instance_count must be between 1 and 16, got 40",
            "field": "instance_count",
        }
    }
    assert isinstance(err, jm.JobModelError)
    assert str(err) == err.message


def test_not_found_omits_missing_field() -> None:
    err = jm.NotFound("no such job")
    assert err.type == "NotFound"
    assert err.field is None
    assert err.to_dict() == {"error": {"type": "NotFound", "message": "no such job"}}
    assert jm.NotFound("x", field="template").to_dict()["error"]["field"] == "template"


def test_template_error_names_template_and_rule() -> None:
    err = jm.TemplateError("bert-large-qa", "smddp-instance", "ml.g5.xlarge lacks smddp")
    assert (err.template, err.rule) == ("bert-large-qa", "smddp-instance")
    assert "bert-large-qa" in str(err)
    assert "smddp-instance" in str(err)
    assert not isinstance(err, jm.JobModelError)
