"""validate_submit: defaults, every rule with a bad input, fingerprints."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jobmodel as jm
from jobmodel.requests import submit_docs

DATA = "ftl-data-123456789012"
API_MD = Path(__file__).resolve().parents[3] / "docs" / "API.md"


# -- happy paths --------------------------------------------------------------------------


def test_minimal_request_takes_the_templates_defaults(
    submit: Callable[..., jm.SubmitRequest],
) -> None:
    req = submit("bert-large-qa")
    assert req.template == "bert-large-qa"
    assert req.job_name_prefix == "bert-large-qa"
    assert dict(req.hyperparameters) == {}
    assert (req.instance_type, req.instance_count) == ("ml.p4d.24xlarge", 2)
    assert req.spot is True
    assert req.max_runtime_seconds == 86_400
    assert req.max_wait_seconds == 864_000
    assert dict(req.inputs) == {
        "train": f"s3://{DATA}/squad/train/",
        "validation": f"s3://{DATA}/squad/validation/",
    }
    assert dict(req.tags) == {}
    assert req.client_token is None


def test_the_contracts_example(submit: Callable[..., jm.SubmitRequest]) -> None:
    req = submit(
        action="submit",
        job_name="squad-lr3e5",
        hyperparameters={"learning_rate": 3e-5, "num_train_epochs": 2},
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        spot=True,
        max_runtime_seconds=36000,
        max_wait_seconds=72000,
        inputs={
            "train": f"s3://{DATA}/squad/train/",
            "validation": f"s3://{DATA}/squad/validation/",
        },
        tags={"team": "nlp", "cost-center": "1234"},
        client_token="7f0c2c1e-squad-run-3",
    )
    assert req.job_name_prefix == "squad-lr3e5"
    assert dict(req.hyperparameters) == {"learning_rate": 3e-5, "num_train_epochs": 2}
    assert (req.max_runtime_seconds, req.max_wait_seconds) == (36000, 72000)
    assert dict(req.tags) == {"team": "nlp", "cost-center": "1234"}
    assert req.client_token == "7f0c2c1e-squad-run-3"


def test_null_means_default(submit: Callable[..., jm.SubmitRequest]) -> None:
    fields = ("job_name", "hyperparameters", "instance_type", "instance_count", "spot")
    nulls = dict.fromkeys(fields + ("max_runtime_seconds", "inputs", "tags", "client_token"))
    assert submit(**nulls) == submit()


def test_on_demand_has_no_max_wait(submit: Callable[..., jm.SubmitRequest]) -> None:
    assert submit(spot=False).max_wait_seconds is None


def test_default_max_wait_never_below_runtime(submit: Callable[..., jm.SubmitRequest]) -> None:
    req = submit("distilbert-spot", max_runtime_seconds=86_400)
    assert req.max_wait_seconds is not None and req.max_wait_seconds >= req.max_runtime_seconds
    assert submit("distilbert-spot", max_runtime_seconds=86_400, max_wait_seconds=86_400)


def test_job_name_is_sanitised(submit: Callable[..., jm.SubmitRequest]) -> None:
    assert submit(job_name="  my run: lr=3e-5! ").job_name_prefix == "my-run-lr-3e-5"
    assert submit(job_name="a--b").job_name_prefix == "a--b"


def test_inputs_from_an_allowed_bucket_and_partial_override(
    submit: Callable[..., jm.SubmitRequest],
) -> None:
    req = submit(inputs={"train": "s3://shared-datasets/squad-v2/train/"})
    assert dict(req.inputs) == {
        "train": "s3://shared-datasets/squad-v2/train/",
        "validation": f"s3://{DATA}/squad/validation/",
    }
    assert list(req.inputs) == ["train", "validation"]


def test_choices_and_bool_and_str_overrides(submit: Callable[..., jm.SubmitRequest]) -> None:
    assert submit("roberta-large-mnli-mp", hyperparameters={"per_device_train_batch_size": 8})
    req = submit("distilbert-spot", hyperparameters={"model_name_or_path": "distilbert-base-cased"})
    assert req.hyperparameters["model_name_or_path"] == "distilbert-base-cased"


def test_unicode_tags_are_allowed(submit: Callable[..., jm.SubmitRequest]) -> None:
    req = submit(tags={"équipe": "données ünd 数据", "path": "a/b:c=d+e-f@g_h.i"})
    assert req.tags["équipe"] == "données ünd 数据"


def test_float_rule_accepts_integers_and_stores_floats(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    spec = catalog["albert-mlm-pretrain"]
    rules = dict(spec.overridable)
    rules["warmup_ratio"] = jm.HyperparameterRule("float", 0, 1)
    custom = {"albert-mlm-pretrain": dataclasses.replace(spec, overridable=rules)}
    req = jm.validate_submit(
        {"template": "albert-mlm-pretrain", "hyperparameters": {"warmup_ratio": 1}},
        custom,
        platform,
    )
    assert req.hyperparameters["warmup_ratio"] == 1.0
    assert type(req.hyperparameters["warmup_ratio"]) is float


def test_request_is_frozen(submit: Callable[..., jm.SubmitRequest]) -> None:
    req = submit(tags={"team": "nlp"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.spot = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        req.tags["x"] = "y"  # type: ignore[index]


def test_validate_submit_does_not_touch_the_payload(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    payload = {"template": "bert-large-qa", "hyperparameters": {"seed": 1}, "tags": {"a": "b"}}
    before = repr(payload)
    jm.validate_submit(payload, catalog, platform)
    assert repr(payload) == before


# -- fingerprint --------------------------------------------------------------------------


def test_fingerprint_ignores_token_and_explicit_defaults(
    submit: Callable[..., jm.SubmitRequest],
) -> None:
    a = submit(client_token="one")
    b = submit(
        client_token="two",
        action="submit",
        job_name="bert-large-qa",
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        spot=True,
        max_runtime_seconds=86_400,
        max_wait_seconds=864_000,
        inputs={"train": f"s3://{DATA}/squad/train/"},
        tags={},
        hyperparameters={},
    )
    assert a.fingerprint() == b.fingerprint()
    assert len(a.fingerprint()) == 64
    assert a.fingerprint() == a.fingerprint()


@pytest.mark.parametrize(
    "change",
    [
        {"job_name": "other"},
        {"instance_count": 3},
        {"spot": False},
        {"max_runtime_seconds": 3600},
        {"hyperparameters": {"seed": 7}},
        {"tags": {"team": "nlp"}},
        {"inputs": {"train": "s3://shared-datasets/x/"}},
        {"instance_type": "ml.p4de.24xlarge"},
    ],
)
def test_fingerprint_changes_with_the_request(
    submit: Callable[..., jm.SubmitRequest], change: dict[str, Any]
) -> None:
    assert submit(**change).fingerprint() != submit().fingerprint()


def test_fingerprint_is_key_order_independent(submit: Callable[..., jm.SubmitRequest]) -> None:
    a = submit(tags={"a": "1", "b": "2"}, hyperparameters={"seed": 1, "max_steps": 5})
    b = submit(tags={"b": "2", "a": "1"}, hyperparameters={"max_steps": 5, "seed": 1})
    assert a.fingerprint() == b.fingerprint()


# -- rejections ---------------------------------------------------------------------------


def _p(**fields: Any) -> dict[str, Any]:
    return {"template": "bert-large-qa", **fields}


LONG_KEY = "s3://" + DATA + "/" + "k" * 1100
BAD: list[tuple[str, Any, str]] = [
    ("body-null", None, "body"),
    ("body-list", [1, 2], "body"),
    ("body-str", "submit", "body"),
    ("unknown-field", _p(zeta=1, alpha=2), "alpha"),
    ("unknown-field-typo", _p(instance_typ="ml.p4d.24xlarge"), "instance_typ"),
    ("action", _p(action="describe"), "action"),
    ("template-missing", {"job_name": "x"}, "template"),
    ("template-type", {"template": 5}, "template"),
    ("job-name-type", _p(job_name=5), "job_name"),
    ("job-name-long", _p(job_name="a" * 129), "job_name"),
    ("job-name-empty", _p(job_name=""), "job_name"),
    ("job-name-junk", _p(job_name="---!!!---"), "job_name"),
    ("hp-type", _p(hyperparameters=[1]), "hyperparameters"),
    ("hp-not-overridable", _p(hyperparameters={"task": "mlm"}), "hyperparameters.task"),
    ("hp-unknown", _p(hyperparameters={"bogus": 1}), "hyperparameters.bogus"),
    (
        "hp-str-for-float",
        _p(hyperparameters={"learning_rate": "1e-4"}),
        "hyperparameters.learning_rate",
    ),
    (
        "hp-bool-for-float",
        _p(hyperparameters={"learning_rate": True}),
        "hyperparameters.learning_rate",
    ),
    ("hp-null", _p(hyperparameters={"learning_rate": None}), "hyperparameters.learning_rate"),
    ("hp-object", _p(hyperparameters={"learning_rate": {"v": 1}}), "hyperparameters.learning_rate"),
    (
        "hp-nan",
        _p(hyperparameters={"learning_rate": float("nan")}),
        "hyperparameters.learning_rate",
    ),
    (
        "hp-inf",
        _p(hyperparameters={"learning_rate": float("inf")}),
        "hyperparameters.learning_rate",
    ),
    ("hp-above-max", _p(hyperparameters={"learning_rate": 0.5}), "hyperparameters.learning_rate"),
    (
        "hp-below-min",
        _p(hyperparameters={"num_train_epochs": 0}),
        "hyperparameters.num_train_epochs",
    ),
    (
        "hp-float-for-int",
        _p(hyperparameters={"num_train_epochs": 2.0}),
        "hyperparameters.num_train_epochs",
    ),
    (
        "hp-bool-for-int",
        _p(hyperparameters={"num_train_epochs": True}),
        "hyperparameters.num_train_epochs",
    ),
    ("hp-huge-int", _p(hyperparameters={"max_steps": 10**30}), "hyperparameters.max_steps"),
    (
        "hp-not-a-choice",
        {
            "template": "roberta-large-mnli-mp",
            "hyperparameters": {"per_device_train_batch_size": 6},
        },
        "hyperparameters.per_device_train_batch_size",
    ),
    (
        "hp-str-choice",
        {"template": "distilbert-spot", "hyperparameters": {"model_name_or_path": "gpt2"}},
        "hyperparameters.model_name_or_path",
    ),
    ("type-type", _p(instance_type=["ml.p4d.24xlarge"]), "instance_type"),
    ("type-not-allowed", _p(instance_type="ml.g5.xlarge"), "instance_type"),
    ("type-unknown", _p(instance_type="ml.z9.huge"), "instance_type"),
    ("count-high", _p(instance_count=40), "instance_count"),
    ("count-zero", _p(instance_count=0), "instance_count"),
    ("count-str", _p(instance_count="2"), "instance_count"),
    ("count-bool", _p(instance_count=True), "instance_count"),
    ("count-float", _p(instance_count=2.0), "instance_count"),
    ("count-huge", _p(instance_count=2**70), "instance_count"),
    (
        "count-single-node-template",
        {"template": "distilbert-spot", "instance_count": 2},
        "instance_count",
    ),
    ("spot-type", _p(spot="yes"), "spot"),
    ("spot-int", _p(spot=1), "spot"),
    ("runtime-zero", _p(max_runtime_seconds=0), "max_runtime_seconds"),
    ("runtime-high", _p(max_runtime_seconds=432_001), "max_runtime_seconds"),
    ("runtime-float", _p(max_runtime_seconds=3600.0), "max_runtime_seconds"),
    ("wait-on-demand", _p(spot=False, max_wait_seconds=7200), "max_wait_seconds"),
    ("wait-below-runtime", _p(max_runtime_seconds=7200, max_wait_seconds=3600), "max_wait_seconds"),
    ("wait-below-default-runtime", _p(max_wait_seconds=3600), "max_wait_seconds"),
    ("wait-above-template", _p(max_wait_seconds=864_001), "max_wait_seconds"),
    ("wait-str", _p(max_wait_seconds="7200"), "max_wait_seconds"),
    ("inputs-type", _p(inputs=["s3://x/y"]), "inputs"),
    ("inputs-unknown-channel", _p(inputs={"test": f"s3://{DATA}/t/"}), "inputs.test"),
    ("inputs-not-str", _p(inputs={"train": 5}), "inputs.train"),
    ("inputs-https", _p(inputs={"train": f"https://{DATA}.s3.amazonaws.com/x/"}), "inputs.train"),
    ("inputs-file", _p(inputs={"train": "file:///etc/passwd"}), "inputs.train"),
    ("inputs-other-bucket", _p(inputs={"train": "s3://someone-else/data/"}), "inputs.train"),
    ("inputs-dotdot", _p(inputs={"train": f"s3://{DATA}/a/../b/"}), "inputs.train"),
    ("inputs-space", _p(inputs={"train": f"s3://{DATA}/a b/"}), "inputs.train"),
    ("inputs-newline", _p(inputs={"train": f"s3://{DATA}/a\nb/"}), "inputs.train"),
    ("inputs-nul", _p(inputs={"train": f"s3://{DATA}/a\x00b/"}), "inputs.train"),
    ("inputs-no-slash", _p(inputs={"train": f"s3://{DATA}"}), "inputs.train"),
    ("inputs-bad-bucket", _p(inputs={"train": "s3://Bad_Bucket/x/"}), "inputs.train"),
    ("inputs-too-long", _p(inputs={"train": LONG_KEY}), "inputs.train"),
    ("tags-type", _p(tags=[["a", "b"]]), "tags"),
    ("tags-aws", _p(tags={"aws:owner": "x"}), "tags.aws:owner"),
    ("tags-aws-upper", _p(tags={"AWS:Owner": "x"}), "tags.AWS:Owner"),
    ("tags-ftl", _p(tags={"ftl:template": "x"}), "tags.ftl:template"),
    ("tags-platform-key", _p(tags={"owner": "me"}), "tags.owner"),
    ("tags-empty-key", _p(tags={"": "x"}), "tags."),
    ("tags-long-key", _p(tags={"k" * 129: "v"}), "tags." + "k" * 100),
    ("tags-long-value", _p(tags={"team": "v" * 257}), "tags.team"),
    ("tags-bad-char", _p(tags={"team": "a,b"}), "tags.team"),
    ("tags-bad-key-char", _p(tags={"te#am": "x"}), "tags.te#am"),
    ("tags-value-type", _p(tags={"team": 5}), "tags.team"),
    ("tags-too-many", _p(tags={f"t{i}": "x" for i in range(45)}), "tags"),
    ("token-empty", _p(client_token=""), "client_token"),
    ("token-long", _p(client_token="x" * 65), "client_token"),
    ("token-space", _p(client_token="a b"), "client_token"),
    ("token-type", _p(client_token=5), "client_token"),
]


@pytest.mark.parametrize(("payload", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_rejected(reject: Callable[..., jm.JobModelError], payload: Any, field: str) -> None:
    reject(payload, field)


def test_contract_message_for_instance_count(reject: Callable[..., jm.JobModelError]) -> None:
    err = reject(_p(instance_count=40), "instance_count")
    assert (
        err.message == "instance_count must be between 1 and 16 for template bert-large-qa, got 40"
    )
    assert err.to_dict() == {
        "error": {"type": "ValidationError", "message": err.message, "field": "instance_count"}
    }


def test_unknown_template_is_not_found(reject: Callable[..., jm.JobModelError]) -> None:
    err = reject({"template": "gpt-5"}, "template", jm.NotFound)
    assert "gpt-5" in err.message
    assert err.to_dict()["error"]["type"] == "NotFound"


def test_maximal_tags_fit(submit: Callable[..., jm.SubmitRequest]) -> None:
    # 2 platform tags + 44 caller tags + 4 launcher tags = 50
    assert len(submit(tags={f"t{i}": "x" for i in range(44)}).tags) == 44


def test_queue_mode_keeps_room_for_the_job_name_tag(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    """Batch's payload carries ``ftl:job-name`` too: one caller tag fewer fits."""

    def queued(count: int) -> jm.SubmitRequest:
        tags = {f"t{i}": "x" for i in range(count)}
        return jm.validate_submit(_p(tags=tags), catalog, platform, scheduler="queue")

    assert len(queued(43).tags) == 43
    with pytest.raises(jm.ValidationError) as err:
        queued(44)
    assert err.value.field == "tags" and "make 51" in err.value.message


def test_messages_name_the_rule(reject: Callable[..., jm.JobModelError]) -> None:
    assert (
        "between 1 and 432000" in reject(_p(max_runtime_seconds=0), "max_runtime_seconds").message
    )
    assert (
        "at least max_runtime_seconds"
        in reject(_p(max_runtime_seconds=7200, max_wait_seconds=3600), "max_wait_seconds").message
    )
    assert "spot" in reject(_p(spot=False, max_wait_seconds=7200), "max_wait_seconds").message
    assert (
        "not overridable"
        in reject(_p(hyperparameters={"task": "x"}), "hyperparameters.task").message
    )
    assert "not allow" in reject(_p(inputs={"train": "s3://elsewhere/x/"}), "inputs.train").message


# -- rules that only an unvalidated template can reach --------------------------------------


def _custom(
    catalog: dict[str, jm.TemplateSpec], name: str, **changes: Any
) -> dict[str, jm.TemplateSpec]:
    return {name: dataclasses.replace(catalog[name], **changes)}


def test_smddp_checked_per_request(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    custom = _custom(catalog, "bert-large-qa", instance_types=("ml.p4d.24xlarge", "ml.g5.48xlarge"))
    with pytest.raises(jm.ValidationError) as info:
        jm.validate_submit(
            {"template": "bert-large-qa", "instance_type": "ml.g5.48xlarge"}, custom, platform
        )
    assert info.value.field == "instance_type" and "smddp" in info.value.message


def test_efa_checked_per_request(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    custom = _custom(catalog, "bert-large-qa", instance_types=("ml.p4d.24xlarge", "ml.p3.16xlarge"))
    ok = {"template": "bert-large-qa", "instance_type": "ml.p3.16xlarge", "instance_count": 1}
    assert jm.validate_submit(ok, custom, platform).instance_count == 1
    with pytest.raises(jm.ValidationError) as info:
        jm.validate_submit({**ok, "instance_count": 2}, custom, platform)
    assert info.value.field == "instance_type" and "EFA" in info.value.message


def test_multi_node_needs_distribution(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    custom = _custom(catalog, "distilbert-spot", max_instance_count=4)
    with pytest.raises(jm.ValidationError) as info:
        jm.validate_submit({"template": "distilbert-spot", "instance_count": 2}, custom, platform)
    assert info.value.field == "instance_count"


def test_spot_needs_checkpointing(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    custom = _custom(catalog, "distilbert-spot", spot=False, checkpoint=False)
    assert jm.validate_submit({"template": "distilbert-spot"}, custom, platform).spot is False
    with pytest.raises(jm.ValidationError) as info:
        jm.validate_submit({"template": "distilbert-spot", "spot": True}, custom, platform)
    assert info.value.field == "spot"


def test_required_channel_without_default(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    channels = (jm.InputChannel("train"), jm.InputChannel("extra", required=False))
    custom = _custom(catalog, "bert-large-qa", inputs=channels)
    with pytest.raises(jm.ValidationError) as info:
        jm.validate_submit({"template": "bert-large-qa"}, custom, platform)
    assert info.value.field == "inputs.train" and "required" in info.value.message
    req = jm.validate_submit(
        {"template": "bert-large-qa", "inputs": {"train": f"s3://{DATA}/x/"}}, custom, platform
    )
    assert dict(req.inputs) == {"train": f"s3://{DATA}/x/"}


# -- describe / stop names -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "squad-lr3e5-20261122-0153-a1b2", "A--b", "x" * 63, "0abc"])
def test_valid_job_names(name: str) -> None:
    assert jm.validate_job_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", "a-", "a_b", "a b", "x" * 64, None, 5, "a/b", "é"])
def test_invalid_job_names(name: Any) -> None:
    with pytest.raises(jm.ValidationError) as info:
        jm.validate_job_name(name)
    assert info.value.field == "job_name"
    assert "job_name" in info.value.message


def test_submit_fields() -> None:
    """The accepted fields are the ones docs/API.md's submit table documents (the table is
    rendered from the same rows, ``jobmodel.requests.submit_fields``)."""
    text = API_MD.read_text()
    table = text.split(submit_docs.HEADER, 1)[1].split("\n\n", 1)[0]
    documented = {line.split("`", 2)[1] for line in table.splitlines() if line.startswith("| `")}
    assert jm.SUBMIT_FIELDS == documented
    assert {"template", "job_name", "spot", "client_token", "dry_run"} <= documented
