"""The renderer: job names, metric regexes, encoding and every CreateTrainingJob field."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import jobmodel as jm

NOW = datetime(2026, 11, 22, 1, 53, 30, tzinfo=UTC)
JOB = "squad-lr3e5-20261122-0153-a1b2"
SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
Render = Callable[..., dict[str, Any]]


@pytest.fixture
def render(catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig) -> Render:
    """``render(spec=None, plat=None, requested_by=None, **payload_fields)``."""

    def _render(
        spec: jm.TemplateSpec | None = None,
        plat: jm.PlatformConfig | None = None,
        requested_by: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        if spec is not None:
            fields["template"] = spec.name
        fields.setdefault("template", "bert-large-qa")
        spec = spec or catalog[fields["template"]]
        plat = plat or platform
        req = jm.validate_submit(fields, {spec.name: spec}, plat)
        return jm.render_create_training_job(
            req, spec, plat, job_name=JOB, requested_by=requested_by
        )

    return _render


# -- job names ----------------------------------------------------------------------------


def test_make_job_name() -> None:
    assert jm.make_job_name("squad-lr3e5", now=NOW, rand_hex="a1b2") == JOB
    assert jm.make_job_name("squad-lr3e5", now=NOW, rand_hex="A1B2") == JOB


def test_make_job_name_sanitises_and_truncates() -> None:
    assert jm.make_job_name(" my run: lr=3e-5! ", now=NOW, rand_hex="0000") == (
        "my-run-lr-3e-5-20261122-0153-0000"
    )
    long = jm.make_job_name("x" * 200, now=NOW, rand_hex="ffff")
    assert len(long) == 63 and long.startswith("x" * 44 + "-2026")
    # a cut that lands on a dash does not leave a double dash or a trailing one
    cut = jm.make_job_name("a" * 43 + "-b" * 10, now=NOW, rand_hex="ffff")
    assert cut == "a" * 43 + "-20261122-0153-ffff"
    for name in (long, cut):
        assert SAGEMAKER_NAME.match(name)


def test_make_job_name_uses_utc() -> None:
    later = NOW.astimezone(timezone(timedelta(hours=9)))
    assert jm.make_job_name("a", now=later, rand_hex="0001") == "a-20261122-0153-0001"
    naive = datetime(2026, 1, 2, 3, 4)
    assert jm.make_job_name("a", now=naive, rand_hex="0001") == "a-20260102-0304-0001"


def test_make_job_name_rejects_bad_input() -> None:
    with pytest.raises(jm.ValidationError) as info:
        jm.make_job_name("!!!", now=NOW, rand_hex="0000")
    assert info.value.field == "job_name"
    for bad in ("abc", "abcde", "zzzz", ""):
        with pytest.raises(ValueError):
            jm.make_job_name("a", now=NOW, rand_hex=bad)


# -- metric regexes ------------------------------------------------------------------------


def test_metric_regex_is_the_documented_one() -> None:
    assert jm.metric_regex("train_loss") == (
        r"ftl_metric name=train_loss value=([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
    )


@pytest.mark.parametrize("value", [0.6931, 1e-05, -3.5, 12.0, 2.5e20, 0.0, 123456.789])
def test_metric_regex_parses_entrypoint_lines(value: float) -> None:
    line = f"ftl_metric name=eval_loss value={float(value)!r} step=10"
    match = re.search(jm.metric_regex("eval_loss"), line)
    assert match is not None
    assert float(match.group(1)) == value


def test_metric_regex_is_exact() -> None:
    pattern = jm.metric_regex("train_loss")
    assert re.search(pattern, "ftl_metric name=train_loss_x value=1.0 step=1") is None
    assert re.search(pattern, "ftl_metric name=train_loss value=nan step=1") is None
    assert re.search(pattern, "ftl_metric name=train_loss value=inf step=1") is None


@pytest.mark.parametrize("bad", ["Train", "a-b", "", "a b"])
def test_metric_regex_rejects_bad_names(bad: str) -> None:
    with pytest.raises(ValueError):
        jm.metric_regex(bad)


def test_encode_hyperparameters_like_the_sdk() -> None:
    encoded = jm.encode_hyperparameters(
        {"s": "qa", "i": 3, "f": 3e-5, "b": True, "n": None, "d": {"partitions": 4}}
    )
    assert encoded == {
        "s": '"qa"',
        "i": "3",
        "f": "3e-05",
        "b": "true",
        "n": "null",
        "d": '{"partitions": 4}',
    }


# -- the rendered request -------------------------------------------------------------------


def test_render_core_fields(render: Render, fake_image: str, platform: jm.PlatformConfig) -> None:
    out = render(hyperparameters={"learning_rate": 3e-5}, client_token="tok-1")
    assert out["TrainingJobName"] == JOB
    assert out["RoleArn"] == platform.role_arn
    algo = out["AlgorithmSpecification"]
    assert algo["TrainingImage"] == fake_image
    assert algo["TrainingInputMode"] == "File"
    assert algo["EnableSageMakerMetricsTimeSeries"] is True
    assert {m["Name"] for m in algo["MetricDefinitions"]} >= {"train_loss", "eval_f1"}
    for metric in algo["MetricDefinitions"]:
        assert metric["Regex"] == jm.metric_regex(metric["Name"])
    assert out["OutputDataConfig"] == {
        "S3OutputPath": f"s3://{platform.artifact_bucket}/",
        "KmsKeyId": platform.kms_key_arn,
    }
    assert out["CheckpointConfig"] == {
        "S3Uri": f"s3://{platform.checkpoint_bucket}/{JOB}/",
        "LocalPath": "/opt/ml/checkpoints",
    }
    assert out["CheckpointConfig"]["S3Uri"] == jm.checkpoint_s3_uri(platform, JOB)
    assert jm.output_s3_uri(platform, JOB) == f"s3://{platform.artifact_bucket}/{JOB}/"
    assert out["TensorBoardOutputConfig"] == {
        "S3OutputPath": f"s3://{platform.artifact_bucket}/{JOB}/tensorboard/",
        "LocalPath": "/opt/ml/output/tensorboard",
    }
    assert out["ProfilerConfig"] == {"DisableProfiler": True}
    assert "DebugHookConfig" not in out
    assert out["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert out["EnableNetworkIsolation"] is False
    assert out["EnableInterContainerTrafficEncryption"] is False
    assert out["VpcConfig"] == {
        "SecurityGroupIds": list(platform.security_groups),
        "Subnets": list(platform.subnets),
    }
    json.dumps(out)


def test_render_hyperparameters_smddp(render: Render, platform: jm.PlatformConfig) -> None:
    hp = render(hyperparameters={"learning_rate": 5e-5}, instance_type="ml.p4de.24xlarge")[
        "HyperParameters"
    ]
    assert all(type(v) is str for v in hp.values())
    assert hp["learning_rate"] == "5e-05"
    assert hp["task"] == '"qa"'
    assert hp["max_seq_length"] == "384"  # ints JSON-encoded, like the SDK
    assert "fp16" not in hp  # precision is left to the entrypoint (bf16 on A100)
    assert hp["sagemaker_program"] == '"train.py"'
    assert hp["sagemaker_submit_directory"] == json.dumps(platform.source_s3_uri)
    assert hp["sagemaker_container_log_level"] == "20"
    assert hp["sagemaker_job_name"] == json.dumps(JOB)
    assert hp["sagemaker_region"] == '"us-east-1"'
    assert hp["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert hp["sagemaker_instance_type"] == '"ml.p4de.24xlarge"'
    assert hp["sagemaker_distributed_dataparallel_custom_mpi_options"] == '""'
    assert not any(k.startswith("sagemaker_mpi") for k in hp)
    assert "mp_parameters" not in hp


def test_render_hyperparameters_smp(render: Render, catalog: dict[str, jm.TemplateSpec]) -> None:
    hp = render(template="roberta-large-mnli-mp")["HyperParameters"]
    assert json.loads(hp["mp_parameters"]) == dict(
        catalog["roberta-large-mnli-mp"].distribution.mp_parameters or {}
    )
    assert hp["sagemaker_mpi_enabled"] == "true"
    assert hp["sagemaker_mpi_num_of_processes_per_host"] == "8"
    assert hp["sagemaker_mpi_custom_mpi_options"] == '""'
    assert "sagemaker_distributed_dataparallel_enabled" not in hp
    assert "sagemaker_instance_type" not in hp


def test_render_hyperparameters_none(render: Render) -> None:
    hp = render(template="distilbert-spot")["HyperParameters"]
    assert {k for k in hp if k.startswith("sagemaker_")} == {
        "sagemaker_program",
        "sagemaker_submit_directory",
        "sagemaker_container_log_level",
        "sagemaker_job_name",
        "sagemaker_region",
    }


def test_render_hyperparameters_torchrun_and_mpi(
    render: Render, catalog: dict[str, jm.TemplateSpec]
) -> None:
    base = catalog["bert-large-qa"]
    torchrun = dataclasses.replace(base, distribution=jm.Distribution("torchrun"))
    hp = render(spec=torchrun)["HyperParameters"]
    assert hp["sagemaker_torch_distributed_enabled"] == "true"
    assert hp["sagemaker_instance_type"] == '"ml.p4d.24xlarge"'
    mpi = dataclasses.replace(
        base, distribution=jm.Distribution("mpi", 4, custom_mpi_options="-x NCCL_DEBUG=INFO")
    )
    jm.validate_template(mpi)
    hp = render(spec=mpi)["HyperParameters"]
    assert hp["sagemaker_mpi_enabled"] == "true"
    assert hp["sagemaker_mpi_num_of_processes_per_host"] == "4"
    assert hp["sagemaker_mpi_custom_mpi_options"] == '"-x NCCL_DEBUG=INFO"'
    assert "mp_parameters" not in hp


def test_render_inputs(render: Render, catalog: dict[str, jm.TemplateSpec]) -> None:
    channels = render(inputs={"train": "s3://shared-datasets/sq/"})["InputDataConfig"]
    assert channels[0] == {
        "ChannelName": "train",
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": "s3://shared-datasets/sq/",
                "S3DataDistributionType": "FullyReplicated",
            }
        },
        "InputMode": "File",
    }
    assert [c["ChannelName"] for c in channels] == ["train", "validation"]
    albert = render(template="albert-mlm-pretrain")
    assert albert["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"
    assert {c["InputMode"] for c in albert["InputDataConfig"]} == {"FastFile"}
    sharded = dataclasses.replace(
        catalog["bert-large-qa"],
        inputs=(
            jm.InputChannel("train", default_prefix="t/", distribution="ShardedByS3Key"),
            jm.InputChannel("meta", default_prefix="m/", content_type="application/json"),
        ),
        evaluation=None,  # its policy reads the validation channel this copy lacks
    )
    jm.validate_template(sharded)
    first, second = render(spec=sharded)["InputDataConfig"]
    assert first["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "ShardedByS3Key"
    assert "ContentType" not in first
    assert second["ContentType"] == "application/json"


def test_render_without_inputs_omits_the_config(
    render: Render, catalog: dict[str, jm.TemplateSpec]
) -> None:
    optional = dataclasses.replace(
        catalog["bert-large-qa"], inputs=(jm.InputChannel("train", required=False),)
    )
    assert "InputDataConfig" not in render(spec=optional)


def test_render_resources_and_volume_key(
    render: Render,
    catalog: dict[str, jm.TemplateSpec],
    platform: jm.PlatformConfig,
    plain_platform: jm.PlatformConfig,
) -> None:
    nvme = render(instance_count=3)["ResourceConfig"]
    assert nvme == {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 3, "VolumeSizeInGB": 200}
    ebs_spec = dataclasses.replace(
        catalog["distilbert-spot"],
        instance_types=("ml.p3.2xlarge", "ml.g5.xlarge"),
        default_instance_type="ml.p3.2xlarge",
    )
    ebs = render(spec=ebs_spec)["ResourceConfig"]
    assert ebs["VolumeKmsKeyId"] == platform.kms_key_arn
    assert "VolumeKmsKeyId" not in render(spec=ebs_spec, plat=plain_platform)["ResourceConfig"]
    assert (
        "VolumeKmsKeyId"
        not in render(spec=ebs_spec, instance_type="ml.g5.xlarge")["ResourceConfig"]
    )


def test_render_warm_pool_only_on_demand(
    render: Render, catalog: dict[str, jm.TemplateSpec]
) -> None:
    warm = dataclasses.replace(catalog["bert-large-qa"], keep_alive_seconds=600)
    assert "KeepAlivePeriodInSeconds" not in render(spec=warm, spot=True)["ResourceConfig"]
    assert render(spec=warm, spot=False)["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600


def test_render_spot_and_stopping_condition(render: Render) -> None:
    spot = render(max_runtime_seconds=36000, max_wait_seconds=72000)
    assert spot["EnableManagedSpotTraining"] is True
    assert spot["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 36000,
        "MaxWaitTimeInSeconds": 72000,
    }
    on_demand = render(spot=False, max_runtime_seconds=3600)
    assert on_demand["EnableManagedSpotTraining"] is False
    assert on_demand["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}
    assert "CheckpointConfig" in on_demand


def test_render_plain_platform(render: Render, plain_platform: jm.PlatformConfig) -> None:
    out = render(plat=plain_platform)
    assert "VpcConfig" not in out
    assert out["OutputDataConfig"] == {"S3OutputPath": f"s3://{plain_platform.artifact_bucket}/"}


def test_render_environment(render: Render, catalog: dict[str, jm.TemplateSpec]) -> None:
    assert render()["Environment"] == {
        "FI_PROVIDER": "efa",
        "NCCL_PROTO": "simple",
        "NCCL_SOCKET_IFNAME": "eth0",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "RDMAV_FORK_SAFE": "1",
    }
    p3dn = render(instance_type="ml.p3dn.24xlarge")["Environment"]
    assert p3dn["FI_PROVIDER"] == "efa" and "FI_EFA_USE_DEVICE_RDMA" not in p3dn
    assert "Environment" not in render(template="distilbert-spot")
    tuned = dataclasses.replace(
        catalog["bert-large-qa"], environment={"NCCL_DEBUG": "WARN", "NCCL_PROTO": "LL128"}
    )
    env = render(spec=tuned)["Environment"]
    assert env["NCCL_DEBUG"] == "WARN" and env["NCCL_PROTO"] == "LL128"
    assert env["FI_PROVIDER"] == "efa"


def test_render_optional_features(
    render: Render, catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    spec = dataclasses.replace(
        catalog["bert-large-qa"],
        retry_attempts=0,
        tensorboard=False,
        debugger=True,
        profiler=True,
        network_isolation=True,
        inter_container_encryption=True,
    )
    out = render(spec=spec)
    assert "RetryStrategy" not in out
    assert "TensorBoardOutputConfig" not in out
    assert out["DebugHookConfig"] == {
        "S3OutputPath": f"s3://{platform.artifact_bucket}/{JOB}/debug/"
    }
    assert out["ProfilerConfig"] == {
        "S3OutputPath": f"s3://{platform.artifact_bucket}/{JOB}/profiler/"
    }
    assert out["EnableNetworkIsolation"] is True
    assert out["EnableInterContainerTrafficEncryption"] is True


def test_render_tags(render: Render, catalog: dict[str, jm.TemplateSpec]) -> None:
    spec = dataclasses.replace(
        catalog["bert-large-qa"], tags={"workload": "qa", "team": "platform"}
    )
    tags = render(
        spec=spec,
        tags={"team": "nlp", "cost-center": "1234"},
        client_token="tok-1",
        requested_by="arn:aws:iam::123456789012:user/jane,doe",
    )["Tags"]
    assert tags == [
        {"Key": "owner", "Value": "ml-platform"},
        {"Key": "environment", "Value": "test"},
        {"Key": "workload", "Value": "qa"},
        {"Key": "team", "Value": "nlp"},
        {"Key": "cost-center", "Value": "1234"},
        {"Key": "ftl:platform", "Value": "ftl"},
        {"Key": "ftl:template", "Value": "bert-large-qa"},
        {"Key": "ftl:client-token", "Value": "tok-1"},
        {"Key": "ftl:requested-by", "Value": "arn:aws:iam::123456789012:user/jane_doe"},
    ]
    bare = render()["Tags"]
    assert [t["Key"] for t in bare] == ["owner", "environment", "ftl:platform", "ftl:template"]


def test_render_max_tags_fit(render: Render) -> None:
    tags = render(tags={f"t{i}": "x" for i in range(44)}, client_token="t", requested_by="someone")[
        "Tags"
    ]
    assert len(tags) == 50


def test_render_needs_an_image(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    spec = dataclasses.replace(catalog["bert-large-qa"], image_uri=None)
    req = jm.validate_submit({"template": "bert-large-qa"}, catalog, platform)
    with pytest.raises(jm.TemplateError) as info:
        jm.render_create_training_job(req, spec, platform, job_name=JOB)
    assert info.value.rule == "image"


def test_render_checks_the_job_name(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    req = jm.validate_submit({"template": "bert-large-qa"}, catalog, platform)
    with pytest.raises(jm.ValidationError):
        jm.render_create_training_job(req, catalog["bert-large-qa"], platform, job_name="bad_name")


def test_request_hash(render: Render) -> None:
    a = render()
    b = json.loads(json.dumps(a, sort_keys=True))
    assert jm.request_hash(a) == jm.request_hash(b)
    assert len(jm.request_hash(a)) == 64
    assert jm.request_hash(render(instance_count=3)) != jm.request_hash(a)


def test_render_validates_against_the_botocore_model(render: Render) -> None:
    """Every shipped template renders to kwargs botocore's parameter validator accepts."""
    botocore_session = pytest.importorskip("botocore.session")
    validate = pytest.importorskip("botocore.validate")
    model = botocore_session.get_session().get_service_model("sagemaker")
    shape = model.operation_model("CreateTrainingJob").input_shape
    validator = validate.ParamValidator()
    for name in jm.shipped_catalog():
        for spot in (True, False):
            report = validator.validate(render(template=name, spot=spot), shape)
            assert not report.has_errors(), report.generate_report()


# -- the launcher's own tags (jobmodel.contract.names) -----------------------------------------


def test_the_launchers_tags_are_the_named_list_and_their_count_is_derived_from_it(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    """Every ``ftl:`` tag the renderer writes is one of ``names``' keys, and the tags it adds
    beyond the platform's, template's and caller's are exactly ``launcher_tag_count``: the
    limit checks (request and template validation) count the same tags the renderer writes."""
    from jobmodel.contract import names as N

    spec = catalog["bert-large-qa"]
    fields = {"template": spec.name, "client_token": "tok-1", "tags": {"project": "x"}}
    req = jm.validate_submit(fields, {spec.name: spec}, platform)
    for team, role in ((None, None), ("team-a", "arn:aws:iam::123456789012:role/team-a")):
        rendered = jm.render_create_training_job(
            req, spec, platform, job_name=JOB, requested_by="alice", team=team, role_arn=role
        )
        keys = {t["Key"] for t in rendered["Tags"]}
        own = keys - set(platform.platform_tags) - set(spec.tags) - set(req.tags)
        named = {*N.LAUNCHER_TAG_KEYS, N.TEAM_TAG_KEY}
        assert {k for k in keys if k.startswith("ftl:")} <= named
        assert own <= named and len(own) == N.launcher_tag_count(team=team is not None)
