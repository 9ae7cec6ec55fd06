"""The constraints check (issue 26), beside the authorization check and on the same recorded
requests: every request the trigger and the client really sent, and property-based submits at
the boundaries rendered as the trigger renders them, against botocore's full service models
and the table of documented cross-field rules (testsupport/constraints). 0 findings; every
rule catches a planted violation; every pattern is translated or listed here."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobmodel as jm
from ftl_trigger.aws_operations import OPERATIONS
from ftl_trigger.backends.queue import service_jobs as batch
from jobmodel.capacity import chain as C
from jobmodel.jobs import notifications as N
from jobmodel.jobs.job import Job
from jobmodel.render import JobIdentity, render_attempt
from jobmodel.teams import Team
from tests.authz.conftest import deployment
from tests.authz.harness import CONFIGURATIONS, record_client
from testsupport import IMAGE_ENTRYPOINT
from testsupport.constraints.check import BATCH, SM, ConstraintsCheck
from testsupport.constraints.model import _compiled, service_model
from testsupport.constraints.rules import EVENTS, RULES, SNS, TUNER, planted

CHECK = ConstraintsCheck()
# Patterns of the platform's operations with no faithful translation: none today. A pattern
# added to a model that cannot be translated shows up here, not as a silent pass.
UNTRANSLATED: set[str] = set()


def _report(findings: list[Any]) -> str:
    return "\n".join(str(f) for f in findings[:40])


@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_every_recorded_trigger_request_meets_the_models_and_the_rules(name, trigger_run):
    run = trigger_run(name)
    requests = [(c.service, c.operation, c.params) for _, c in run.calls]
    ops = {op for _, op, _ in requests}
    assert ops & {"CreateTrainingJob", "SubmitServiceJob"}, ops
    findings = CHECK.all(requests)
    assert not findings, _report(findings)


def test_every_recorded_client_request_meets_the_models(authz_sandbox):
    d = deployment("teams")
    calls = []
    for find_by_stack in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            calls += record_client(
                d, authz_sandbox, mp, door="team-team-a", find_by_stack=find_by_stack
            )
    findings = CHECK.all((c.service, c.operation, c.params) for c in calls)
    assert len(calls) >= 8 and not findings, _report(findings)


# The job-events function's and the price-refresh function's calls, as the authorization check
# records them (tests/authz/harness.py): the ledger's updates, the chain alias's Invoke, the
# SNS notice, the Price List reads and the prices item.
EVENTS_CONFIGS = ["default", "teams", "queue", "queue-quotashare-teams", "queue-fairshare-teams"]


def _checked(calls: list[Any]) -> list[Any]:
    check = ConstraintsCheck()
    findings = check.all((c.service, c.operation, c.params) for c in calls)
    assert set(check.untranslated) <= UNTRANSLATED, check.untranslated
    return findings


@pytest.mark.parametrize("name", EVENTS_CONFIGS)
def test_every_recorded_job_events_request_meets_the_models(name, events_run):
    calls = events_run(name)
    ops = {f"{c.service}:{c.operation}" for c in calls}
    assert {"dynamodb:UpdateItem", "lambda:Invoke"} <= ops, ops
    if "queue" not in name:  # the ends announced, on SNS and EventBridge (issue 27)
        assert {"sns:Publish", "events:PutEvents"} <= ops, ops
    findings = _checked(calls)
    assert not findings, _report(findings)


@pytest.mark.parametrize("name", ["default", "teams"])
def test_every_recorded_price_refresh_request_meets_the_models(name, prices_run):
    calls = prices_run(name)
    ops = {f"{c.service}:{c.operation}" for c in calls}
    assert {"pricing:GetProducts", "dynamodb:PutItem"} <= ops, ops
    findings = _checked(calls)
    assert not findings, _report(findings)


# ------------------------------------------------------------ boundaries, property-based
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:1.0"
CATALOG = {
    n: s.with_image(IMAGE, entrypoint=IMAGE_ENTRYPOINT) for n, s in jm.shipped_catalog().items()
}
PLATFORM = jm.PlatformConfig(
    region="us-east-1",
    role_arn="arn:aws:iam::123456789012:role/train",
    data_bucket="ftl-data",
    checkpoint_bucket="ftl-ckpt",
    artifact_bucket="ftl-art",
    kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/k",
    subnets=("subnet-1",),
    security_groups=("sg-1",),
    source_s3_uri="s3://ftl-art/source/sourcedir.tar.gz",
    platform_tags={"owner": "platform"},
)
TEAM = Team(name="team-a", principals=("arn:aws:iam::123456789012:role/team-a-*",))
QUEUE = "arn:aws:batch:us-east-1:123456789012:job-queue/ftl-training"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
# Letters (tags allow \p{L}\p{Z}\p{N}_.:/=+-@), the BMP's and beyond it.
TAG_TEXT = st.text(
    st.one_of(
        st.sampled_from("aZ9_.:/=+-@ "),
        st.characters(categories=("L", "N")),
        st.sampled_from("\U0001d400\U00020000é"),
    ),
    max_size=260,
)


@st.composite
def submits(draw: Any) -> tuple[dict[str, Any], Any, str, Team | None]:
    spec = draw(st.sampled_from(sorted(CATALOG.values(), key=lambda s: s.name)))
    scheduler = draw(st.sampled_from(["direct", "queue"]))
    team = draw(st.sampled_from([None, TEAM]))
    payload: dict[str, Any] = {
        "template": spec.name,
        "instance_type": draw(st.sampled_from(spec.instance_types)),
        "job_name": draw(st.text(min_size=1, max_size=128)),
        "tags": draw(st.dictionaries(TAG_TEXT, TAG_TEXT, max_size=50)),
        "client_token": draw(st.from_regex(r"[A-Za-z0-9._:\-]{1,64}", fullmatch=True)),
    }
    if draw(st.booleans()):
        payload["spot"] = False
    overrides = {}
    for key, rule in spec.overridable.items():
        if rule.type == "str" and rule.choices is None:
            overrides[key] = draw(st.text(max_size=260))
        elif rule.choices is not None:
            overrides[key] = draw(st.sampled_from(rule.choices))
    payload["hyperparameters"] = overrides
    if spec.capacity_chain:
        payload["capacity"] = draw(
            st.lists(st.sampled_from(spec.capacity_chain), min_size=1, unique=True)
        )
    return payload, spec, scheduler, team


def rendered(payload: dict[str, Any], spec: Any, scheduler: str, team: Team | None):
    """What the trigger sends for ``payload``: CreateTrainingJob (every attempt of a chain) in
    direct mode, SubmitServiceJob in queue mode; None when validation refuses it."""
    try:
        req = jm.validate_submit(payload, CATALOG, PLATFORM, team=team, scheduler=scheduler)
    except jm.JobModelError:
        return None
    chained = bool(spec.capacity_chain)
    base_who = "arn:aws:sts::123456789012:assumed-role/team-a-x/\U0001d400" * 3
    name = jm.make_job_name(
        req.job_name_prefix, now=NOW, rand_hex="abcd",
        team=team.name if team else None, reserve=C.ATTEMPT_SUFFIX_LEN if chained else 0,
    )  # fmt: skip
    base = jm.render_create_training_job(
        req, spec, PLATFORM, job_name=name, team=team.name if team else None,
        requested_by=base_who,
    )  # fmt: skip
    creates = [base]
    if chained:
        steps, _ = C.plan_chain(
            spec, instance_type=req.instance_type, count=req.instance_count,
            chosen=req.capacity, spot=req.spot, plan=None,
        )  # fmt: skip
        who = JobIdentity(
            name=name, team=team.name if team else None, requested_by=base_who
        )  # fmt: skip
        creates = [
            render_attempt(req, spec, PLATFORM, step, None, job=replace(who, attempt=i))
            for i, step in enumerate(steps[: C.MAX_ATTEMPTS], start=1)
        ]
    if scheduler == "direct":
        return [("sagemaker", "CreateTrainingJob", c) for c in creates]
    out = []
    for create in creates:
        try:
            out.append(("batch", "SubmitServiceJob", batch.service_job_request(
                create, job_queue=QUEUE, job_name=create["TrainingJobName"],
                client_token=req.client_token, team=team.name if team else None,
                priority=int(req.priority or 0),
                tags={t["Key"]: t["Value"] for t in create.get("Tags", [])},
            )))  # fmt: skip
        except jm.JobModelError:  # the 10 KiB payload: refused before anything is claimed
            return None
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(submits())
def test_every_accepted_boundary_submit_renders_requests_aws_accepts(case):
    """Whatever validation accepts renders to requests with 0 findings: anything the check
    would flag is refused at submit and dry run (validate_submit is both doors' check)."""
    requests = rendered(*case)
    if requests is None:
        return
    findings = CHECK.all(requests)
    assert not findings, _report(findings)


# Issue 36: the evaluation job of a Completed job, derived from its request
# (jobmodel.evaluation.launch), is held to the same limits, with any policy validation accepts:
# the template's or one at the policy's own bounds (20 gated 200-character metrics, 5 golden
# sets of 500-character prefixes, 10 lm-eval tasks, a policy image, no spot, 28 days).
NAME = st.from_regex(r"[a-z][a-z0-9_]{0,39}", fullmatch=True)
GOLDEN_KEY = st.from_regex(r"[A-Za-z0-9!_.*'()\-][A-Za-z0-9!_.*'()/\-]{0,499}", fullmatch=True)


@st.composite
def policies(draw: Any, spec: Any) -> Any:
    from jobmodel.templates.evaluation_policy import EvaluationPolicy

    if spec.evaluation is not None and draw(st.booleans()):
        return spec.evaluation
    metric = st.from_regex(r"[a-z0-9_]{1,200}", fullmatch=True)
    gate = draw(st.lists(metric, max_size=20, unique=True))
    golden = draw(st.lists(st.tuples(NAME, GOLDEN_KEY), max_size=5, unique_by=lambda g: g[0]))
    tasks = draw(st.lists(NAME, min_size=1, max_size=10, unique=True))
    channels = st.sampled_from([None, *spec.channels])
    data = {
        "task_metrics": {"channel": draw(channels) or "validation"},
        "lm_eval": draw(st.sampled_from([None, {"tasks": tasks, "task_channel": draw(channels),
                                                "num_fewshot": 32, "limit": 1_000_000}])),
        "golden_sets": [{"name": n, "prefix": p.replace("..", "._")} for n, p in golden],
        "image_uri": draw(st.sampled_from([None, IMAGE])),
        "instance_type": draw(st.sampled_from([None, *spec.instance_types])),
        "spot": draw(st.booleans()),
        "max_runtime_seconds": draw(st.sampled_from([60, 3600, 2_419_200])),
        "gate": [{"metric": m, "min": -1e308, "max_regression": 1e308} for m in gate],
    }  # fmt: skip
    return EvaluationPolicy.from_dict(data, template=spec.name)


def evaluation_rendered(case: Any, policy: Any) -> list[Any] | None:
    """What the trigger sends to start the evaluation of ``case``'s job once it Completed
    (ftl_trigger.evaluation_flow: the request, or its service job in queue mode)."""
    from jobmodel.evaluation.launch import evaluation_request
    from jobmodel.jobs.job import Job

    payload, spec, scheduler, team = case
    requests = rendered(dict(payload), spec, "direct", team)
    if not requests:  # refused, or a chain with no step to run
        return None
    first = requests[0][2]
    name = first["TrainingJobName"]
    job = Job(job_name=name, status="Completed", rendered=json.dumps(first),
              training_job_name=name, team=team.name if team else None)  # fmt: skip
    prefix = f"s3://{PLATFORM.data_bucket}/" + (f"{team.name}/" if team else "")
    create = evaluation_request(job, policy, spec, team_data_prefix=prefix)
    assert len(create["HyperParameters"]) <= 100, len(create["HyperParameters"])
    if scheduler == "direct":
        return [("sagemaker", "CreateTrainingJob", create)]
    try:
        return [("batch", "SubmitServiceJob", batch.service_job_request(
            create, job_queue=QUEUE, job_name=create["TrainingJobName"],
            client_token=None, team=team.name if team else None, priority=0,
            tags={t["Key"]: t["Value"] for t in create.get("Tags", [])},
        ))]  # fmt: skip
    except jm.JobModelError:  # the 10 KiB payload: refused at the claim (recorded, not sent)
        return None


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_every_evaluation_request_meets_the_models_and_the_rules(data):
    case = data.draw(submits())
    requests = evaluation_rendered(case, data.draw(policies(case[1])))
    if requests is None:
        return
    findings = CHECK.all(requests)
    assert not findings, _report(findings)


@pytest.mark.parametrize("name", sorted(n for n, s in CATALOG.items() if s.evaluation))
def test_a_shipped_policys_evaluation_carries_the_jobs_hyperparameters_as_they_were(name):
    """The training's entries the evaluation keeps are the job's own strings (once encoded:
    gpt-tp-sharded's mp_parameters, encoded twice, was 265 characters, past the 256)."""
    spec = CATALOG[name]
    payload = {"template": name, "instance_type": spec.instance_types[0]}
    (parent,) = [p for _, _, p in rendered(payload, spec, "direct", None)[:1]]
    requests = evaluation_rendered((payload, spec, "direct", None), spec.evaluation)
    assert requests is not None
    create = requests[0][2]
    kept = {k: v for k, v in create["HyperParameters"].items() if not k.startswith("sagemaker_")}
    own = parent["HyperParameters"]
    assert {k: own[k] for k in kept if k in own} == {k: v for k, v in kept.items() if k in own}
    assert not CHECK.all(requests), _report(CHECK.all(requests))


# ------------------------------------------------------------ the rules themselves
def _good() -> dict[str, dict[str, Any]]:
    spec = CATALOG["distilbert-chain"]
    payload = {"template": spec.name, "instance_type": spec.instance_types[0]}
    (sm,) = [p for _, _, p in rendered(dict(payload), spec, "direct", None)[:1]]
    (queued,) = [p for _, _, p in rendered(dict(payload), spec, "queue", TEAM)[:1]]
    job = Job(job_name="j-1", team="nlp", template=spec.name, status="Completed")
    notice = N.job_notice(N.ENDED, job, "j-1/announce", region="us-east-1")
    entry = N.event_entry(notice, source=N.event_source("ftl"), bus="default")
    publish = {"TopicArn": "arn:aws:sns:us-east-1:123456789012:t", **N.sns_publish(notice)}
    from tests.authz.test_sweep_constraints import good_tuning_request

    return {
        SM: sm,
        BATCH: queued,
        EVENTS: {"Entries": [entry]},
        SNS: publish,
        TUNER: good_tuning_request(),
    }


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_each_rule_has_a_source_and_catches_a_planted_violation(rule):
    good = _good()[rule.applies_to]
    assert rule.source and ("http" in rule.source or "model" in rule.source)
    assert rule.problem(good) is None
    bad = planted(rule, good)
    assert rule.problem(bad) is not None, rule.name
    service, op = rule.applies_to.split()
    assert any(f.rule == rule.name for f in ConstraintsCheck().request(service, op, bad))


def test_a_payload_is_checked_as_the_create_training_job_batch_sends():
    queued = _good()[BATCH]
    body = json.loads(queued["serviceRequestPayload"])
    body["ResourceConfig"]["InstancePreferences"] = [{"InstanceType": "ml.g5.xlarge"}]
    bad = {**queued, "serviceRequestPayload": json.dumps(body)}
    rules = {f.rule for f in ConstraintsCheck().request("batch", "SubmitServiceJob", bad)}
    assert "InstancePreferences exclusivity" in rules


def test_the_model_check_catches_what_botocore_skips():
    sm = _good()[SM]
    bad = {**sm, "Tags": [{"Key": "k" * 129, "Value": "v"}]}  # botocore checks no max
    found = ConstraintsCheck().request("sagemaker", "CreateTrainingJob", bad)
    assert any(f.rule == "max" and "Tags[0].Key" in f.where for f in found), found
    bad = {**sm, "Tags": [{"Key": "\U0001d400" * 65, "Value": "v"}]}  # 130 UTF-16 units
    assert ConstraintsCheck().request("sagemaker", "CreateTrainingJob", bad)
    bad = {**sm, "Environment": {"1BAD": "x"}}  # the key's pattern
    assert any(
        f.rule == "pattern"
        for f in ConstraintsCheck().request("sagemaker", "CreateTrainingJob", bad)
    )


def _patterns(shape: Any, seen: set[str], out: set[str]) -> None:
    if shape is None or shape.name in seen:
        return
    seen.add(shape.name)
    if "pattern" in shape.metadata:
        out.add(shape.metadata["pattern"])
    for child in list(getattr(shape, "members", {}).values()) + [
        getattr(shape, a, None) for a in ("member", "key", "value")
    ]:
        _patterns(child, seen, out)


def test_every_pattern_of_the_platforms_operations_is_translated_or_listed():
    patterns: set[str] = set()
    ops = {s: set(o) for s, o in OPERATIONS.items()}
    ops.setdefault("sagemaker", set()).add("CreateTrainingJob")
    for service, names in ops.items():
        model = service_model(service)
        for op in names:
            _patterns(model.operation_model(op).input_shape, set(), patterns)
    untranslated = {p for p in patterns if _compiled(p) is None}
    assert untranslated == UNTRANSLATED, sorted(untranslated)
    assert len(patterns) > 20
