"""The model registry's calls (issue 27) are allowed by the policies the stacks deploy, from
every principal that makes them: the trigger registering a Completed job's version (a team's
describe completes the owed effect), listing a team's versions (``models``) and an admin's
review; a create of an approved version, or a review to anything but Approved and Rejected, is
denied. (The job-events function's registration: ``test_every_job_events_request_is_allowed``.)
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from tests.authz.conftest import deployment
from tests.authz.harness import denied, trigger
from tests.lambda_support import FakeContext, client
from testsupport.authz.evaluate import Request


def _requests(d: Any, calls: list[Any]) -> list[Request]:
    role = d.trigger_role()
    return [r for c in calls for r in d.mapper.requests(role, c.service, c.operation, c.params)]


@pytest.mark.parametrize("name", ["default", "teams"])
def test_the_triggers_registry_calls_are_allowed(name, authz_sandbox):
    from ftl_ledger.items import to_item
    from ftl_ledger.job_codec import from_record
    from jobmodel.jobs import effects as E
    from testsupport.authz.record import recording

    d = deployment(name)
    member, admin = ("team-team-a", "admin") if name == "teams" else ("", "")
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):
        client("sns", authz_sandbox.endpoint).create_topic(
            Name=module.RUNTIME.topic_arn.rsplit(":", 1)[-1]
        )
        submit = {"action": "submit", "template": "llm-lora", "client_token": f"reg{name}"[:12]}
        job = module.handler(submit, FakeContext(alias=member or None))
        assert "error" not in job, job
        record = module.LAUNCHER.ledger.get_job(job["job_name"])
        done = {**record, "status": "Completed", "training_job_arn": "arn:x"}
        done[E.OWED] = E.owed_at_end(from_record(done))
        client("dynamodb", authz_sandbox.endpoint).put_item(
            TableName=module.RUNTIME.table_name, Item=to_item(done)
        )
        describe = {"action": "describe", "job_name": job["job_name"]}
        with recording() as calls:
            described = module.handler(describe, FakeContext(alias=member or None))
            models = module.handler(
                {"action": "models", "template": "llm-lora"}, FakeContext(alias=member or None)
            )
            review = {"action": "review", "job_name": job["job_name"], "decision": "Approved"}
            refused = module.handler(review, FakeContext(alias=member)) if member else None
            reviewed = module.handler(review, FakeContext(alias=admin or None))
    assert described.get("model_package_arn"), described
    assert [m["model_package_arn"] for m in models["models"]][:1] == [
        described["model_package_arn"]
    ]
    if refused is not None:
        assert refused["error"]["type"] == "Forbidden", refused
    assert reviewed["model_approval_status"] == "Approved", reviewed
    requests = _requests(d, calls)
    actions = {r.action for r in requests}
    assert {
        "sagemaker:ListModelPackages",
        "sagemaker:CreateModelPackage",
        "sagemaker:DescribeModelPackage",
        "sagemaker:UpdateModelPackage",
    } <= actions, actions
    outcomes = d.evaluate_all(requests)
    assert not denied(outcomes), "\n".join(denied(outcomes))
    # what the conditions keep out: an approved create, a review to PendingManualApproval
    for request in requests:
        if request.action in ("sagemaker:CreateModelPackage", "sagemaker:UpdateModelPackage"):
            wrong = "Approved" if "Create" in request.action else "PendingManualApproval"
            bad = {**request.context, "sagemaker:ModelApprovalStatus": wrong}
            assert not d.evaluate(
                Request(request.principal, request.action, request.resources, bad, request.source)
            ).allowed
    # nor another platform's groups
    other = Request(
        d.trigger_role(),
        "sagemaker:DescribeModelPackage",
        ("arn:aws:sagemaker:us-east-1:123456789012:model-package/other-group/1",),
        {},
        "other",
    )
    assert not d.evaluate(other).allowed
