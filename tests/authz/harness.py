"""One documented configuration, synthesized, with its principals driven through their work.

``Deployment(context)`` synthesizes the app (cdk-nag included), resolves the templates and
collects every policy. ``run_trigger`` loads the trigger from source with the synthesized
function's own environment (resolved) against the moto sandbox, drives it through submit (every
template x allowed instance type, per team), describe, list, stop, and records every AWS call
it makes. The training roles' requests are what SageMaker does for each job the trigger asked
for (reads of its inputs and the source archive, checkpoint, output and TensorBoard writes
with their multipart parts, logs, metrics, image pulls, the volume key grant, ENIs in a VPC).
"""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobmodel.contract.names import (
    BATCH_TRAINING_JOB_PREFIX,
    ENV_MLFLOW_TRACKING_URI,
    TRAINING_LOG_GROUP,
)
from tests.infra.synth import synth
from tests.lambda_support import ROOT, FakeContext, client, load_handler
from testsupport import create_ledger_table
from testsupport.authz.evaluate import Decision, Policy, Request, evaluate
from testsupport.authz.mlflow import mlflow_requests
from testsupport.authz.policies import PolicySet, policy_set
from testsupport.authz.record import Call, recording
from testsupport.authz.requests import ACCOUNT, REGION, Mapper, training_job_arn
from testsupport.authz.template import Stacks

TRIGGER_DIR = ROOT / "lambda" / "trigger"
EVENTS_DIR = ROOT / "lambda" / "job_events"


@dataclass
class Outcome:
    request: Request
    decision: Decision


@dataclass
class Deployment:
    context: Mapping[str, Any]
    stacks: Stacks = field(init=False)
    policies: PolicySet = field(init=False)
    asset_dir: Path = field(init=False)
    _app: Any = field(init=False)

    def __post_init__(self) -> None:
        app, _ = synth(**self.context)
        assembly = app.synth()
        self._app = app
        self.asset_dir = Path(assembly.directory)
        self.stacks = Stacks({s.stack_name: s.template for s in assembly.stacks})
        self.policies = policy_set(self.stacks)
        self.mapper = Mapper(encrypted=self._encrypted())

    # ------------------------------------------------------------------ facts
    def function(self, logical_prefix: str) -> dict[str, Any]:
        (found,) = [
            (stack, logical, props)
            for stack, logical, props in self.stacks.resources("AWS::Lambda::Function")
            if logical.startswith(logical_prefix)
        ]
        return {"stack": found[0], "logical": found[1], **found[2]}

    def trigger_env(self) -> dict[str, str]:
        return dict(self.function("LauncherTriggerFunction")["Environment"]["Variables"])

    def trigger_role(self) -> str:
        return str(self.function("LauncherTriggerFunction")["Role"])

    def events_role(self) -> str:
        return str(self.function("JobEventsHandlerFunction")["Role"])

    def trigger_catalog(self) -> Path:
        code = self.function("LauncherTriggerFunction")["Code"]
        asset = str(code["S3Key"]).removesuffix(".zip")
        return self.asset_dir / f"asset.{asset}" / "catalog.json"

    def key_arn(self) -> str:
        (key,) = [
            self.stacks.get_att(stack, logical, "Arn")
            for stack, logical, _ in self.stacks.resources("AWS::KMS::Key")
        ]
        return str(key)

    def _encrypted(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for stack, logical, props in self.stacks.resources("AWS::DynamoDB::Table"):
            key = props.get("SSESpecification", {}).get("KMSMasterKeyId")
            if key:
                found[str(self.stacks.get_att(stack, logical, "Arn"))] = _key_arn(key)
        for stack, logical, props in self.stacks.resources("AWS::SNS::Topic"):
            key = props.get("KmsMasterKeyId")
            if key:
                found[str(self.stacks.ref(stack, logical))] = _key_arn(key)
        for stack, logical, props in self.stacks.resources("AWS::S3::Bucket"):
            for rule in props.get("BucketEncryption", {}).get(
                "ServerSideEncryptionConfiguration", []
            ):
                key = rule.get("ServerSideEncryptionByDefault", {}).get("KMSMasterKeyID")
                if key:
                    found[f"arn:aws:s3:::{self.stacks.ref(stack, logical)}/"] = _key_arn(key)
        return found

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, request: Request, *, extra_identity: Iterable[Policy] = ()) -> Decision:
        identity = [*self.policies.for_principal(request.principal), *extra_identity]
        resource = dict(self.policies.resource)
        if request.context.get("_via_endpoint") and self.policies.endpoints:
            for endpoint in self.policies.endpoints:
                resource.setdefault("arn:aws:s3:::*", []).append(endpoint)
        ctx = {k: v for k, v in request.context.items() if not k.startswith("_")}
        full = Request(
            request.principal,
            request.action,
            request.resources,
            {
                "aws:SecureTransport": True,
                "aws:PrincipalArn": request.principal,
                "aws:PrincipalAccount": ACCOUNT,
                "aws:RequestedRegion": REGION,
                **ctx,
            },
            request.source,
        )
        return evaluate(full, identity, resource, account=ACCOUNT)

    def evaluate_all(self, requests: Iterable[Request], **kw: Any) -> list[Outcome]:
        unique: dict[Any, Request] = {}
        for r in requests:
            unique.setdefault(r.key(), r)
        return [Outcome(r, self.evaluate(r, **kw)) for r in unique.values()]


def _key_arn(value: Any) -> str:
    text = str(value)
    return text if text.startswith("arn:") else f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{text}"


def denied(outcomes: Iterable[Outcome]) -> list[str]:
    return [
        f"{o.request.principal} {o.request.action} {list(o.request.resources)} "
        f"(from {o.request.source}): {o.decision.reason}"
        for o in outcomes
        if not o.decision.allowed
    ]


# ---------------------------------------------------------------------------- the trigger
@dataclass
class SweepRun:
    """The sweeps of a direct configuration's run (issue 37), per door: ``started`` (door ->
    every sweep started: one per sweepable template x allowed instance type, then the two
    below), ``stopped`` and ``completed`` (door -> the sweep stopped after one trial ended,
    and the one run to its end), ``refused`` (template -> the error of a template that cannot
    be swept), ``dry_runs`` ((door, the dry run's request, what the sweep then sent)),
    ``trials`` (each trial as the training job the tuner creates: its definition, name,
    tuned hyperparameters and the tuning job's tags), ``answers`` (name -> the last answer),
    ``crossed`` ((door, the other team's sweep, the answers, the calls made)."""

    started: dict[str, list[str]] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)
    completed: dict[str, str] = field(default_factory=dict)
    refused: dict[str, dict[str, Any]] = field(default_factory=dict)
    dry_runs: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    crossed: list[tuple[str, str, list[dict[str, Any]], list[Call]]] = field(default_factory=list)


@dataclass
class TriggerRun:
    calls: list[tuple[str, Call]]  # (door: team-<x> / admin / "", call)
    created: list[dict[str, Any]]  # CreateTrainingJob parameters, or Batch payloads
    responses: list[dict[str, Any]]
    sweeps: SweepRun | None = None  # direct mode only (queue mode has no tuner rights)


def create_model_groups(deployment: Deployment, sandbox: Any) -> None:
    """The deployment's model package groups in moto (as CloudFormation would create them)."""
    sm = client("sagemaker", sandbox.endpoint)
    for _, _, props in deployment.stacks.resources("AWS::SageMaker::ModelPackageGroup"):
        # moto keeps a group's versions apart from the group: creating it again loses none
        sm.create_model_package_group(ModelPackageGroupName=props["ModelPackageGroupName"])


@contextmanager
def trigger(deployment: Deployment, sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The trigger loaded from source with the synthesized environment, against moto."""
    create_model_groups(deployment, sandbox)
    env = deployment.trigger_env()
    table = env["FTL_JOB_TABLE"]
    ddb = client("dynamodb", sandbox.endpoint)
    if table not in ddb.list_tables()["TableNames"]:
        create_ledger_table(ddb, table)
    queue_arn = env.get("FTL_JOB_QUEUE")
    if queue_arn:
        name = queue_arn.rsplit("/", 1)[-1]
        sandbox.batch.queues.pop(name, None)  # each configuration its own queue (share policy)
        if name not in sandbox.batch.queues:
            sandbox.batch.create_queue(
                name, capacity=64, share_policy=env.get("FTL_QUEUE_SHARE_POLICY") or "fairshare"
            )
    create_team_topics(env, sandbox)
    full = {
        **env,
        "AWS_ENDPOINT_URL": sandbox.endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "FTL_CATALOG_PATH": str(deployment.trigger_catalog()),
    }
    yield load_handler(TRIGGER_DIR, monkeypatch, full)


def create_team_topics(env: Mapping[str, str], sandbox: Any) -> None:
    """The topics a function's environment names (FTL_TOPIC_ARN, and the teams' notification
    topics FTL_TEAM_TOPICS), in moto, so the notifications it sends are recorded and sent (a
    notice whose publish failed would stay owed, in the sweep's index, as it does in AWS)."""
    sns = client("sns", sandbox.endpoint)
    topics = [env.get("FTL_TOPIC_ARN") or ""]
    topics += json.loads(env.get("FTL_TEAM_TOPICS") or "{}").values()
    for arn in filter(None, topics):
        sns.create_topic(Name=arn.rsplit(":", 1)[-1])


def submit_requests(catalog: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One submit per template and allowed instance type, at the default count."""
    out = []
    for template in catalog["templates"] if "templates" in catalog else catalog.values():
        name = template["name"]
        for instance_type in template["instance_types"]:
            out.append({"action": "submit", "template": name, "instance_type": instance_type})
        # A capacity chain's later steps (issue 20): each step alone, so its request is made.
        for step in template.get("capacity_chain", [])[1:]:
            out.append({"action": "submit", "template": name, "capacity": [step]})
    return out


def run_trigger(
    deployment: Deployment, sandbox: Any, monkeypatch: pytest.MonkeyPatch, doors: list[str]
) -> TriggerRun:
    catalog = json.loads(deployment.trigger_catalog().read_text())
    requests = submit_requests(catalog)
    calls: list[tuple[str, Call]] = []
    responses: list[dict[str, Any]] = []
    with trigger(deployment, sandbox, monkeypatch) as module:

        def call(door: str, event: dict[str, Any]) -> dict[str, Any]:
            answer = module.handler(event, FakeContext(alias=door or None))
            responses.append(answer)
            if "error" in answer:
                raise AssertionError(f"{door or 'direct'} {event}: {answer}")
            return answer

        submitted: dict[str, list[str]] = {}
        for door in doors:
            if door == "admin":
                continue  # the admins' door submits nothing (docs/API.md, Teams)
            with recording() as recorded:
                names = submitted.setdefault(door, [])
                for request in requests:
                    token = uuid.uuid4().hex[:12]
                    names.append(call(door, {**request, "client_token": token})["job_name"])
                for name in names[:3]:
                    call(door, {"action": "describe", "job_name": name})
                call(door, {"action": "list"})
                call(door, {"action": "list", "limit": 1})
                for name in names[:2]:
                    call(door, {"action": "stop", "job_name": name})
            calls += [(door, c) for c in recorded]
        if "admin" in doors:
            with recording() as recorded:
                call("admin", {"action": "list"})
                for door, names in submitted.items():
                    call("admin", {"action": "list", "team": door.removeprefix("team-")})
                    call("admin", {"action": "describe", "job_name": names[-1]})
                    call("admin", {"action": "stop", "job_name": names[-1]})
            calls += [("admin", c) for c in recorded]
        sweeps = None
        if not queue_arn_of(deployment):
            sweeps = drive_sweeps(module, call, catalog, sandbox, doors, calls, monkeypatch)
    created = []
    for _, call in calls:
        if call.operation == "CreateTrainingJob":
            created.append(call.params)
        elif call.operation == "SubmitServiceJob":
            # Batch creates the training job under its own name, AWSBatch<job name><32 hex>
            payload = json.loads(call.params["serviceRequestPayload"])
            batch_name = f"{BATCH_TRAINING_JOB_PREFIX}{call.params['jobName']}{'0' * 32}"
            created.append({**payload, "TrainingJobName": batch_name, "_queued": True})
    return TriggerRun(calls, created, responses, sweeps)


def queue_arn_of(deployment: Deployment) -> str:
    return deployment.trigger_env().get("FTL_JOB_QUEUE", "")


# ---------------------------------------------------------------------------- sweeps (issue 37)
HTTP_CALLERS = {
    "": f"arn:aws:sts::{ACCOUNT}:assumed-role/data-scientists/alice",
    "team-team-a": f"arn:aws:sts::{ACCOUNT}:assumed-role/team-a-scientists/alice",
    "team-team-b": f"arn:aws:sts::{ACCOUNT}:assumed-role/team-b-research/bob",
}


def sweep_ranges(template: Mapping[str, Any]) -> dict[str, Any]:
    """Every overridable hyperparameter of the template ranged at its bounds: numbers from
    their min to their max, choices and booleans over every value (free text stays fixed)."""
    ranges: dict[str, Any] = {}
    for name, rule in sorted(template["overridable"].items()):
        if rule.get("choices"):
            ranges[name] = {"values": list(rule["choices"])}
        elif rule["type"] == "bool":
            ranges[name] = {"values": [True, False]}
        elif rule["type"] in ("int", "float") and "min" in rule and "max" in rule:
            ranges[name] = {"min": rule["min"], "max": rule["max"]}
    return ranges


def sweep_event(template: Mapping[str, Any], prefix: str, **extra: Any) -> dict[str, Any]:
    metrics = list(template["metrics"])
    return {
        "template": template["name"],
        "job_name": prefix,
        "ranges": sweep_ranges(template),
        "objective": "eval_loss" if "eval_loss" in metrics else metrics[0],
        "direction": "Minimize",
        "max_trials": 3,
        "max_parallel": 2,
        "cap_usd": 10_000_000.0,
        **extra,
    }


def trial_jobs(tuner: Any, name: str, request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The training jobs the tuner created for tuning job ``name``: its definition with each
    trial's name, its tuned hyperparameters and the tuning job's tags."""
    definition = request["TrainingJobDefinition"]
    out = []
    for trial in tuner.jobs[name].trials:
        job = {k: v for k, v in definition.items() if k != "StaticHyperParameters"}
        job["TrainingJobName"] = trial.name
        job["HyperParameters"] = {**definition.get("StaticHyperParameters", {}), **trial.tuned}
        job["Tags"] = list(request.get("Tags", []))
        out.append(job)
    return out


def drive_sweeps(
    module: Any,
    call: Any,
    catalog: Mapping[str, Any],
    sandbox: Any,
    doors: list[str],
    calls: list[tuple[str, Call]],
    monkeypatch: pytest.MonkeyPatch,
) -> SweepRun:
    """Per door that submits: one sweep of every sweepable template x allowed instance type,
    stopped; a dry run, then the same sweep (same name: the clock and the random hex held),
    whose first trial ends before it is described and stopped; one run by the tuner stand-in
    to Completed, described (its best trial registered and, with an evaluation policy,
    evaluated). The HTTP door (``POST /sweeps``, ``POST /jobs/{name}/stop``) starts and stops
    the stopped one. In teams mode each team then tries the other's sweep."""
    from jobmodel.money.price_list import price_item_key
    from tests.lambda_support import http_event

    run = SweepRun()
    tuner = sandbox.tuner
    templates = catalog["templates"]
    runtime = module.RUNTIME
    # A sweep's cap needs its type's price: the Price List refresh's item, as the deployed
    # price-refresh function stores it, for every catalog type (the ftl:prices override, where
    # a configuration has one, still wins); written before anything is recorded.
    listed = {t: 10.0 for template in templates for t in template["instance_types"]}
    module.LAUNCHER.ledger.put_prices(
        price_item_key(REGION),
        json.dumps(listed, sort_keys=True),
        source="the authorization check",
        refreshed_at="2026-11-24T10:00:00Z",
    )
    if hasattr(runtime.prices, "_kept"):  # a warm trigger keeps the table it read 10 minutes
        runtime.prices._kept = None

    def sweep(door: str, event: dict[str, Any]) -> dict[str, Any]:
        answer = call(door, {"action": "sweep", **event, "client_token": uuid.uuid4().hex[:12]})
        run.answers[answer["job_name"]] = answer
        return answer

    def http(door: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
        event = http_event(method, path, body, user_arn=HTTP_CALLERS[door])
        answer = module.handler(event, FakeContext(alias="http"))
        parsed = json.loads(answer["body"])
        if answer["statusCode"] not in (200, 201):
            raise AssertionError(f"http {door} {method} {path}: {answer}")
        return dict(parsed)

    for door in [d for d in doors if d != "admin"]:
        started = run.started.setdefault(door, [])
        with recording() as recorded:
            for template in templates:
                for instance_type in template["instance_types"]:
                    event = sweep_event(template, "all", instance_type=instance_type)
                    answer = module.handler(
                        {"action": "sweep", **event}, FakeContext(alias=door or None)
                    )
                    if "error" in answer:
                        if answer["error"].get("field") != "template":
                            raise AssertionError(f"{door} sweep {template['name']}: {answer}")
                        run.refused[template["name"]] = answer["error"]
                        break
                    started.append(answer["job_name"])
                    call(door, {"action": "stop", "job_name": answer["job_name"]})
            spot = next(t for t in templates if t["name"] == "distilbert-spot")
            # the dry run and the sweep under one name: the clock and the random hex held
            frozen, fixed = runtime.now(), uuid.uuid4().hex[:4]
            with monkeypatch.context() as mp:
                mp.setattr(runtime, "now", lambda frozen=frozen: frozen)
                mp.setattr(runtime, "random_hex", lambda fixed=fixed: fixed)
                body = sweep_event(spot, "halt", max_trials=4)
                dry = http(door, "POST", "/sweeps", {**body, "dry_run": True})
                with recording() as sent:
                    halted = http(door, "POST", "/sweeps", body)
            assert halted["job_name"] == dry["job_name"], (dry["job_name"], halted["job_name"])
            (create,) = [c.params for c in sent if c.operation == "CreateHyperParameterTuningJob"]
            run.dry_runs.append((door, dry["request"], create))
            name = halted["job_name"]
            started.append(name)
            run.stopped[door] = name
            first = tuner.trials(name)[0]
            tuner.run_trial(first)
            tuner.finish_trial(first, objective=0.5, billable=600)
            call(door, {"action": "describe", "job_name": name})
            run.answers[name] = http(door, "POST", f"/jobs/{name}/stop")
            run.answers[name] = call(door, {"action": "describe", "job_name": name})
            best = sweep(door, sweep_event(spot, "best", max_trials=3, max_parallel=2))
            name = best["job_name"]
            started.append(name)
            run.completed[door] = name
            call(door, {"action": "describe", "job_name": name})
            tuner.run_to_end(name, seconds_per_trial=1200)
            run.answers[name] = call(door, {"action": "describe", "job_name": name})
            call(door, {"action": "list"})
        calls += [(door, c) for c in recorded]
    if "admin" in doors:
        with recording() as recorded:
            for name in run.stopped.values():
                run.answers[name] = call("admin", {"action": "describe", "job_name": name})
        calls += [("admin", c) for c in recorded]
    teams = [d for d in doors if d.startswith("team-")]
    for door, other in zip(teams, teams[1:] + teams[:1], strict=True):
        if door == other:
            continue
        theirs = run.stopped[other]
        with recording() as recorded:
            answers = [
                module.handler({"action": action, "job_name": theirs}, FakeContext(alias=door))
                for action in ("describe", "stop")
            ]
        run.crossed.append((door, theirs, answers, list(recorded)))
        calls += [(door, c) for c in recorded]
    for _, c in calls:
        if c.operation == "CreateHyperParameterTuningJob":
            run.trials += trial_jobs(tuner, c.params["HyperParameterTuningJobName"], c.params)
    return run


# ---------------------------------------------------------------------------- the other functions
PRICES_DIR = ROOT / "lambda" / "prices"


def _function_env(deployment: Deployment, logical_prefix: str, sandbox: Any) -> dict[str, str]:
    env = dict(deployment.function(logical_prefix)["Environment"]["Variables"])
    return env | {
        "AWS_ENDPOINT_URL": sandbox.endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


def sagemaker_event(
    job: Mapping[str, Any], status: str, secondary: str, **detail: Any
) -> dict[str, Any]:
    """SageMaker's state change of a recorded job, as EventBridge delivers it."""
    name = job["TrainingJobName"]
    arn = training_job_arn(name)
    return {
        "version": "0",
        "id": f"sm-{name}-{secondary}",
        "detail-type": "SageMaker Training Job State Change",
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "time": "2026-11-24T10:00:00Z",
        "region": REGION,
        "resources": [arn],
        "detail": {
            "TrainingJobName": name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": status,
            "SecondaryStatus": secondary,
            "CreationTime": 1_795_000_000_000,
            "LastModifiedTime": 1_795_003_660_000,
            "RoleArn": job["RoleArn"],
            "Tags": {t["Key"]: t["Value"] for t in job.get("Tags", [])},
            **detail,
        },
    }


def live(run: TriggerRun, queued: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Queued jobs of the run that no stop reached."""
    stopped = {r["job_name"] for r in run.responses if r.get("status") in ("Stopping", "Stopped")}
    return [a for a in queued if a["job_name"] not in stopped]


def _evaluation(job: dict[str, Any]) -> bool:
    """Whether a created training job is an evaluation job (issue 36: its tag names the job)."""
    return any(t["Key"] == "ftl:evaluation-of" for t in job.get("Tags") or [])


def run_job_events(deployment: Deployment, run: TriggerRun, sandbox: Any) -> list[Call]:
    """Drive the job-events function through the run's jobs and record its AWS calls:
    finished direct jobs, a direct chain's spot attempt out of capacity, queued jobs'
    ``RUNNING`` and a queued chained attempt's ``FAILED`` (Batch's events carry the share Batch
    gives the job: ``shareIdentifier``, or ``quotaShareName`` on a quota-share queue)."""
    from tests.unit.job_events.sequences import batch as batch_event

    env = _function_env(deployment, "JobEventsHandlerFunction", sandbox)
    trigger_env = deployment.trigger_env()
    env_queue = trigger_env.get("FTL_JOB_QUEUE", "")
    share_key = (
        "quotaShareName"
        if trigger_env.get("FTL_QUEUE_SHARE_POLICY") == "quotashare"
        else "shareIdentifier"
    )
    topic = env["FTL_TOPIC_ARN"]
    client("sns", sandbox.endpoint).create_topic(Name=topic.rsplit(":", 1)[-1])
    create_model_groups(deployment, sandbox)
    create_team_topics(env, sandbox)
    # Issue 36: the last jobs the trigger created are evaluation jobs (its describes saw their
    # jobs Completed); their ends write the metrics JSON into the artifact bucket.
    artifacts = trigger_env.get("FTL_ARTIFACT_BUCKET")
    if artifacts:
        with contextlib.suppress(Exception):
            client("s3", sandbox.endpoint).create_bucket(Bucket=artifacts)
    direct = [job for job in run.created if not job.get("_queued")]
    queued = [r for r in run.responses if r.get("batch_job_id") and r.get("status") == "Queued"]

    def batch_detail(answer: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
        event["detail"].pop("shareIdentifier", None)
        event["detail"].update(
            {"jobId": answer["batch_job_id"], "jobQueue": env_queue, share_key: answer["share"]}
        )
        return event

    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()):
        module = load_handler(EVENTS_DIR, mp, env)
        with recording() as calls:
            trained = [j for j in direct if not _evaluation(j)]
            for job in trained[-4:] + [j for j in direct if _evaluation(j)][-2:]:
                event = sagemaker_event(
                    job,
                    "Completed",
                    "Completed",
                    TrainingStartTime=1_795_000_060_000,
                    TrainingEndTime=1_795_003_660_000,
                    BillableTimeInSeconds=1800,
                )
                module.handler(event, FakeContext(function_name="ftl-job-events"))
            chained = [
                j
                for j in direct
                if any(
                    t["Key"] == "ftl:template" and t["Value"] == "distilbert-chain"
                    for t in j["Tags"]
                )
            ]
            for job in chained[:1]:
                # the spot attempt ran out of capacity: the function asks the chain alias
                # for the next attempt (its Invoke is recorded; moto has no such function)
                event = sagemaker_event(job, "Stopped", "MaxWaitTimeExceeded")
                module.handler(event, FakeContext(function_name="ftl-job-events"))
            for answer in live(run, queued)[-3:]:
                event = batch_detail(answer, batch_event(answer["job_name"], "RUNNING"))
                done = module.handler(event, FakeContext(function_name="ftl-job-events"))
                assert done.get("updated"), (event["detail"], done)
            for answer in [a for a in live(run, queued) if a.get("capacity_chain")][:1]:
                # Batch's FAILED of a chained attempt, with a reason that does not say why and
                # no SageMaker end recorded: the function holds it and asks the chain alias to
                # look (its Invoke is recorded; moto has no such function)
                event = batch_event(
                    answer["job_name"],
                    "FAILED",
                    statusReason="Received status from SageMaker: Training job failed",
                    latestAttempt={
                        "serviceResourceId": {
                            "name": "TrainingJobArn",
                            "value": training_job_arn(f"AWSBatch{answer['job_name']}{'0' * 32}"),
                        }
                    },
                )
                done = module.handler(
                    batch_detail(answer, event), FakeContext(function_name="ftl-job-events")
                )
                assert done["updated"] and done["status"] not in ("Failed", "Stopped"), done
    return list(calls)


def run_price_refresh(deployment: Deployment, sandbox: Any) -> list[Call]:
    """Drive the price-refresh function once (its schedule's event) and record its calls: the
    Price List API (the sandbox's stand-in) and the ledger's prices item."""
    env = _function_env(deployment, "PriceRefreshHandlerFunction", sandbox)
    event = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    with pytest.MonkeyPatch.context() as mp:
        module = load_handler(PRICES_DIR, mp, env)
        with recording() as calls:
            done = module.handler(event, FakeContext(function_name="ftl-prices"))
    assert done["written"], done
    return list(calls)


# ---------------------------------------------------------------------------- SageMaker's side
def s3_parts(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def training_role_requests(
    job: Mapping[str, Any], key_arn: str, *, via_endpoint: bool
) -> list[Request]:
    """What SageMaker does as the job's role (the ``RoleArn`` of the request)."""
    role = job["RoleArn"]
    name = job["TrainingJobName"]
    src = f"training job {name}"
    ep = {"_via_endpoint": True} if via_endpoint else {}
    out: list[Request] = []

    def read(uri: str, *, encrypted: bool = True) -> None:
        bucket, prefix = s3_parts(uri)
        out.append(
            Request(
                role, "s3:ListBucket", (f"arn:aws:s3:::{bucket}",), {"s3:prefix": prefix, **ep}, src
            )
        )
        obj = f"arn:aws:s3:::{bucket}/{prefix.rstrip('/')}/part-00000"
        out.append(Request(role, "s3:GetObject", (obj,), ep, src))
        if encrypted:
            out.append(
                Request(
                    role,
                    "kms:Decrypt",
                    (key_arn,),
                    {"kms:ViaService": f"s3.{REGION}.amazonaws.com"},
                    src,
                )
            )

    def write(uri: str, leaf: str) -> None:
        bucket, prefix = s3_parts(uri)
        obj = f"arn:aws:s3:::{bucket}/{prefix.rstrip('/')}/{leaf}"
        sse = {
            "s3:x-amz-server-side-encryption": "aws:kms",
            "s3:x-amz-server-side-encryption-aws-kms-key-id": key_arn,
        }
        # A plain PUT (the bucket default applies), a PUT naming the platform key, a
        # multipart upload (CreateMultipartUpload with headers, UploadPart without), abort.
        out.append(Request(role, "s3:PutObject", (obj,), ep, src + " (PUT, no headers)"))
        out.append(Request(role, "s3:PutObject", (obj,), {**sse, **ep}, src + " (PUT, SSE-KMS)"))
        out.append(Request(role, "s3:AbortMultipartUpload", (obj,), ep, src))
        out.append(Request(role, "s3:ListMultipartUploadParts", (obj,), ep, src))
        via = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
        out.append(Request(role, "kms:GenerateDataKey", (key_arn,), via, src))
        out.append(Request(role, "kms:Decrypt", (key_arn,), via, src))  # multipart needs it

    for channel in job.get("InputDataConfig", []):
        read(channel["DataSource"]["S3DataSource"]["S3Uri"])
    source = json.loads(job.get("HyperParameters", {}).get("sagemaker_submit_directory", '""'))
    if source:
        bucket, key = s3_parts(source)
        out.append(Request(role, "s3:GetObject", (f"arn:aws:s3:::{bucket}/{key}",), ep, src))
    if "CheckpointConfig" in job:
        uri = job["CheckpointConfig"]["S3Uri"]
        read(uri)
        write(uri, "checkpoint-100/model.safetensors")
        bucket, prefix = s3_parts(uri)
        obj = f"arn:aws:s3:::{bucket}/{prefix.rstrip('/')}/checkpoint-50/model.safetensors"
        out.append(Request(role, "s3:DeleteObject", (obj,), ep, src))
    write(job["OutputDataConfig"]["S3OutputPath"], f"{name}/output/model.tar.gz")
    if "TensorBoardOutputConfig" in job:
        write(job["TensorBoardOutputConfig"]["S3OutputPath"], "events.out.tfevents.1")
    group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{TRAINING_LOG_GROUP}"
    stream = f"{group}:log-stream:{name}/algo-1-1700000000"
    out += [
        Request(role, "logs:CreateLogGroup", (f"{group}:*",), {}, src),
        Request(role, "logs:DescribeLogStreams", (f"{group}:*",), {}, src),
        Request(role, "logs:CreateLogStream", (stream,), {}, src),
        Request(role, "logs:PutLogEvents", (stream,), {}, src),
        Request(
            role,
            "cloudwatch:PutMetricData",
            ("*",),
            {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"},
            src,
        ),
        Request(role, "ecr:GetAuthorizationToken", ("*",), {}, src),
    ]
    image = job["AlgorithmSpecification"]["TrainingImage"]
    registry, _, rest = image.partition("/")
    account, _, tail = registry.partition(".dkr.ecr.")
    region = tail.split(".amazonaws.com")[0]
    repo = f"arn:aws:ecr:{region}:{account}:repository/{rest.split(':')[0].split('@')[0]}"
    for action in (
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
        "ecr:BatchCheckLayerAvailability",
    ):
        out.append(Request(role, action, (repo,), {}, src))
    if job["ResourceConfig"].get("VolumeKmsKeyId"):
        out.append(
            Request(role, "kms:CreateGrant", (key_arn,), {"kms:GrantIsForAWSResource": True}, src)
        )
    server = job.get("Environment", {}).get(ENV_MLFLOW_TRACKING_URI, "")
    if server.startswith("arn:"):  # a tracked job logs to its MLflow server (issue 27)
        out += mlflow_requests(role, server, src)
    vpc = job.get("VpcConfig")
    if vpc:
        eni = f"arn:aws:ec2:{REGION}:{ACCOUNT}:network-interface/eni-0123456789abcdef0"
        subnets = tuple(f"arn:aws:ec2:{REGION}:{ACCOUNT}:subnet/{s}" for s in vpc["Subnets"])
        groups = tuple(
            f"arn:aws:ec2:{REGION}:{ACCOUNT}:security-group/{g}" for g in vpc["SecurityGroupIds"]
        )
        out.append(Request(role, "ec2:CreateNetworkInterface", (eni, subnets[0], *groups), {}, src))
        for action in (
            "ec2:DescribeNetworkInterfaces",
            "ec2:DescribeVpcs",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeDhcpOptions",
        ):
            out.append(Request(role, action, ("*",), {}, src))
    return out


def trust_request(job: Mapping[str, Any], name: str) -> Request:
    """SageMaker assuming the job's role (the role's trust policy decides)."""
    return Request(
        "sagemaker.amazonaws.com",
        "sts:AssumeRole",
        (job["RoleArn"],),
        {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": training_job_arn(name)},
        f"SageMaker starting {name}",
    )


# ---------------------------------------------------------------------------- configurations
def _all_prices() -> dict[str, dict[str, float]]:
    from jobmodel.instances import INSTANCE_TYPES

    return {REGION: {name: 10.0 for name in INSTANCE_TYPES}}


def _teams(*, weight: bool = False) -> dict[str, Any]:
    # Two teams with admins, as tests/infra/synth.py's TEAMS_CONTEXT, but with every instance
    # type priced and limits no scenario reaches, so every template x type can be submitted.
    team_a: dict[str, Any] = {
        "name": "team-a",
        "principals": [f"arn:aws:iam::{ACCOUNT}:role/team-a-scientists"],
        "buckets": ["team-a-shared-corpus"],
        "limits": {"max_instances": 10_000, "monthly_budget_usd": 10_000_000},
    }
    if weight:
        team_a["weight"] = 2
    return {
        "ftl:teams": [
            team_a,
            {"name": "team-b", "principals": [f"arn:aws:iam::{ACCOUNT}:role/team-b-*"]},
        ],
        "ftl:admins": [f"arn:aws:iam::{ACCOUNT}:role/platform-admin"],
        "ftl:prices": _all_prices(),
    }


# The configurations the README documents (its Deploying section): context and the doors a
# caller uses (a team's alias, the admins' alias, or the unqualified function).
def _plans(teams: list[str]) -> dict[str, Any]:
    """Training plans (issue 20) that the chained templates' plan step uses."""
    window = {"start": "2020-01-01T00:00Z", "end": "2099-01-01T00:00Z", "teams": teams}
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/"
    return {
        "ftl:trainingPlans": [
            {"name": "g5", "arn": arn + "g5", "instanceType": "ml.g5.xlarge", "instanceCount": 2,
             "templates": ["distilbert-chain"], **window},
            {"name": "p4d", "arn": arn + "p4d", "instanceType": "ml.p4d.24xlarge",
             "instanceCount": 16, "templates": ["llm-sft-fsdp"], **window},
        ]
    }  # fmt: skip


MLFLOW_APP = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:mlflow-app/app-0123456789AB"
CONFIGURATIONS: dict[str, tuple[dict[str, Any], list[str]]] = {
    # Issue 27: a tracking server the stacks create (default), one per team (teams), an
    # existing serverless MLflow app (queue).
    "default": ({**_plans([]), "ftl:mlflow": {"create": True}}, [""]),
    "teams": (
        {
            **_teams(),
            **_plans(["team-a", "team-b"]),
            "ftl:mlflow": {"create": True, "perTeam": True},
        },
        ["team-team-a", "team-team-b", "admin"],
    ),
    "queue": (
        {
            "ftl:scheduler": "queue",
            "ftl:queueCapacityInstances": 64,
            **_plans([]),
            "ftl:mlflow": {"trackingServerArn": MLFLOW_APP},
        },
        [""],
    ),
    "queue-quotashare-teams": (
        {
            **_teams(weight=True),
            **_plans(["team-a", "team-b"]),
            "ftl:scheduler": "queue",
            "ftl:queueSharePolicy": "quotashare",
            "ftl:queueCapacityInstances": 64,
        },
        ["team-team-a", "team-team-b", "admin"],
    ),
    # Fair share with teams whose names hold '-': the share identifiers (issue 26).
    "queue-fairshare-teams": (
        {
            **_teams(weight=True),
            **_plans(["team-a", "team-b"]),
            "ftl:scheduler": "queue",
            "ftl:queueCapacityInstances": 64,
        },
        ["team-team-a", "team-team-b"],
    ),
    "new-vpc-isolated": ({"ftl:network": "new", **_plans([])}, [""]),
    "new-vpc-nat": ({"ftl:network": "new", "ftl:egress": "nat", **_plans([])}, [""]),
    "existing-vpc": (
        {
            "ftl:network": "existing",
            "ftl:existingVpc": {
                "vpcId": "vpc-0123abcd",
                "availabilityZones": ["us-east-1a", "us-east-1b"],
                "privateSubnetIds": ["subnet-0aaa1111", "subnet-0bbb2222"],
                "routeTableIds": ["rtb-0aaa1111", "rtb-0bbb2222"],
            },
            **_plans([]),
        },
        [""],
    ),
}


# ---------------------------------------------------------------------------- the client
class _Http:
    status_code = 200
    headers: dict[str, str] = {}


def record_client(
    deployment: Deployment,
    sandbox: Any,
    monkeypatch: pytest.MonkeyPatch,
    *,
    door: str,
    find_by_stack: bool,
) -> list[Call]:
    """The ``ftl`` client's own AWS calls for a day's commands, recorded.

    The client's boto3 clients answer in-process: Lambda Invoke runs the trigger (loaded as
    in :func:`trigger`) through ``door``, CloudFormation answers with the synthesized stack's
    outputs, CloudWatch Logs with one stream of the job. What is recorded is what the client
    sent; nothing leaves the machine."""

    from botocore.response import StreamingBody

    from ftl_client import LauncherClient

    function_arn = deployment.stacks.get_att(
        deployment.function("LauncherTriggerFunction")["stack"],
        deployment.function("LauncherTriggerFunction")["logical"],
        "Arn",
    )
    outputs = [
        {"OutputKey": "TriggerFunctionName", "OutputValue": function_arn.rsplit(":", 1)[-1]},
        {"OutputKey": "TriggerFunctionArn", "OutputValue": function_arn},
    ]
    with trigger(deployment, sandbox, monkeypatch) as module:

        def invoke(params: dict[str, Any], **_: Any) -> Any:
            event = json.loads(params["body"])
            answer = json.dumps(module.handler(event, FakeContext(alias=door or None))).encode()
            return _Http(), {
                "StatusCode": 200,
                "Payload": StreamingBody(io.BytesIO(answer), len(answer)),
            }

        def stacks(**_: Any) -> Any:
            return _Http(), {"Stacks": [{"StackName": "ftl-launcher", "Outputs": outputs}]}

        def streams(**_: Any) -> Any:
            return _Http(), {"logStreams": [{"logStreamName": f"{job}/algo-1-1700000000"}]}

        def events(**_: Any) -> Any:
            line = {
                "eventId": "1",
                "timestamp": 1,
                "logStreamName": f"{job}/algo-1",
                "message": "hi",
            }
            return _Http(), {"events": [line]}

        clients = {
            service: answered_client(service, handlers)
            for service, handlers in (
                ("lambda", {"Invoke": invoke}),
                ("cloudformation", {"DescribeStacks": stacks}),
                ("logs", {"DescribeLogStreams": streams, "FilterLogEvents": events}),
            )
        }
        target = (
            {}
            if find_by_stack
            else {"function_name": f"{function_arn}:{door}" if door else function_arn}
        )
        launcher = LauncherClient(
            stack_name="ftl-launcher" if find_by_stack else None,
            region=REGION,
            clients=clients,
            **target,
        )
        with recording() as calls, contextlib.redirect_stdout(io.StringIO()):
            launcher.templates()
            first = launcher.submit("distilbert-spot", client_token=uuid.uuid4().hex[:12])
            job = first["job_name"]
            launcher.describe(job)
            launcher.list_jobs()
            launcher.queue()
            list(launcher.logs(job))
            launcher.stop(job)
            launcher.whoami()
    # The trigger ran in-process behind the Invoke; its own calls (SageMaker, DynamoDB, Batch)
    # are the trigger's requests, checked in their own test. Keep the client's.
    return [c for c in calls if c.service in clients]


def answered_client(
    service: str, handlers: dict[str, Any], *, endpoint: str = "http://localhost:9"
) -> Any:
    """A boto3 client whose ``handlers`` (operation -> botocore ``before-call`` handler
    returning ``(http, parsed)``) answer in place of the service: the request is still built
    and validated against botocore's model, and the recorder sees it. Operations without a
    handler go to ``endpoint`` (the sandbox's, for a stand-in that answers them)."""
    import boto3

    c = boto3.client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    hyphenized = c.meta.service_model.service_id.hyphenize()
    for op, handler in handlers.items():
        c.meta.events.register(f"before-call.{hyphenized}.{op}", handler)
    return c
