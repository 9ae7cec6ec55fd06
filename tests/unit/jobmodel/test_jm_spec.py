"""Template types: serialisation, immutability, the contract's public view
(jobmodel.templates.spec)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import jobmodel as jm
from tests.expected import SHIPPED_TEMPLATES


@pytest.mark.parametrize("name", SHIPPED_TEMPLATES)
def test_round_trip(shipped: dict[str, jm.TemplateSpec], name: str) -> None:
    spec = shipped[name]
    data = spec.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON
    again = jm.TemplateSpec.from_dict(json.loads(json.dumps(data)))
    assert again == spec
    assert again.to_dict() == data
    assert hash(again) == hash(spec)


def test_specs_are_immutable(shipped: dict[str, jm.TemplateSpec]) -> None:
    spec = shipped["bert-large-qa"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.hyperparameters["task"] = "mlm"  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.overridable["x"] = jm.HyperparameterRule("int")  # type: ignore[index]
    assert isinstance(spec.instance_types, tuple) and isinstance(spec.inputs, tuple)


def test_plain_dicts_are_frozen_on_construction() -> None:
    hp = {"task": "qa"}
    spec = jm.TemplateSpec(
        name="t",
        description="d",
        instance_types=["ml.g5.xlarge"],  # type: ignore[arg-type]
        default_instance_type="ml.g5.xlarge",
        hyperparameters=hp,
        overridable={"seed": {"type": "int", "min": 0, "max": 10}},  # type: ignore[dict-item]
        inputs=[{"name": "train", "default_prefix": "x/"}],  # type: ignore[list-item]
        distribution={"kind": "none"},  # type: ignore[arg-type]
    )
    hp["task"] = "mlm"
    assert spec.hyperparameters["task"] == "qa"
    assert spec.overridable["seed"] == jm.HyperparameterRule("int", 0, 10)
    assert spec.inputs == (jm.InputChannel("train", default_prefix="x/"),)
    assert spec.distribution == jm.Distribution("none")
    jm.validate_template(spec, require_image=False)


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda d: d.update(surprise=1), "unknown-key"),
        (lambda d: d.pop("instance_types"), "missing-key"),
        (lambda d: d["distribution"].update(nodes=2), "unknown-key"),
        (lambda d: d["inputs"][0].update(mode="Pipe"), "unknown-key"),
        (lambda d: d["overridable"]["seed"].update(step=2), "unknown-key"),
        (lambda d: d["overridable"]["seed"].pop("type"), "missing-key"),
        (lambda d: d.update(distribution="smddp"), "type"),
        (lambda d: d.update(inputs="train"), "type"),
        (lambda d: d.update(overridable=[]), "type"),
    ],
)
def test_from_dict_rejects_bad_shapes(
    shipped: dict[str, jm.TemplateSpec], mutate: Any, rule: str
) -> None:
    data = shipped["bert-large-qa"].to_dict()
    mutate(data)
    with pytest.raises(jm.TemplateError) as info:
        jm.TemplateSpec.from_dict(data)
    assert info.value.rule == rule


def test_from_dict_rejects_non_mapping() -> None:
    with pytest.raises(jm.TemplateError):
        jm.TemplateSpec.from_dict(["not", "a", "dict"])  # type: ignore[arg-type]


def test_public_view_is_the_contracts_templates_entry(shipped: dict[str, jm.TemplateSpec]) -> None:
    view = shipped["bert-large-qa"].public_view()
    assert set(view) == {
        "name",
        "description",
        "distribution",
        "instance_types",
        "default_instance_type",
        "default_instance_count",
        "max_instance_count",
        "spot",
        "max_runtime_seconds",
        "inputs",
        "channels",
        "hyperparameters",
        "queue_priority",
        "queue_priority_range",
        "capacity_chain",
        "instance_preferences",
        "infra_check",
    }
    assert view["distribution"] == "smddp"
    # a multi-node template: the infrastructure health check is on by default
    assert view["infra_check"] is True and view["capacity_chain"] == []
    assert view["queue_priority"] == 50 and view["queue_priority_range"] == [0, 100]
    assert view["inputs"] == ["train", "validation"]
    assert view["hyperparameters"]["defaults"]["max_seq_length"] == 384
    assert view["hyperparameters"]["overridable"]["learning_rate"] == {
        "type": "float",
        "min": 1e-6,
        "max": 1e-3,
    }
    assert view["hyperparameters"]["overridable"]["num_train_epochs"] == {
        "type": "int",
        "min": 1,
        "max": 10,
    }
    json.dumps(view)
    for spec in shipped.values():
        for entry in spec.public_view()["hyperparameters"]["overridable"].values():
            assert entry["type"] in {"int", "float", "bool", "str"}
            assert ("choices" in entry) != ("min" in entry or "max" in entry) or entry[
                "type"
            ] == "bool"
