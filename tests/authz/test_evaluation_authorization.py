"""An evaluation's results (issue 36) are allowed by the policies the stacks deploy, from both
functions that do them: the evaluation job's ``output.tar.gz`` read, the group's versions
listed and described (the baseline), the evaluated job's version updated (metadata, and
Approved or Rejected), its metrics JSON written, the ledger written and the ``evaluated``
notice published; each request within the service models' limits. What the conditions and
resources keep out: a version set back to
``PendingManualApproval``, another bucket's objects, and a write anywhere but the metrics JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from sandbox.evaluation_output import archive, output_location
from tests.authz.conftest import deployment
from tests.authz.harness import denied, trigger
from tests.lambda_support import FakeContext, client
from testsupport.authz.evaluate import Request

GATE = {"task_metrics": {"channel": "validation"}, "gate": [{"metric": "m", "min": 0.5}]}


def _plant(module: Any, sandbox: Any, member: str) -> tuple[str, str]:
    """A Completed job with its version, and its evaluation job ended with a regression."""
    from ftl_ledger.items import to_item
    from ftl_ledger.job_codec import from_record
    from jobmodel.jobs import claims as CL
    from jobmodel.jobs import effects as E

    submit = {"action": "submit", "template": "llm-lora", "client_token": "evalauthz"}
    job = module.handler(submit, FakeContext(alias=member or None))
    assert "error" not in job, job
    ddb = client("dynamodb", sandbox.endpoint)
    table = module.RUNTIME.table_name
    record = module.LAUNCHER.ledger.get_job(job["job_name"])
    done = {**record, "status": "Completed", "training_job_arn": "arn:x"}
    done[E.OWED] = E.owed_at_end(from_record(done))
    ddb.put_item(TableName=table, Item=to_item(done))
    described = module.handler(
        {"action": "describe", "job_name": job["job_name"]}, FakeContext(alias=member or None)
    )
    assert described.get("model_package_arn"), described
    name = f"{job['job_name'][:55]}-eval"
    evaluation = {
        **done,
        "job_name": name,
        "pk": f"job#{name}",
        "kind": "evaluation",
        "evaluation_of": job["job_name"],
        "evaluation_policy": json.dumps(GATE),
        "training_job_name": name,
        CL.CARE: CL.CARE_VALUE,
    }
    evaluation.pop("client_token", None)
    evaluation[E.OWED] = E.owed_at_end(from_record(evaluation))
    ddb.put_item(TableName=table, Item=to_item(evaluation))
    bucket = module.RUNTIME.platform.artifact_bucket
    s3 = client("s3", sandbox.endpoint)
    with contextlib.suppress(Exception):
        s3.create_bucket(Bucket=bucket)
    rendered = json.loads(done["rendered"])
    _, key = output_location(rendered["OutputDataConfig"]["S3OutputPath"], name)
    s3.put_object(
        Bucket=bucket, Key=key, Body=archive({"status": "Completed", "metrics": {"m": 0.1}})
    )
    return job["job_name"], name


@pytest.mark.parametrize("name", ["default", "teams"])
def test_an_evaluations_results_are_allowed_from_both_functions(name, authz_sandbox):
    from testsupport.authz.record import recording

    d = deployment(name)
    member = "team-team-a" if name == "teams" else ""
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):
        client("sns", authz_sandbox.endpoint).create_topic(
            Name=module.RUNTIME.topic_arn.rsplit(":", 1)[-1]
        )
        parent, evaluation = _plant(module, authz_sandbox, member)
        with recording() as calls:
            module.handler(
                {"action": "describe", "job_name": evaluation}, FakeContext(alias=member or None)
            )
        after = module.LAUNCHER.ledger.get_job(parent)
        data_bucket = module.RUNTIME.platform.data_bucket
        bucket = module.RUNTIME.platform.artifact_bucket
    assert after["evaluation"]["verdict"] == "Rejected", after.get("evaluation")
    assert after["model_approval_status"] == "Rejected"
    ops = {f"{c.service}:{c.operation}" for c in calls}
    assert {
        "s3:GetObject",
        "s3:PutObject",
        "sagemaker:ListModelPackages",
        "sagemaker:DescribeModelPackage",
        "sagemaker:UpdateModelPackage",
        "sns:Publish",
    } <= ops, ops
    # every request within the service models' full limits (the constraints check)
    from testsupport.constraints.check import ConstraintsCheck

    findings = ConstraintsCheck().all((c.service, c.operation, c.params) for c in calls)
    assert not findings, "\n".join(str(f) for f in findings[:20])
    results = [c for c in calls if c.service in ("s3", "sagemaker")]
    for role in (d.trigger_role(), d.events_role()):
        requests = [
            r
            for c in (calls if role == d.trigger_role() else results)
            for r in d.mapper.requests(role, c.service, c.operation, c.params)
        ]
        outcomes = d.evaluate_all(requests)
        assert not denied(outcomes), "\n".join(denied(outcomes))
        assert any(r.action == "kms:Decrypt" for r in requests)  # the archive's key
        for request in requests:
            if request.action == "sagemaker:UpdateModelPackage":
                for status in ("PendingManualApproval", None):
                    bad = {"sagemaker:ModelApprovalStatus": status} if status else {}
                    allowed = d.evaluate(
                        Request(role, request.action, request.resources, bad, "pending")
                    ).allowed
                    assert allowed is (status is None), status  # metadata only: allowed
        elsewhere = [
            ("s3:GetObject", f"arn:aws:s3:::{data_bucket}/team-a/train/part-0"),
            ("s3:GetObject", f"arn:aws:s3:::{bucket}/team-a/{parent}/{parent}/output/model.tar.gz"),
            ("s3:PutObject", f"arn:aws:s3:::{bucket}/team-a/{parent}/output/output.tar.gz"),
        ]
        for action, arn in elsewhere:
            assert not d.evaluate(Request(role, action, (arn,), {}, "elsewhere")).allowed, arn
