"""Every request the platform's principals make is allowed by the policies it deploys; every
deny the README promises is a deny (tried with a request that would otherwise pass).

The trigger's requests are recorded from the trigger itself (every template x allowed instance
type, per team door, then describe, list and stop; the admins' list, describe and stop), the
job-events function's from its handler, the training roles' from what SageMaker does for each
job the trigger asked for, the clients' from the README's rights table per ``ftl`` command.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.authz.conftest import deployment
from tests.authz.harness import (
    CONFIGURATIONS,
    Deployment,
    answered_client,
    denied,
    record_client,
    training_role_requests,
    trust_request,
)
from tests.lambda_support import client
from testsupport.authz.aws_managed import BATCH_SAGEMAKER_SLR, BATCH_SAGEMAKER_SLR_POLICY
from testsupport.authz.evaluate import Policy, Request, evaluate, statements
from testsupport.authz.policies import PolicySet
from testsupport.authz.requests import ACCOUNT, REGION

CONFIGS = list(CONFIGURATIONS)
TEAM_CONFIGS = [c for c in CONFIGS if "ftl:teams" in CONFIGURATIONS[c][0]]
QUEUE_CONFIGS = [c for c in CONFIGS if CONFIGURATIONS[c][0].get("ftl:scheduler") == "queue"]


def trigger_requests(d: Deployment, run: Any) -> list[Request]:
    role = d.trigger_role()
    return [
        r for _, c in run.calls for r in d.mapper.requests(role, c.service, c.operation, c.params)
    ]


def training_requests(d: Deployment, run: Any, name: str) -> list[Request]:
    via = CONFIGURATIONS[name][0].get("ftl:network", "none") != "none"
    return [
        r for job in run.created for r in training_role_requests(job, d.key_arn(), via_endpoint=via)
    ]


# ----------------------------------------------------------------------------- allowed
@pytest.mark.parametrize("name", CONFIGS)
def test_every_trigger_request_is_allowed(name, trigger_run):
    d, run = deployment(name), trigger_run(name)
    outcomes = d.evaluate_all(trigger_requests(d, run))
    assert len(outcomes) > 40
    # Quota-aware submit reads the account's SageMaker quotas (once per warm container).
    assert any(c.operation == "ListServiceQuotas" for _, c in run.calls)
    assert not denied(outcomes), "\n".join(denied(outcomes))


@pytest.mark.parametrize("name", QUEUE_CONFIGS)
def test_a_queued_jobs_estimate_is_read_and_its_reads_allowed(name, trigger_run):
    """Queue mode's estimated start (describe and list of a Queued job): the Batch listings
    and the ledger's BatchGetItem are in the recorded run, and allowed; a direct platform's
    trigger may not BatchGetItem."""
    d, run = deployment(name), trigger_run(name)
    estimated = [
        job
        for answer in run.responses
        for job in answer.get("jobs", [answer])
        if job.get("estimated_start_by") is not None
    ]
    assert estimated, "no Queued job got an estimate: the run drove no estimate's reads"
    reads = [
        r
        for r in trigger_requests(d, run)
        if r.action in ("dynamodb:BatchGetItem", "batch:ListServiceJobs")
    ]
    assert {r.action for r in reads} == {"dynamodb:BatchGetItem", "batch:ListServiceJobs"}
    assert not denied(d.evaluate_all(reads))
    direct = deployment("default")
    table = direct.trigger_env()["FTL_JOB_TABLE"]
    params = {"RequestItems": {table: {"Keys": [{"pk": {"S": "job#x"}}]}}}
    as_direct = direct.mapper.requests(direct.trigger_role(), "dynamodb", "BatchGetItem", params)
    assert denied(direct.evaluate_all(as_direct))


@pytest.mark.parametrize("name", CONFIGS)
def test_every_training_role_request_is_allowed(name, trigger_run):
    d, run = deployment(name), trigger_run(name)
    outcomes = d.evaluate_all(training_requests(d, run, name))
    assert len(outcomes) > 300
    assert not denied(outcomes), "\n".join(denied(outcomes)[:20])


@pytest.mark.parametrize("name", CONFIGS)
def test_sagemaker_may_assume_each_jobs_role(name, trigger_run):
    d, run = deployment(name), trigger_run(name)
    trust = {
        arn: props["AssumeRolePolicyDocument"]
        for stack, logical, props in d.stacks.resources("AWS::IAM::Role")
        for arn in [d.stacks.get_att(stack, logical, "Arn")]
    }
    for job in run.created:
        request = trust_request(job, job["TrainingJobName"])
        policy = Policy(trust[job["RoleArn"]], "trust", "resource")
        decision = evaluate(request, [], {job["RoleArn"]: [policy]}, account=ACCOUNT)
        assert decision.allowed, decision.reason


def _events_requests(d: Deployment, calls: list[Any]) -> list[Request]:
    role = d.events_role()
    return [r for c in calls for r in d.mapper.requests(role, c.service, c.operation, c.params)]


@pytest.mark.parametrize("name", ["default", "teams", *QUEUE_CONFIGS])
def test_every_job_events_request_is_allowed(name, events_run):
    d = deployment(name)
    requests = _events_requests(d, events_run(name))
    actions = {r.action for r in requests}
    # a finished job is published; a queued job's start only updates the ledger
    direct = "queue" not in name
    # a capacity chain's attempt ran out of spot capacity (direct), or Batch ended a queued
    # chained attempt (queue): the chain alias is asked
    expected = {"dynamodb:UpdateItem", "lambda:InvokeFunction"} | (
        # a job's notices and end (SNS and EventBridge), and a Completed job's model version
        # (issue 27): looked for, created, described
        {
            "sns:Publish",
            "events:PutEvents",
            "sagemaker:ListModelPackages",
            "sagemaker:CreateModelPackage",
            "sagemaker:DescribeModelPackage",
        }
        if direct
        else set()
    )
    assert expected <= actions, actions
    outcomes = d.evaluate_all(requests)
    assert not denied(outcomes), "\n".join(denied(outcomes))


@pytest.mark.parametrize("name", QUEUE_CONFIGS)
def test_a_queued_chains_next_attempt_is_allowed(name, trigger_run, authz_sandbox):
    """Queue mode's chain path through the trigger's ``chain`` alias: ``advance`` of a chained
    job whose service job Batch ended (the job-events function held it) looks at it as
    describe does (DescribeServiceJob, DescribeTrainingJob of Batch's ``AWSBatch...``
    training job) and submits the next attempt's service job (``<job>-a2``)."""
    import uuid

    from tests.authz.harness import trigger
    from tests.lambda_support import FakeContext
    from testsupport.authz.record import recording

    d, _ = deployment(name), trigger_run(name)
    door = CONFIGURATIONS[name][1][0]
    stand_in = authz_sandbox.batch
    submit = {"action": "submit", "template": "distilbert-chain", "capacity": ["spot", "on-demand"]}
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):
        with recording() as started:  # attempt 1's service job (its payload's tags)
            job = module.handler(
                {**submit, "client_token": uuid.uuid4().hex[:12]}, FakeContext(alias=door or None)
            )
        assert "error" not in job, job
        first = stand_in.jobs[job["batch_job_id"]]
        stand_in.tick()
        assert first.training_arn, "the stand-in did not start attempt 1's training job"
        # the spot wait ran out: SageMaker stops the training job and Batch says FAILED
        stand_in.finish_training_job(
            first.training_arn.rsplit("/", 1)[-1], "Stopped", secondary="MaxWaitTimeExceeded"
        )
        assert first.status == "FAILED"
        with recording() as calls:
            answer = module.handler(
                {"action": "advance", "job_name": job["job_name"]}, FakeContext(alias="chain")
            )
    assert answer["advanced"] and answer["attempt"] == 2, answer
    ops = {c.operation for c in calls}
    assert {"DescribeServiceJob", "DescribeTrainingJob", "SubmitServiceJob"} <= ops, ops
    (described,) = [c.params for c in calls if c.operation == "DescribeTrainingJob"]
    assert described["TrainingJobName"].startswith("AWSBatch"), described
    (submitted,) = [c.params for c in calls if c.operation == "SubmitServiceJob"]
    assert submitted["jobName"] == f"{job['job_name']}-a2"
    recorded = [(door, c) for c in started] + [("chain", c) for c in calls]
    requests = trigger_requests(d, type("Run", (), {"calls": recorded})())
    outcomes = d.evaluate_all(requests)
    assert {"batch:DescribeServiceJob", "sagemaker:DescribeTrainingJob"} <= {
        o.request.action for o in outcomes
    }
    assert "batch:SubmitServiceJob" in {o.request.action for o in outcomes}
    assert not denied(outcomes), "\n".join(denied(outcomes))


@pytest.mark.parametrize("name", ["default", "queue", "teams"])
def test_the_sweep_and_the_ends_the_trigger_announces_are_allowed(name, trigger_run, authz_sandbox):
    """The scheduled sweep through the ``sweep`` alias (issue 30): it reads the ledger's
    needs-care index, looks for a stale claim by name (ListTrainingJobs, or Batch's
    ListServiceJobs in queue mode), ends it as FailedToStart (the usage and token in one
    transaction) and announces that end and an end whose announcement was owed (SNS Publish
    with the deduplication id); every request is allowed by the deployed policies."""
    from datetime import timedelta

    from ftl_ledger.items import to_item
    from ftl_ledger.job_codec import from_record
    from jobmodel.jobs import claims as CL
    from jobmodel.jobs import effects as E
    from tests.authz.harness import trigger
    from tests.lambda_support import FakeContext
    from testsupport.authz.record import recording

    d, _ = deployment(name), trigger_run(name)
    door = CONFIGURATIONS[name][1][0]
    ddb = client("dynamodb", authz_sandbox.endpoint)
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):
        table = module.RUNTIME.table_name
        client("sns", authz_sandbox.endpoint).create_topic(
            Name=module.RUNTIME.topic_arn.rsplit(":", 1)[-1]
        )
        submit = {"action": "submit", "template": "distilbert-spot", "client_token": name[:8]}
        job = module.handler(submit, FakeContext(alias=door or None))
        assert "error" not in job, job
        record = module.LAUNCHER.ledger.get_job(job["job_name"])
        for suffix, fields in (
            ("stuck", {"status": "Submitting", CL.CARE: CL.CARE_VALUE}),
            ("ended", {"status": "Completed", CL.CARE: CL.CARE_VALUE}),
        ):
            other = f"{job['job_name'][:50]}-{suffix}"
            item = {**record, **fields, "job_name": other, "pk": f"job#{other}"}
            item.pop("client_token", None)
            item.pop("batch_job_id", None)
            if suffix == "ended":
                item[E.OWED] = E.owed_at_end(from_record(item))
            ddb.put_item(TableName=table, Item=to_item(item))
        later = module.RUNTIME.now() + timedelta(seconds=CL.CLAIM_BOUND_S + 1)
        mp.setattr(module.RUNTIME, "now", lambda: later)
        with recording() as calls:
            answer = module.handler({"action": "sweep"}, FakeContext(alias="sweep"))
    assert "error" not in answer, answer
    assert answer["failed_to_start"] >= 1, answer
    ops = {f"{c.service}:{c.operation}" for c in calls}
    look = "batch:ListServiceJobs" if "queue" in name else "sagemaker:ListTrainingJobs"
    # a team's claim gives its usage back in the same transaction as its end
    end = "dynamodb:TransactWriteItems" if "teams" in name else "dynamodb:UpdateItem"
    assert {"dynamodb:Query", end, "sns:Publish", look} <= ops, ops
    published = [c.params for c in calls if c.operation == "Publish"]
    assert all(E.DEDUP_ATTRIBUTE in p["MessageAttributes"] for p in published)
    requests = trigger_requests(d, type("Run", (), {"calls": [("sweep", c) for c in calls]})())
    outcomes = d.evaluate_all(requests)
    assert not denied(outcomes), "\n".join(denied(outcomes))


def test_only_the_sweeps_schedule_may_invoke_the_sweep_alias():
    d = deployment("teams")
    (rule,) = [
        d.stacks.get_att(stack, logical, "Arn")
        for stack, logical, props in d.stacks.resources("AWS::Events::Rule")
        if logical.startswith("LauncherSweepSchedule")
    ]
    assert d.evaluate(_rule_invokes(_alias_arn(d, "sweep"), rule)).allowed
    other = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/another"
    assert not d.evaluate(_rule_invokes(_alias_arn(d, "sweep"), other)).allowed


def _prices_requests(d: Deployment, calls: list[Any]) -> list[Request]:
    role = str(d.function("PriceRefreshHandlerFunction")["Role"])
    return [r for c in calls for r in d.mapper.requests(role, c.service, c.operation, c.params)]


@pytest.mark.parametrize("name", ["default", "teams"])
def test_every_price_refresh_request_is_allowed(name, prices_run):
    d = deployment(name)
    requests = _prices_requests(d, prices_run(name))
    actions = {r.action for r in requests}
    assert {"pricing:GetProducts", "dynamodb:PutItem"} <= actions, actions
    outcomes = d.evaluate_all(requests)
    assert not denied(outcomes), "\n".join(denied(outcomes))


def test_the_price_refresh_writes_only_the_prices_item(prices_run):
    d = deployment("default")
    (put,) = [
        r for r in _prices_requests(d, prices_run("default")) if r.action == "dynamodb:PutItem"
    ]
    other = Request(put.principal, put.action, put.resources, {"dynamodb:LeadingKeys": ["job#x"]})
    assert not d.evaluate(other).allowed


def _rule_invokes(fn_arn: Any, rule: Any) -> Request:
    """EventBridge invoking a function for one of its rules (the rule's ARN as the source)."""
    return Request(
        "events.amazonaws.com",
        "lambda:InvokeFunction",
        (fn_arn,),
        {"aws:SourceArn": rule},
        "EventBridge",
    )


def test_eventbridge_may_invoke_the_price_refresh_from_its_two_rules():
    d = deployment("default")
    fn = d.function("PriceRefreshHandlerFunction")
    fn_arn = d.stacks.get_att(fn["stack"], fn["logical"], "Arn")
    rules = [
        d.stacks.get_att(stack, logical, "Arn")
        for stack, logical, _ in d.stacks.resources("AWS::Events::Rule")
        if logical.startswith("PriceRefresh")
    ]
    assert len(rules) == 2
    for rule in rules:
        assert d.evaluate(_rule_invokes(fn_arn, rule)).allowed, rule


def _team_policy(d: Deployment, alias: str) -> Policy:
    flat = f"policy{alias}".replace("-", "").lower()
    (policy,) = [
        p for p in d.policies.managed.values() if flat in p.origin.replace("-", "").lower()
    ]
    return policy


def _alias_arn(d: Deployment, alias: str) -> str:
    fn = d.function("LauncherTriggerFunction")
    arn = d.stacks.get_att(fn["stack"], fn["logical"], "Arn")
    return f"{arn}:{alias}"


def http_requests(d: Deployment, principal: str) -> list[Request]:
    """``ftl --via http``: one signed request per route of the API (not a botocore call)."""
    from jobmodel.contract.routes import ROUTES

    (api,) = [d.stacks.ref(s, lg) for s, lg, _ in d.stacks.resources("AWS::ApiGatewayV2::Api")]
    out = []
    for route in ROUTES:
        path = route.glob.replace("*", "squad-1")
        arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{api}/$default/{route.method}{path}"
        out.append(Request(principal, "execute-api:Invoke", (arn,), {}, f"ftl --via http {path}"))
    return out


@pytest.mark.parametrize("name", TEAM_CONFIGS)
def test_every_client_request_of_a_team_member_is_allowed(name, authz_sandbox):
    """The client's calls recorded while it runs a day's commands (templates, submit,
    describe, list, queue, logs, stop, whoami), finding the launcher from the stack or
    given the alias, plus the HTTP API's routes; evaluated with the team's managed policy."""
    d = deployment(name)
    for door, principal in (
        ("team-team-a", f"arn:aws:iam::{ACCOUNT}:role/team-a-scientists"),
        ("team-team-b", f"arn:aws:iam::{ACCOUNT}:role/team-b-researchers"),
    ):
        policy = _team_policy(d, door)
        calls = []
        for find_by_stack in (False, True):
            with pytest.MonkeyPatch.context() as mp:
                calls += record_client(d, authz_sandbox, mp, door=door, find_by_stack=find_by_stack)
        ops = {f"{c.service}:{c.operation}" for c in calls}
        assert ops >= {
            "lambda:Invoke",
            "cloudformation:DescribeStacks",
            "logs:DescribeLogStreams",
            "logs:FilterLogEvents",
        }, ops
        requests = [
            r for c in calls for r in d.mapper.requests(principal, c.service, c.operation, c.params)
        ]
        # finding the launcher by stack invokes the unqualified function; a team member is
        # given the alias instead (docs/CLIENT.md), so only alias invokes are his to make
        requests = [
            r
            for r in requests
            if r.action != "lambda:InvokeFunction" or r.resources[0].endswith(f":{door}")
        ]
        requests += http_requests(d, principal)
        outcomes = d.evaluate_all(requests, extra_identity=[policy])
        assert len(outcomes) >= 10
        assert not denied(outcomes), "\n".join(denied(outcomes))


@pytest.mark.parametrize("name", ["default", "queue"])
def test_services_may_invoke_what_they_trigger(name):
    d = deployment(name)
    events_fn = d.function("JobEventsHandlerFunction")
    fn_arn = d.stacks.get_att(events_fn["stack"], events_fn["logical"], "Arn")
    # every rule that targets the job-events function (SageMaker's training and tuning jobs';
    # queue mode: Batch's too)
    rules = [
        d.stacks.get_att(stack, logical, "Arn")
        for stack, logical, props in d.stacks.resources("AWS::Events::Rule")
        if any(t.get("Arn") == fn_arn for t in props.get("Targets", []))
    ]
    assert len(rules) == (3 if name == "queue" else 2), rules
    for rule in rules:
        decision = d.evaluate(_rule_invokes(fn_arn, rule))
        assert decision.allowed, (
            f"EventBridge may not invoke the job-events function: {decision.reason}"
        )
    (api,) = [d.stacks.ref(s, lg) for s, lg, _ in d.stacks.resources("AWS::ApiGatewayV2::Api")]
    api_call = Request(
        "apigateway.amazonaws.com",
        "lambda:InvokeFunction",
        (_alias_arn(d, "http"),),
        {"aws:SourceArn": f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{api}/$default/POST/jobs"},
        "API Gateway",
    )
    assert d.evaluate(api_call).allowed, d.evaluate(api_call).reason


@pytest.mark.parametrize("name", QUEUE_CONFIGS)
def test_batch_service_linked_role_may_start_every_payload(name, trigger_run):
    """Queue mode: AWS Batch creates, tags, describes and stops the training job with its
    service-linked role (AWS's managed policy) and passes the payload's role to SageMaker."""
    d, run = deployment(name), trigger_run(name)
    slr = Policy(BATCH_SAGEMAKER_SLR_POLICY, "AWSBatchServiceRolePolicyForSageMaker")
    assert run.created and all(job["_queued"] for job in run.created)
    checked = 0
    for job in run.created:
        # Batch's name for the job, as given (AWS's own policy names "AWSBatch*", so Batch's
        # CreateTrainingJob is authorized on the name as given)
        batch_name = job["TrainingJobName"]
        params = {k: v for k, v in job.items() if not k.startswith("_")}
        mapper = type(d.mapper)(encrypted=d.mapper.encrypted)
        requests = mapper.requests(BATCH_SAGEMAKER_SLR, "sagemaker", "CreateTrainingJob", params)
        requests += mapper.requests(
            BATCH_SAGEMAKER_SLR, "sagemaker", "StopTrainingJob", {"TrainingJobName": batch_name}
        )
        as_given = [
            r for r in requests if "AWSBatch" in r.resources[0] or r.action == "iam:PassRole"
        ]
        for request in as_given:
            decision = evaluate(request, [slr], {}, account=ACCOUNT)
            assert decision.allowed, (request.action, request.resources, decision.reason)
            checked += 1
    assert checked >= 4 * len(run.created)


# ----------------------------------------------------------------------------- promised denies
def _create(run: Any, instance_type: str | None = None) -> dict[str, Any]:
    for _, call in run.calls:
        if call.operation == "CreateTrainingJob" and (
            instance_type is None or call.params["ResourceConfig"]["InstanceType"] == instance_type
        ):
            return copy.deepcopy(call.params)
    raise AssertionError("no CreateTrainingJob recorded")


def _create_allowed(d: Deployment, params: dict[str, Any]) -> bool:
    requests = d.mapper.requests(d.trigger_role(), "sagemaker", "CreateTrainingJob", params)
    return all(d.evaluate(r).allowed for r in requests)


CREATE_DENIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "an instance type outside the catalog": lambda p: p["ResourceConfig"].update(
        InstanceType="ml.t3.medium"
    ),
    "remote debugging": lambda p: p.update(RemoteDebugConfig={"EnableRemoteDebug": True}),
    "a VPC config with network=none": lambda p: p.update(
        VpcConfig={"Subnets": ["subnet-0abc"], "SecurityGroupIds": ["sg-0abc"]}
    ),
    "output under another KMS key": lambda p: p["OutputDataConfig"].update(
        KmsKeyId=f"arn:aws:kms:{REGION}:{ACCOUNT}:key/99999999-9999-9999-9999-999999999999"
    ),
    "another platform's tag": lambda p: p.update(
        Tags=[t if t["Key"] != "ftl:platform" else {**t, "Value": "other"} for t in p["Tags"]]
    ),
    "a runtime beyond the catalog's longest": lambda p: p["StoppingCondition"].update(
        MaxRuntimeInSeconds=30 * 24 * 3600
    ),
}


@pytest.mark.parametrize("what", list(CREATE_DENIES))
def test_the_trigger_cannot_create_outside_the_catalog(what, trigger_run):
    d, run = deployment("default"), trigger_run("default")
    params = _create(run)
    assert _create_allowed(d, params)  # the same request, unchanged, passes
    CREATE_DENIES[what](params)
    assert not _create_allowed(d, params), what


def test_an_ebs_instance_type_needs_the_platform_volume_key(trigger_run):
    d, run = deployment("default"), trigger_run("default")
    params = _create(run, "ml.p3.2xlarge")
    assert params["ResourceConfig"].get("VolumeKmsKeyId")
    assert _create_allowed(d, params)
    del params["ResourceConfig"]["VolumeKmsKeyId"]
    assert not _create_allowed(d, params)


def test_pass_role_only_to_sagemaker_and_only_the_training_role(trigger_run):
    d, run = deployment("teams"), trigger_run("teams")
    params = _create(run)
    role = params["RoleArn"]
    ok = Request(
        d.trigger_role(),
        "iam:PassRole",
        (role,),
        {"iam:PassedToService": "sagemaker.amazonaws.com"},
    )
    assert d.evaluate(ok).allowed
    assert not d.evaluate(
        Request(ok.principal, ok.action, ok.resources, {"iam:PassedToService": "ec2.amazonaws.com"})
    ).allowed
    other = f"arn:aws:iam::{ACCOUNT}:role/admin"
    assert not d.evaluate(Request(ok.principal, ok.action, (other,), ok.context)).allowed


def test_another_platforms_jobs_cannot_be_described_or_stopped(trigger_run):
    d = deployment("default")
    trigger_run("default")
    job = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/someone-elses-job"
    for action in ("sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"):
        ours = Request(d.trigger_role(), action, (job,), {"aws:ResourceTag/ftl:platform": "ftl"})
        theirs = Request(
            d.trigger_role(), action, (job,), {"aws:ResourceTag/ftl:platform": "other"}
        )
        assert d.evaluate(ours).allowed and not d.evaluate(theirs).allowed


def _team_job(run: Any, team: str) -> dict[str, Any]:
    return next(j for j in run.created if j["TrainingJobName"].startswith(f"{team}-"))


def _swap_team(requests: list[Request], mine: str, theirs: str) -> list[Request]:
    return [
        Request(
            r.principal,
            r.action,
            tuple(
                x.replace(f"/{mine}-", f"/{theirs}-")
                .replace(f"/{mine}/", f"/{theirs}/")
                .replace(f":{mine}-", f":{theirs}-")
                for x in r.resources
            ),
            r.context,
            r.source,
        )
        for r in requests
    ]


def test_a_team_role_cannot_touch_another_teams_data_checkpoints_or_logs(trigger_run):
    d, run = deployment("teams"), trigger_run("teams")
    job = _team_job(run, "team-a")
    own = [
        r
        for r in training_role_requests(job, d.key_arn(), via_endpoint=False)
        if r.action.startswith(
            (
                "s3:GetObject",
                "s3:PutObject",
                "s3:DeleteObject",
                "logs:PutLogEvents",
                "logs:CreateLogStream",
            )
        )
        and "team-a" in r.resources[0]
    ]
    assert {r.action for r in own} >= {"s3:GetObject", "s3:PutObject", "logs:PutLogEvents"}
    assert all(d.evaluate(r).allowed for r in own)
    for r in _swap_team(own, "team-a", "team-b"):
        assert "team-b" in r.resources[0]
        assert not d.evaluate(r).allowed, (r.action, r.resources)


def test_a_team_role_logs_only_to_its_own_mlflow_server(trigger_run):
    """Issue 27: with a tracking server per team, a team's role may make every MLflow call
    of its jobs on its own server and none on the other team's."""
    d, run = deployment("teams"), trigger_run("teams")
    job = _team_job(run, "team-a")
    own = [
        r
        for r in training_role_requests(job, d.key_arn(), via_endpoint=False)
        if r.action.startswith("sagemaker-mlflow:")
    ]
    assert own and all(r.resources[0].endswith("/ftl-team-a-mlflow") for r in own)
    assert {r.action for r in own} >= {"sagemaker-mlflow:CreateRun", "sagemaker-mlflow:LogBatch"}
    assert all(d.evaluate(r).allowed for r in own)
    for r in own:
        theirs = r.resources[0].replace("/ftl-team-a-mlflow", "/ftl-team-b-mlflow")
        other = Request(r.principal, r.action, (theirs,), r.context, r.source)
        assert not d.evaluate(other).allowed, (r.action, theirs)


def test_every_tracked_configuration_logs_its_jobs(trigger_run):
    """Issue 27: the tracked configurations' jobs carry the MLflow environment, so the
    training-role check above covers their MLflow calls."""
    for name, prefix in (
        ("default", "sagemaker-mlflow:"),
        ("teams", "sagemaker-mlflow:"),
        ("queue", "sagemaker:CallMlflowAppApi"),
    ):
        d, run = deployment(name), trigger_run(name)
        requests = training_requests(d, run, name)
        mlflow = [r for r in requests if r.action.startswith(prefix)]
        assert mlflow, name
        assert not denied(d.evaluate_all(mlflow)), name


def test_buckets_refuse_uploads_under_other_encryption(trigger_run):
    d, run = deployment("default"), trigger_run("default")
    job = _create(run)
    (put,) = [
        r
        for r in training_role_requests(job, d.key_arn(), via_endpoint=False)
        if r.action == "s3:PutObject"
        and "no headers" in r.source
        and "checkpoint" in r.resources[0]
    ]
    assert d.evaluate(put).allowed  # a plain upload gets the bucket default, the platform key
    sse = "s3:x-amz-server-side-encryption"
    for headers in (
        {sse: "AES256"},
        {sse: "aws:kms:dsse"},
        {sse: "aws:kms"},  # no key: S3 would use aws/s3
        {sse: "aws:kms", f"{sse}-aws-kms-key-id": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/other"},
        {f"{sse}-customer-algorithm": "AES256"},
    ):
        req = Request(put.principal, put.action, put.resources, headers, put.source)
        decision = d.evaluate(req)
        assert not decision.allowed and decision.denied_by, headers


@pytest.mark.parametrize("name", TEAM_CONFIGS)
def test_a_team_member_cannot_use_another_teams_door_or_the_http_alias(name):
    d = deployment(name)
    principal = f"arn:aws:iam::{ACCOUNT}:role/team-a-scientists"
    policy = _team_policy(d, "team-team-a")
    own = Request(principal, "lambda:InvokeFunction", (_alias_arn(d, "team-team-a"),))
    assert d.evaluate(own, extra_identity=[policy]).allowed
    for alias in ("team-team-b", "admin", "http", "chain", "sweep"):
        other = Request(principal, "lambda:InvokeFunction", (_alias_arn(d, alias),))
        assert not d.evaluate(other, extra_identity=[policy]).allowed, alias
    # even beside a broad invoke right granted elsewhere, the http door stays closed
    broad = Policy(
        {"Statement": [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": "*"}]},
        "broad",
    )
    http = Request(principal, "lambda:InvokeFunction", (_alias_arn(d, "http"),))
    assert not d.evaluate(http, extra_identity=[policy, broad]).allowed


def _topic_arn(d: Deployment, team: str) -> str:
    (arn,) = [
        str(d.stacks.ref(stack, logical))
        for stack, logical, props in d.stacks.resources("AWS::SNS::Topic")
        if props.get("DisplayName") == f"Fine-tuning jobs of team {team}"
    ]
    return arn


@pytest.mark.parametrize("name", TEAM_CONFIGS)
def test_a_team_member_subscribes_to_its_own_topic_and_no_other(name):
    """Notifications (issue 27): team a's member subscribes its endpoints to team a's topic
    (and lists the subscriptions); team b's topic refuses it, even beside a broad SNS grant
    (the topic policy's deny), and a request without TLS is refused."""
    d = deployment(name)
    principal = f"arn:aws:iam::{ACCOUNT}:role/team-a-scientists"
    policy = _team_policy(d, "team-team-a")
    own, other = _topic_arn(d, "team-a"), _topic_arn(d, "team-b")
    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:team-a-alerts"
    calls = [
        ("Subscribe", {"TopicArn": own, "Protocol": "sqs", "Endpoint": queue}),
        ("ListSubscriptionsByTopic", {"TopicArn": own}),
    ]
    mine = [r for op, params in calls for r in d.mapper.requests(principal, "sns", op, params)]
    outcomes = d.evaluate_all(mine, extra_identity=[policy])
    assert not denied(outcomes), "\n".join(denied(outcomes))
    (cross,) = d.mapper.requests(
        principal, "sns", "Subscribe", {"TopicArn": other, "Protocol": "email", "Endpoint": "x@y"}
    )
    assert not d.evaluate(cross, extra_identity=[policy]).allowed
    broad = Policy(
        {"Statement": [{"Effect": "Allow", "Action": "sns:*", "Resource": "*"}]}, "broad"
    )
    decision = d.evaluate(cross, extra_identity=[policy, broad])
    assert not decision.allowed and decision.denied_by, decision
    # team b's own member may (the deny names every principal but the team's and the admins')
    member_b = f"arn:aws:iam::{ACCOUNT}:role/team-b-research"
    own_b = Request(member_b, "sns:Subscribe", (other,), cross.context)
    assert d.evaluate(own_b, extra_identity=[_team_policy(d, "team-team-b")]).allowed
    plain = Request(principal, "sns:Subscribe", (own,), {"aws:SecureTransport": False})
    assert not d.evaluate(plain, extra_identity=[policy]).allowed


@pytest.mark.parametrize("name", ["default", "teams"])
def test_the_functions_put_only_the_platforms_own_source_on_the_bus(name):
    d = deployment(name)
    entry = {"Source": "ftl.ftl", "DetailType": "FTL Job Ended", "Detail": "{}"}
    for role in (d.trigger_role(), d.events_role()):
        (own,) = d.mapper.requests(role, "events", "PutEvents", {"Entries": [entry]})
        assert d.evaluate(own).allowed, role
        forged = {**entry, "Source": "aws.sagemaker"}
        (other,) = d.mapper.requests(role, "events", "PutEvents", {"Entries": [forged]})
        assert not d.evaluate(other).allowed, role


# ----------------------------------------------------------------------------- regressions
def _restored(d: Deployment, sid: str, change: Callable[[dict[str, Any]], None]) -> Deployment:
    """A copy of the deployment whose statement ``sid`` is changed back to an old form."""
    twin = copy.copy(d)
    twin.policies = copy.deepcopy(d.policies)
    found = 0
    for policies in [*twin.policies.identity.values(), *twin.policies.resource.values()]:
        for policy in policies:
            for st in statements(policy.document):
                if st.get("Sid") == sid:
                    change(st)  # type: ignore[arg-type]
                    found += 1
    assert found, sid
    return twin


def test_regression_deprecated_kms_keys_refuse_every_direct_job(trigger_run):
    d, run = deployment("default"), trigger_run("default")

    def old(st: dict[str, Any]) -> None:
        st["Condition"]["ArnEquals"] = {
            "sagemaker:OutputKmsKey": st["Condition"]["ArnEquals"]["sagemaker:OutputKmsKeyArn"]
        }

    twin = _restored(d, "CreateCatalogJobsOnly", old)
    assert denied(twin.evaluate_all(trigger_requests(twin, run)))
    assert not denied(d.evaluate_all(trigger_requests(d, run)))


def test_regression_queue_grants_without_the_service_job_refuse_queueing(trigger_run):
    d, run = deployment("queue"), trigger_run("queue")
    queue_arn = d.trigger_env()["FTL_JOB_QUEUE"]

    def old(policy_set: PolicySet) -> None:
        for policies in policy_set.identity.values():
            for policy in policies:
                for st in statements(policy.document):
                    actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                    if "batch:SubmitServiceJob" in actions:
                        st["Resource"] = queue_arn
                    if "batch:DescribeServiceJob" in actions:
                        st["Resource"] = f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/*"

    twin = copy.copy(d)
    twin.policies = copy.deepcopy(d.policies)
    old(twin.policies)
    refused = {
        line.split(" ")[1] for line in denied(twin.evaluate_all(trigger_requests(twin, run)))
    }
    assert {"batch:SubmitServiceJob", "batch:DescribeServiceJob"} <= refused


def test_regression_without_the_team_index_a_team_list_is_refused(trigger_run):
    d, run = deployment("teams"), trigger_run("teams")

    def old(st: dict[str, Any]) -> None:
        st["Resource"] = [r for r in st["Resource"] if not r.endswith("/index/by-team")]

    twin = _restored(d, "JobLedger", old)
    refused = denied(twin.evaluate_all(trigger_requests(twin, run)))
    assert refused and all("dynamodb:Query" in line and "by-team" in line for line in refused)


def test_regression_if_exists_upload_rules_refuse_plain_uploads(trigger_run):
    d, run = deployment("default"), trigger_run("default")

    def old(st: dict[str, Any]) -> None:
        if "StringNotEquals" in st["Condition"]:  # one policy serves the bucket and its objects
            st["Condition"] = {"StringNotEqualsIfExists": st["Condition"]["StringNotEquals"]}

    twin = _restored(d, "DenyUploadsNotSseKms", old)
    refused = denied(twin.evaluate_all(training_requests(twin, run, "default")))
    assert refused and all(
        "s3:PutObject" in line and "DenyUploadsNotSseKms" in line for line in refused
    )
    assert any("no headers" in line for line in refused)


def test_regression_one_log_grant_for_every_stream_lets_a_team_write_anothers_logs(trigger_run):
    d, run = deployment("teams"), trigger_run("teams")
    group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs:*"

    def old(st: dict[str, Any]) -> None:
        st["Resource"] = group

    twin = _restored(d, "WriteOwnJobsLogStreams", old)
    job = _team_job(run, "team-a")
    (put,) = [
        r
        for r in training_role_requests(job, d.key_arn(), via_endpoint=False)
        if r.action == "logs:PutLogEvents"
    ]
    (theirs,) = _swap_team([put], "team-a", "team-b")
    assert not d.evaluate(theirs).allowed
    assert twin.evaluate(theirs).allowed  # the old grant: team A writes into team B's job logs


@pytest.mark.parametrize("name", TEAM_CONFIGS)
def test_the_admins_preflight_reads_are_allowed(name, authz_sandbox):
    """``ftl doctor`` run by an admin against the deployment: its recorded calls (stack
    outputs of both stacks, the quotas from the sandbox's Service Quotas stand-in, the
    service-linked role, the CDK bootstrap's version parameter, the caller's account, the
    launcher through the admin alias) are allowed by the admins' managed policy."""
    import io

    from botocore.response import StreamingBody

    from ftl_client import LauncherClient, doctor
    from testsupport.authz.record import recording

    d = deployment(name)
    stack_names = sorted(d.stacks.templates)
    launcher = next(s for s in stack_names if s.endswith("-launcher"))
    template = {"name": "distilbert-spot", "instance_types": ["ml.g5.xlarge"], "spot": True}
    answers = [{"templates": [{**template, "default_instance_type": "ml.g5.xlarge"}]}]
    answers.append({"checks": [{"check": "price", "price_usd_per_hour": 1.0}]})

    class Http:
        status_code, headers = 200, {}

    def invoke(**_):
        body = json.dumps(answers.pop(0)).encode()
        return Http(), {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(body), len(body))}

    def stacks(**_):
        outputs = [{"OutputKey": "PlatformVersion", "OutputValue": "0"}]
        return Http(), {"Stacks": [{"StackName": launcher, "Outputs": outputs}]}

    def role(**_):
        return Http(), {"Role": {"RoleName": "AWSServiceRoleForAWSBatchWithSagemaker"}}

    def bootstrap(**_):
        return Http(), {"Parameter": {"Name": "/cdk-bootstrap/hnb659fds/version", "Value": "30"}}

    def identity(**_):
        return Http(), {"Account": ACCOUNT, "Arn": "arn:aws:sts::x", "UserId": "u"}

    clients = {
        service: answered_client(service, handlers)
        for service, handlers in (
            ("lambda", {"Invoke": invoke}),
            ("cloudformation", {"DescribeStacks": stacks}),
            ("iam", {"GetRole": role}),
            ("ssm", {"GetParameter": bootstrap}),
            ("sts", {"GetCallerIdentity": identity}),
        )
    }
    # ListServiceQuotas: the sandbox's Service Quotas stand-in answers it
    clients["service-quotas"] = answered_client(
        "service-quotas", {}, endpoint=authz_sandbox.endpoint
    )
    client = LauncherClient(
        launcher, function_name=_alias_arn(d, "admin"), region=REGION, clients=clients
    )
    with recording() as calls:
        report = doctor.run(client)
    ops = {f"{c.service}:{c.operation}" for c in calls}
    assert ops == {
        "cloudformation:DescribeStacks",
        "servicequotas:ListServiceQuotas",
        "iam:GetRole",
        "ssm:GetParameter",
        "sts:GetCallerIdentity",
        "lambda:Invoke",
    }, ops
    assert any(f.check == "quota" and f.status == "ok" for f in report.findings)
    assert any(f.check == "bootstrap" and f.status == "ok" for f in report.findings)
    principal = f"arn:aws:iam::{ACCOUNT}:role/platform-admin"
    requests = [
        r for c in calls for r in d.mapper.requests(principal, c.service, c.operation, c.params)
    ]
    outcomes = d.evaluate_all(requests, extra_identity=[_team_policy(d, "admin")])
    assert len(outcomes) >= 5
    assert not denied(outcomes), "\n".join(denied(outcomes))
