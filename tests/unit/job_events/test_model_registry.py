"""The ``register`` end effect against moto's SageMaker model packages (issue 27): a Completed
job gets exactly one version in its group, recorded on the job, also when events
repeat, arrive out of order, or a failure falls between the create and the done mark."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobmodel.after_training import registry as R
from jobmodel.jobs import effects as E
from tests.lambda_support import client

RENDERED = {
    "TrainingJobName": "x",
    "AlgorithmSpecification": {"TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/hf:1"},
    "HyperParameters": {
        "model_name_or_path": json.dumps("meta-llama/Llama-3.1-8B-Instruct"),
        "lora_r": "16",
        "sagemaker_submit_directory": json.dumps("s3://assets/abc123.tar.gz"),
    },
    "InputDataConfig": [
        {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://d/nlp/train/"}}}
    ],
    "OutputDataConfig": {"S3OutputPath": "s3://artifacts/nlp/"},
}


def _event(name: str, status: str, event_id: str) -> dict:
    return {
        "id": event_id,
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {
            "TrainingJobName": name,
            "TrainingJobStatus": status,
            "BillableTimeInSeconds": 60,
        },
    }


class FlakySageMaker:
    """moto's SageMaker; ``fail_after_create`` creates and then raises (the answer lost)."""

    def __init__(self, real, fail_after_create: int = 0) -> None:
        self.real, self.fail_after_create, self.creates = real, fail_after_create, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def create_model_package(self, **kwargs):
        answer = self.real.create_model_package(**kwargs)
        self.creates += 1
        if self.fail_after_create > 0:
            self.fail_after_create -= 1
            raise ClientError({"Error": {"Code": "InternalFailure", "Message": "lost"}}, "Create")
        return answer


@pytest.fixture
def registry(events, moto_endpoint, prefix, monkeypatch):
    sm = client("sagemaker", moto_endpoint)
    group = R.group_name("ftl-test", "llm-lora")
    if group not in [g["ModelPackageGroupName"] for g in sm.list_model_package_groups()[
            "ModelPackageGroupSummaryList"]]:  # fmt: skip
        sm.create_model_package_group(ModelPackageGroupName=group)
    flaky = FlakySageMaker(sm)
    monkeypatch.setattr(events.runtime, "sagemaker", flaky)
    return flaky, group


def _put(events, name: str) -> None:
    # A single-team job (a team's job is the same with its team's group and usage).
    events.put_job(name, status="InProgress", template="llm-lora",
                   rendered=json.dumps(RENDERED), training_job_name=name)  # fmt: skip


def _versions(sm, group: str, name: str) -> list[dict]:
    found = sm.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]
    return [s for s in found if R.is_version_of(s, name)]


def test_a_completed_job_has_one_version_recorded_on_it(events, prefix, registry):
    flaky, group = registry
    _put(events, prefix)
    events(_event(prefix, "Completed", "e1"))
    job = events.job(prefix)
    assert E.OWED not in job
    (version,) = _versions(flaky.real, group, prefix)
    assert job["model_package_arn"] == version["ModelPackageArn"]
    assert job["model_package_group"] == group and job["model_package_version"] >= 1
    assert job["model_approval_status"] == "PendingManualApproval"
    described = flaky.real.describe_model_package(ModelPackageName=job["model_package_arn"])
    meta = described["CustomerMetadataProperties"]
    assert meta["base_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert meta["source_hash"] == "abc123" and meta["input.train"] == "s3://d/nlp/train/"
    events(_event(prefix, "Completed", "e2"))  # a repeat registers nothing more
    assert len(_versions(flaky.real, group, prefix)) == 1


def test_a_job_that_did_not_complete_registers_nothing(events, prefix, registry):
    flaky, group = registry
    _put(events, prefix)
    events(_event(prefix, "Failed", "e1"))
    assert E.OWED not in events.job(prefix)
    assert _versions(flaky.real, group, prefix) == [] and flaky.creates == 0


def test_a_create_whose_answer_was_lost_is_found_not_repeated(events, prefix, registry):
    flaky, group = registry
    flaky.fail_after_create = 1
    _put(events, prefix)
    with pytest.raises(ClientError):
        events(_event(prefix, "Completed", "e1"))
    assert E.REGISTER in events.job(prefix)[E.OWED]  # still owed: the mark was not written
    events(_event(prefix, "Completed", "e1"))  # EventBridge's retry
    (version,) = _versions(flaky.real, group, prefix)
    assert events.job(prefix)["model_package_arn"] == version["ModelPackageArn"]
    assert flaky.creates == 1


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    order=st.lists(
        st.sampled_from(["InProgress", "Completed", "Stopping"]), min_size=1, max_size=6
    ).map(lambda s: [*s, "Completed"]),  # fmt: skip
    lost=st.lists(st.booleans(), min_size=7, max_size=7),
)
def test_exactly_one_version_whatever_the_order_repeats_and_failures(events, registry, order, lost):
    import uuid

    flaky, group = registry
    name = f"p{uuid.uuid4().hex[:12]}"
    _put(events, name)
    for i, status in enumerate(order):
        flaky.fail_after_create = int(lost[i])
        try:
            events(_event(name, status, f"e{i}"))
        except ClientError:
            pass  # EventBridge retries: the next event (or the sweep) does what is owed
    flaky.fail_after_create = 0
    events(_event(name, "Completed", "last"))
    assert len(_versions(flaky.real, group, name)) == 1
    assert events.job(name)["model_package_arn"]
