"""Property tests: valid requests always render to a sound CreateTrainingJob; junk never crashes."""

from __future__ import annotations

import json
import re
import string
import unicodedata
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobmodel as jm
from testsupport import IMAGE_ENTRYPOINT

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
ENV_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/huggingface-pytorch-training:1.0"
CATALOG = {
    n: s.with_image(IMAGE, entrypoint=IMAGE_ENTRYPOINT) for n, s in jm.shipped_catalog().items()
}
PLATFORMS = [
    jm.PlatformConfig(
        region="us-west-2",
        role_arn="arn:aws:iam::123456789012:role/train",
        data_bucket="ftl-data",
        checkpoint_bucket="ftl-ckpt",
        artifact_bucket="ftl-art",
        kms_key_arn=kms,
        subnets=subnets,
        security_groups=("sg-1",) if subnets else (),
        source_s3_uri="s3://ftl-art/source/sourcedir.tar.gz",
        allowed_input_buckets=("shared.data-1",),
        platform_tags=tags,
    )
    for kms, subnets, tags in [
        ("arn:aws:kms:us-west-2:123456789012:key/k", ("subnet-1",), {"owner": "platform"}),
        (None, (), {}),
    ]
]
BUCKETS = ["ftl-data", "shared.data-1"]
FIXED_NOW = datetime(2026, 1, 1, tzinfo=UTC)
TAG_CHARS = st.characters(categories=("L", "N", "Zs"), include_characters="_.:/=+-@")
KEY_CHARS = string.ascii_letters + string.digits + "-_.!*'()"  # S3 key characters, no '/'


def _tag_ok(text: str) -> bool:
    return all(ch in "_.:/=+-@" or unicodedata.category(ch)[0] in "LZN" for ch in text)


def _hp_value(rule: jm.HyperparameterRule) -> st.SearchStrategy[Any]:
    if rule.choices is not None:
        return st.sampled_from(rule.choices)
    if rule.type == "bool":
        return st.booleans()
    if rule.type == "int":
        return st.integers(
            min_value=int(rule.min) if rule.min is not None else -(2**31),
            max_value=int(rule.max) if rule.max is not None else 2**31,
        )
    if rule.type == "float":
        return st.floats(
            min_value=rule.min, max_value=rule.max, allow_nan=False, allow_infinity=False
        )
    return st.text(max_size=40)


@st.composite
def valid_payloads(draw: st.DrawFn) -> tuple[dict[str, Any], jm.PlatformConfig]:
    platform = draw(st.sampled_from(PLATFORMS))
    name = draw(st.sampled_from(sorted(CATALOG)))
    spec = CATALOG[name]
    payload: dict[str, Any] = {"template": name}

    def maybe(key: str, strategy: st.SearchStrategy[Any]) -> Any:
        if draw(st.booleans()):
            payload[key] = draw(strategy)
        return payload.get(key)

    maybe(
        "job_name",
        st.text(max_size=128).filter(
            lambda s: any(c in string.ascii_letters + string.digits for c in s)
        ),
    )
    if draw(st.booleans()):
        payload["action"] = "submit"
    keys = draw(st.lists(st.sampled_from(sorted(spec.overridable)), unique=True))
    if keys or draw(st.booleans()):
        payload["hyperparameters"] = {k: draw(_hp_value(spec.overridable[k])) for k in keys}
    maybe("instance_type", st.sampled_from(spec.instance_types))
    maybe("instance_count", st.integers(1, spec.max_instance_count))
    spot = maybe("spot", st.booleans())
    spot = spec.spot if spot is None else spot
    runtime = maybe("max_runtime_seconds", st.integers(1, spec.max_runtime_seconds))
    runtime = spec.default_runtime_seconds if runtime is None else runtime
    if spot:
        maybe("max_wait_seconds", st.integers(runtime, max(spec.max_wait_seconds, runtime)))
    channels = draw(st.lists(st.sampled_from([c.name for c in spec.inputs]), unique=True))
    if channels:
        segment = st.text(alphabet=KEY_CHARS, min_size=1, max_size=12).filter(
            lambda s: s not in (".", "..")
        )
        payload["inputs"] = {
            c: f"s3://{draw(st.sampled_from(BUCKETS))}/"
            + "/".join(draw(st.lists(segment, max_size=4)))
            for c in channels
        }
    tag_key = st.text(alphabet=TAG_CHARS, min_size=1, max_size=30).filter(
        lambda k: k[:4].lower() not in ("aws:", "ftl:") and k not in platform.platform_tags
    )
    maybe("tags", st.dictionaries(tag_key, st.text(alphabet=TAG_CHARS, max_size=40), max_size=12))
    maybe("client_token", st.from_regex(r"\A[A-Za-z0-9._:\-]{1,64}\Z"))
    return payload, platform


@SETTINGS
@given(
    case=valid_payloads(),
    now=st.datetimes(timezones=st.just(UTC)),
    rand=st.from_regex(r"\A[0-9a-f]{4}\Z"),
)
def test_valid_requests_render_soundly(
    case: tuple[dict[str, Any], jm.PlatformConfig], now: Any, rand: str
) -> None:
    payload, platform = case
    req = jm.validate_submit(payload, CATALOG, platform)
    spec = CATALOG[req.template]
    itype = jm.INSTANCE_TYPES[req.instance_type]
    job = jm.make_job_name(req.job_name_prefix, now=now, rand_hex=rand)
    out = jm.render_create_training_job(req, spec, platform, job_name=job, requested_by="who?")

    name = out["TrainingJobName"]
    assert SAGEMAKER_NAME.match(name) and len(name) <= 63
    assert out["CheckpointConfig"]["S3Uri"] == f"s3://{platform.checkpoint_bucket}/{name}/"

    stop = out["StoppingCondition"]
    assert 1 <= stop["MaxRuntimeInSeconds"] <= 2_419_200
    assert stop["MaxRuntimeInSeconds"] <= spec.max_runtime_seconds
    if out["EnableManagedSpotTraining"]:
        assert stop["MaxWaitTimeInSeconds"] >= stop["MaxRuntimeInSeconds"]
        assert "KeepAlivePeriodInSeconds" not in out["ResourceConfig"]
    else:
        assert "MaxWaitTimeInSeconds" not in stop

    env = out.get("Environment", {})
    if itype.efa:
        assert env["FI_PROVIDER"] == "efa"
    if itype.gpudirect_rdma:
        assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert len(env) <= 100 and all(ENV_KEY.match(k) and len(v) <= 512 for k, v in env.items())

    resources = out["ResourceConfig"]
    if itype.local_nvme or platform.kms_key_arn is None:
        assert "VolumeKmsKeyId" not in resources
    else:
        assert resources["VolumeKmsKeyId"] == platform.kms_key_arn
    if resources["InstanceCount"] > 1:
        assert itype.efa
    if spec.distribution.kind == "smddp":
        assert itype.smddp

    hp = out["HyperParameters"]
    assert len(hp) <= 100
    for key, value in hp.items():
        assert type(value) is str and len(value) <= 256 and len(key) <= 256
        json.loads(value)
    assert json.loads(hp["sagemaker_job_name"]) == name
    for key, value in req.hyperparameters.items():
        assert json.loads(hp[key]) == value

    tags = out["Tags"]
    assert len(tags) <= 50
    assert len({t["Key"] for t in tags}) == len(tags)
    for tag in tags:
        assert 1 <= len(tag["Key"]) <= 128 and len(tag["Value"]) <= 256
        assert _tag_ok(tag["Key"]) and _tag_ok(tag["Value"])
        assert not tag["Key"].lower().startswith("aws:")

    for channel in out.get("InputDataConfig", []):
        uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
        assert uri.split("/")[2] in platform.input_buckets and len(uri) <= 1024
    json.dumps(out, allow_nan=False)
    assert len(jm.request_hash(out)) == 64


@SETTINGS
@given(case=valid_payloads())
def test_normal_form_is_a_fixed_point(case: tuple[dict[str, Any], jm.PlatformConfig]) -> None:
    """Re-submitting a validated request unchanged gives the same request and fingerprint."""
    payload, platform = case
    req = jm.validate_submit(payload, CATALOG, platform)
    again_payload = req.to_dict()
    again_payload["job_name"] = again_payload.pop("job_name_prefix")
    again = jm.validate_submit(again_payload, CATALOG, platform)
    assert again == req
    assert again.fingerprint() == req.fingerprint()
    assert jm.validate_submit(payload, CATALOG, platform).fingerprint() == req.fingerprint()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELD_NAMES = st.sampled_from(sorted(jm.SUBMIT_FIELDS)) | st.text(max_size=12)


@SETTINGS
@given(payload=JSON)
def test_arbitrary_json_never_crashes(payload: Any) -> None:
    try:
        jm.validate_submit(payload, CATALOG, PLATFORMS[0])
    except jm.JobModelError as err:
        assert err.field is None or isinstance(err.field, str)
        json.dumps(err.to_dict())


@SETTINGS
@given(
    name=st.sampled_from(sorted(CATALOG)),
    fields=st.dictionaries(FIELD_NAMES, JSON, max_size=6),
    nested=st.dictionaries(
        st.sampled_from(["hyperparameters", "inputs", "tags"]),
        st.dictionaries(
            st.text(max_size=30) | st.sampled_from(["train", "learning_rate", "seed"]), JSON
        ),
    ),
)
def test_junk_fields_on_a_real_template_never_crash(
    name: str, fields: dict[str, Any], nested: dict[str, Any]
) -> None:
    payload = {**fields, **nested, "template": name}
    for platform in PLATFORMS:
        try:
            req = jm.validate_submit(payload, CATALOG, platform)
        except jm.JobModelError as err:
            assert isinstance(err.message, str) and err.message
            json.dumps(err.to_dict())
        else:
            job = jm.make_job_name(req.job_name_prefix, now=FIXED_NOW, rand_hex="0000")
            jm.render_create_training_job(req, CATALOG[name], platform, job_name=job)


@SETTINGS
@given(
    prefix=st.text(min_size=1, max_size=300),
    now=st.datetimes(),
    rand=st.from_regex(r"\A[0-9a-fA-F]{4}\Z"),
)
def test_make_job_name_always_valid_or_rejected(prefix: str, now: Any, rand: str) -> None:
    try:
        name = jm.make_job_name(prefix, now=now, rand_hex=rand)
    except jm.ValidationError as err:
        assert err.field == "job_name"
        assert not any(c in string.ascii_letters + string.digits for c in prefix)
    else:
        assert SAGEMAKER_NAME.match(name) and len(name) <= 63
        assert jm.validate_job_name(name) == name
