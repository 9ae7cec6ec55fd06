"""The model registry's request builder (issue 27): group names, the CreateModelPackage request
of a rendered job (a LoRA job's adapter and base model), and the API's limits on every field,
checked against the installed botocore model."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import botocore.session
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jobmodel as jm
from ftl_ledger.job_codec import from_record
from jobmodel.after_training import registry as R
from jobmodel.jobs.job import Job

GROUP_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
METADATA_RE = re.compile(r"^[\w .:/=+\-@]*$", re.ASCII)
JOB = "nlp-llm-lora-20261122-0153-a1b2"


def _job(catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig, template: str,
         **extra: Any) -> Job:  # fmt: skip
    spec = catalog[template]
    req = jm.validate_submit({"template": template, **extra}, {template: spec}, platform)
    rendered = jm.render_create_training_job(
        req, spec, platform, job_name=JOB, requested_by="arn:aws:iam::123456789012:role/alice"
    )
    record = {
        "job_name": JOB,
        "template": template,
        "team": "nlp",
        "status": "Completed",
        "requested_by": "arn:aws:iam::123456789012:role/alice",
        "training_job_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{JOB}",
        "instance_type": req.instance_type,
        "instance_count": req.instance_count,
        "cost_usd": 12.5,
        "final_metrics": {"eval_loss": 0.42, "train_loss": 0.3},
        "rendered": json.dumps(rendered),
        "created_at": "2026-11-22T01:53:30.000Z",
    }
    return from_record(record)


@pytest.fixture(scope="module")
def shapes() -> Any:
    return botocore.session.get_session().get_service_model("sagemaker")


def test_group_names_fit_the_pattern_and_long_ones_stay_distinct():
    assert R.group_name("ftl", "llm-lora", "nlp") == "ftl-nlp-llm-lora"
    assert R.group_name("ftl", "llm-lora") == "ftl-llm-lora"
    long_a = R.group_name("platform" * 5, "template-a" * 4, "team-a")
    long_b = R.group_name("platform" * 5, "template-b" * 4, "team-a")
    assert long_a != long_b
    for name in (long_a, long_b, R.group_name("Ftl_X", "--t--", "t")):
        assert len(name) <= 63 and GROUP_RE.match(name), name


@given(st.text(min_size=1, max_size=80), st.text(min_size=1, max_size=40))
def test_any_group_name_is_valid(platform, template):
    name = R.group_name(platform, template, "team-a")
    assert len(name) <= 63 and GROUP_RE.match(name), name


def test_a_lora_job_registers_its_adapter_and_names_its_base_model(catalog, platform):
    job = _job(catalog, platform, "llm-lora")
    request = R.create_request(job, "ftl-nlp-llm-lora", f"{JOB}/register")
    meta = request["CustomerMetadataProperties"]
    assert meta["artifact"] == "lora-adapter"
    assert meta["base_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert request["ModelPackageDescription"].startswith(f"{JOB}: LoRA adapter of meta-llama")
    (container,) = request["InferenceSpecification"]["Containers"]
    assert container["ModelDataUrl"].endswith(f"/{JOB}/output/model.tar.gz")
    assert container["Image"] == catalog["llm-lora"].image_uri
    assert request["ModelApprovalStatus"] == "PendingManualApproval"
    assert meta["metric.eval_loss"] == "0.42" and meta["hp.lora_r"] == "16"
    assert meta["job_arn"] == job.training_job_arn and meta["cost_usd"] == "12.5"
    assert meta["attempts"] == "1" and meta["team"] == "nlp"
    assert any(k.startswith("input.") for k in meta)
    assert request["MetadataProperties"]["GeneratedBy"] == job.training_job_arn
    assert request["MetadataProperties"]["CommitId"] == meta["source_hash"]


def test_a_full_model_names_what_it_was_tuned_from(catalog, platform):
    request = R.create_request(_job(catalog, platform, "distilbert-spot"), "g", "x/register")
    assert request["CustomerMetadataProperties"]["artifact"] == "full-model"
    assert "fine-tuned from distilbert-base-uncased" in request["ModelPackageDescription"]


def test_a_merged_lora_job_says_the_model_is_merged_and_where_the_adapter_is(catalog, platform):
    job = _job(catalog, platform, "llm-lora", hyperparameters={"merge_adapter": True})
    request = R.create_request(job, "ftl-nlp-llm-lora", f"{JOB}/register")
    meta = request["CustomerMetadataProperties"]
    assert meta["artifact"] == "merged-model"
    assert meta["base_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    text = request["ModelPackageDescription"]
    assert text.startswith(f"{JOB}: merged model: meta-llama") and "adapter/" in text
    assert "LoRA adapter of" not in text


def test_the_client_token_is_stable_and_valid():
    token = R.client_token(f"{JOB}/register")
    assert token == R.client_token(f"{JOB}/register") != R.client_token("other/register")
    assert re.fullmatch(r"[a-zA-Z0-9-]{1,36}", token)


def test_metadata_fits_the_api_limits_however_much_a_job_has(catalog, platform):
    job = dataclasses.replace(
        _job(catalog, platform, "llm-lora"),
        final_metrics={f"m{i}{'x' * 200}": i / 3 for i in range(80)},
        requested_by='arn:aws:sts::1:assumed-role/r/{"odd", value}' + "y" * 400,
    )
    meta = R.lineage(job)
    assert len(meta) <= 50 and int(meta["omitted"]) > 0
    for key, value in meta.items():
        assert 1 <= len(key) <= 128 and METADATA_RE.match(key), key
        assert 1 <= len(value) <= 256 and METADATA_RE.match(value), value
    assert meta["job_name"] == JOB  # the job's own lineage comes first


def test_the_request_passes_botocores_validation(catalog, platform, shapes):
    from botocore.validate import ParamValidator

    for template in ("llm-lora", "distilbert-chain", "bert-large-qa"):
        request = R.create_request(_job(catalog, platform, template), "ftl-nlp-x", "j/register")
        report = ParamValidator().validate(
            request, shapes.operation_model("CreateModelPackage").input_shape
        )
        assert not report.has_errors(), report.generate_report()
        assert len(request["ModelPackageDescription"]) <= 1024


def test_a_version_is_found_by_its_jobs_name_only():
    summary = {"ModelPackageDescription": f"{JOB}: LoRA adapter of x"}
    assert R.is_version_of(summary, JOB)
    assert not R.is_version_of(summary, JOB[:-1])
    assert not R.is_version_of({"ModelPackageDescription": None}, JOB)
