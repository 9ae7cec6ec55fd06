"""Teams end to end (issue 9's checks, docs/API.md, Teams): a second deploy of the app, with two
teams and an admin in context, driven through both doors as deployed.

* direct door: moto's Lambda ``Invoke`` of the alias ARNs the stack outputs
  (``Team<Id>InvokeArn``, ``AdminInvokeArn``); the sandbox runs the deployed zip and passes
  the invoked ARN, alias included, as Lambda does;
* HTTP door: the sandbox's SigV4-checking stand-in for the HTTP API (``sandbox/http_api.py``),
  which invokes the ``http`` alias with the signing caller's IAM ARN in the request context.

The deploy uses its own platform name (``ftlteams``), so its stacks, table, buckets and
functions live beside the session's single-team deploy in the same moto server. Every job
this module starts is named ``nlp-...`` or ``vision-...`` (the team prefix).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sandbox.deploy import ACCOUNT, REGION, deploy
from sandbox.http_api import LocalHttpApi

PLATFORM = "ftlteams"
NLP_ROLE = f"arn:aws:iam::{ACCOUNT}:role/nlp-scientists"
VISION_ROLES = f"arn:aws:iam::{ACCOUNT}:role/vision-*"
OPS_ROLE = f"arn:aws:iam::{ACCOUNT}:role/platform-ops"
AUDIO_ROLE = f"arn:aws:iam::{ACCOUNT}:role/audio-scientists"
# Sandbox prices for the instance types used here (the shipped table is empty by design).
PRICE_G5 = 1.5
TEAMS = [
    {"name": "nlp", "principals": [NLP_ROLE], "limits": {"max_instances": 4}},
    {
        "name": "vision",
        "principals": [VISION_ROLES],
        "limits": {"max_job_cost_usd": 7, "monthly_budget_usd": 10},
    },
    # Touched by the dry-run test only: its first request finds no usage item yet.
    {"name": "audio", "principals": [AUDIO_ROLE], "limits": {"max_instances": 2}},
]
CONTEXT = {
    "ftl:platformName": PLATFORM,
    "ftl:teams": json.dumps(TEAMS),
    "ftl:admins": json.dumps([OPS_ROLE]),
    "ftl:prices": json.dumps({REGION: {"ml.g5.xlarge": PRICE_G5, "ml.g5.2xlarge": 2.0}}),
}
# access key -> the IAM ARN API Gateway's authoriser reports for that caller.
CALLERS = {
    "nlpkey": f"arn:aws:sts::{ACCOUNT}:assumed-role/nlp-scientists/alice",
    "viskey": f"arn:aws:sts::{ACCOUNT}:assumed-role/vision-research/bob",
    "opskey": f"arn:aws:sts::{ACCOUNT}:assumed-role/platform-ops/carol",
    "nokey": f"arn:aws:sts::{ACCOUNT}:assumed-role/intern/dave",
}
pytestmark = pytest.mark.sandbox


class Teams:
    """The teams deploy: its outputs, both doors, and read-backs from moto."""

    def __init__(self, endpoint: str, outputs: dict[str, dict[str, str]], api: LocalHttpApi):
        self.endpoint = endpoint
        self.outputs = {k: v for o in outputs.values() for k, v in o.items()}
        self.api = api
        self.lam = self.client("lambda")
        self.sm = self.client("sagemaker")
        self.ddb = self.client("dynamodb")
        self.table = self.outputs["JobTableName"]
        self.data = self.outputs["DataBucketName"]

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    # ------------------------------------------------------------ direct door
    def invoke(self, target: str, event: Any, *, raw: bytes | None = None) -> Any:
        """Invoke an ARN (an alias ARN from the outputs, or the bare function)."""
        payload = raw if raw is not None else json.dumps(event).encode()
        reply = self.lam.invoke(FunctionName=target, Payload=payload)
        body = json.loads(reply["Payload"].read())
        assert "FunctionError" not in reply, body
        return body

    def team(self, name: str, event: Any, **kw: Any) -> Any:
        oid = name.replace("-", "").capitalize()
        return self.invoke(self.outputs[f"Team{oid}InvokeArn"], event, **kw)

    def admin(self, event: Any) -> Any:
        return self.invoke(self.outputs["AdminInvokeArn"], event)

    # -------------------------------------------------------------- HTTP door
    def http(self, key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        url = self.api.url.rstrip("/") + path
        data = json.dumps(body).encode() if body is not None else b""
        request = AWSRequest(method=method, url=url, data=data or None)
        if data:
            request.headers["content-type"] = "application/json"
        SigV4Auth(Credentials(key, key), "execute-api", REGION).add_auth(request)
        sent = urllib.request.Request(
            url, data=data or None, headers=dict(request.headers), method=method
        )
        try:
            with urllib.request.urlopen(sent, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    # -------------------------------------------------------------- read-back
    def jobs(self, prefix: str) -> list[str]:
        names: list[str] = []
        pages = self.sm.get_paginator("list_training_jobs").paginate(NameContains=prefix)
        for page in pages:
            names += [
                j["TrainingJobName"]
                for j in page["TrainingJobSummaries"]
                if j["TrainingJobName"].startswith(prefix)
            ]
        return sorted(names)

    def ledger(self) -> list[dict[str, Any]]:
        items, start = [], {}
        while True:
            page = self.ddb.scan(TableName=self.table, ConsistentRead=True, **start)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                return sorted(items, key=lambda i: i["pk"]["S"])
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    def usage(self, team: str) -> dict[str, Any]:
        return self.team(team, {"action": "whoami"})["usage"]


@pytest.fixture(scope="module")
def teams(deployed):
    """One teams deploy for the module, into the session's moto server."""
    # The sandbox loads a function with os.environ.update(its environment): put back what was
    # here, so a single-team function loaded later never sees this deploy's FTL_TEAMS.
    saved = dict(os.environ)
    started = time.perf_counter()
    outputs = deploy(deployed.endpoint, context=CONTEXT)
    print(f"\nteams deploy: {time.perf_counter() - started:.1f}s")
    launcher = outputs[f"{PLATFORM}-launcher"]
    credentials = {key: key for key in CALLERS}
    with LocalHttpApi(
        deployed.endpoint,
        launcher["TriggerFunctionName"],
        credentials=credentials,
        identities=CALLERS,
    ) as api:
        yield Teams(deployed.endpoint, outputs, api)
    os.environ.clear()
    os.environ.update(saved)


def test_outputs_name_the_team_and_admin_doors(teams):
    arn = teams.outputs["TriggerFunctionArn"]
    assert teams.outputs["TeamNlpInvokeArn"] == f"{arn}:team-nlp"
    assert teams.outputs["TeamVisionInvokeArn"] == f"{arn}:team-vision"
    assert teams.outputs["AdminInvokeArn"] == f"{arn}:admin"


# ------------------------------------------------------------------------------ helpers
def small(name: str, **fields: Any) -> dict[str, Any]:
    """A one-instance distilbert-spot request (ml.g5.xlarge, priced in CONTEXT)."""
    return {"template": "distilbert-spot", "job_name": name, **fields}


def settle(teams: Teams, team: str) -> None:
    """End the team's running jobs the way the launcher does: a describe that sees the end
    (moto reports every training job Completed) gives the job's usage back. A Completed job
    of a template with an evaluation policy starts its evaluation job (issue 36), which the
    next round ends the same way."""
    for _ in range(3):
        for job in teams.team(team, {"action": "list", "limit": 100})["jobs"]:
            if job["status"] in ("InProgress", "Submitting", "Stopping"):
                teams.team(team, {"action": "describe", "job_name": job["job_name"]})
    assert teams.usage(team)["instances"] == 0


def missing_message(teams: Teams, team: str, name: str) -> dict[str, Any]:
    return teams.team(team, {"action": "describe", "job_name": name})["error"]


# --------------------------------------------------------------------------------- tests
def test_whoami_names_the_team_its_limits_and_use_on_both_doors(teams):
    nlp = teams.team("nlp", {"action": "whoami"})
    assert nlp["team"] == "nlp" and nlp["admin"] is False and nlp["teams"] is True
    assert nlp["principal"] == "team-nlp alias"
    assert nlp["limits"] == {"max_instances": 4}
    assert set(nlp["usage"]) == {"instances", "month", "month_spend_usd", "month_reserved_usd"}
    vision = teams.team("vision", {"action": "whoami"})
    assert vision["limits"] == {"max_job_cost_usd": 7, "monthly_budget_usd": 10}
    admin = teams.admin({"action": "whoami"})
    assert admin == {
        "team": None,
        "admin": True,
        "principal": "admin alias",
        "teams": True,
        "limits": {},
        "usage": None,
    }
    status, me = teams.http("viskey", "GET", "/whoami")
    assert status == 200 and me["team"] == "vision" and me["principal"] == CALLERS["viskey"]
    status, me = teams.http("opskey", "GET", "/whoami")
    assert status == 200 and (me["team"], me["admin"], me["usage"]) == (None, True, None)


def test_a_caller_in_no_team_is_forbidden_over_http(teams):
    for method, path, body in (
        ("GET", "/whoami", None),
        ("GET", "/jobs", None),
        ("POST", "/jobs", small("intern")),
    ):
        status, body = teams.http("nokey", method, path, body)
        assert status == 403, body
        assert body["error"]["type"] == "Forbidden" and body["error"]["field"] == "caller"
        assert CALLERS["nokey"] in body["error"]["message"]
    assert teams.jobs("intern") == []


def test_unqualified_and_version_invokes_are_forbidden_and_name_the_aliases(teams):
    arn = teams.outputs["TriggerFunctionArn"]
    for target in (arn, teams.outputs["TriggerFunctionName"], f"{arn}:$LATEST"):
        err = teams.invoke(target, {"action": "whoami"})["error"]
        assert err["type"] == "Forbidden" and err["field"] == "function", err
        assert f"{arn}:team-<name>" in err["message"] and f"{arn}:admin" in err["message"]
    before = teams.jobs("nlp-unq")
    assert teams.invoke(arn, small("unq"))["error"]["type"] == "Forbidden"
    assert teams.jobs("nlp-unq") == before == []


def test_forged_http_events_by_direct_invoke_are_refused(teams):
    """An HTTP-shaped event naming another principal, sent straight to an alias."""
    forged = {
        "version": "2.0",
        "routeKey": "POST /jobs",
        "rawPath": "/jobs",
        "requestContext": {
            "http": {"method": "POST", "path": "/jobs"},
            "authorizer": {"iam": {"userArn": CALLERS["opskey"]}},
        },
        "body": json.dumps(small("forged")),
    }
    for send in (
        lambda e: teams.team("vision", e),
        teams.admin,
        lambda e: teams.invoke(teams.outputs["TriggerFunctionArn"], e),
    ):
        err = send(forged)["error"]
        assert err["type"] == "ValidationError" and err["field"] == "request", err
        assert "only from the HTTP API" in err["message"]
    listing = {**forged, "routeKey": "GET /jobs", "rawPath": "/jobs", "body": None}
    listing["requestContext"] = {**forged["requestContext"], "http": {"method": "GET"}}
    assert teams.team("nlp", listing)["error"]["field"] == "request"
    assert teams.jobs("vision-forged") == teams.jobs("nlp-forged") == []


def test_a_json_string_payload_reaches_the_handler_as_a_string_and_is_refused(teams):
    raw = json.dumps(json.dumps({"action": "whoami"})).encode()
    err = teams.team("nlp", None, raw=raw)["error"]
    assert (err["type"], err["field"]) == ("ValidationError", "request")
    assert "must be a JSON object" in err["message"]
    raw = json.dumps(json.dumps(small("stringly"))).encode()
    assert teams.team("nlp", None, raw=raw)["error"]["field"] == "request"
    assert teams.jobs("nlp-stringly") == []


def test_direct_submit_runs_as_the_team_with_its_role_prefixes_and_tags(teams):
    job = teams.team("nlp", small("own", client_token="own-1"))
    assert "error" not in job, job
    name = job["job_name"]
    assert name.startswith("nlp-own-") and job["team"] == "nlp"
    described = teams.sm.describe_training_job(TrainingJobName=name)
    assert described["RoleArn"] == teams.outputs["TeamNlpTrainingRoleArn"]
    assert described["RoleArn"] != teams.outputs["TeamVisionTrainingRoleArn"]
    ckpt = teams.outputs["CheckpointBucketName"]
    artifacts = teams.outputs["ArtifactBucketName"]
    assert described["CheckpointConfig"]["S3Uri"] == f"s3://{ckpt}/nlp/{name}/"
    assert described["OutputDataConfig"]["S3OutputPath"] == f"s3://{artifacts}/nlp/"
    assert job["output_s3_uri"] == f"s3://{artifacts}/nlp/{name}/"
    (train,) = [c for c in described["InputDataConfig"] if c["ChannelName"] == "train"]
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{teams.data}/nlp/imdb/train/"
    tags = {t["Key"]: t["Value"] for t in teams.sm.list_tags(ResourceArn=job["job_arn"])["Tags"]}
    assert tags["ftl:team"] == "nlp" and tags["ftl:requested-by"] == "team-nlp alias"
    assert tags["ftl:platform"] == PLATFORM
    item = teams.ddb.get_item(TableName=teams.table, Key={"pk": {"S": f"job#{name}"}})["Item"]
    assert item["team"]["S"] == "nlp" and item["requested_by"]["S"] == "team-nlp alias"
    # The price from ftl:prices: 1 x 1.5 USD/h x the template's 4 h default runtime.
    assert job["estimated_max_cost_usd"] == PRICE_G5 * 4


def test_http_submit_records_the_iam_caller_and_uses_the_team_role(teams):
    request = small("web", client_token="web-1")
    status, job = teams.http("viskey", "POST", "/jobs", request)
    assert status == 201, job
    assert job["job_name"].startswith("vision-web-") and job["team"] == "vision"
    described = teams.sm.describe_training_job(TrainingJobName=job["job_name"])
    assert described["RoleArn"] == teams.outputs["TeamVisionTrainingRoleArn"]
    tags = {t["Key"]: t["Value"] for t in teams.sm.list_tags(ResourceArn=job["job_arn"])["Tags"]}
    assert tags["ftl:requested-by"] == CALLERS["viskey"] and tags["ftl:team"] == "vision"
    status, again = teams.http("viskey", "POST", "/jobs", request)
    assert (status, again["job_name"]) == (200, job["job_name"])
    status, seen = teams.http("viskey", "GET", f"/jobs/{job['job_name']}")
    assert status == 200 and seen["requested_by"] == CALLERS["viskey"]
    settle(teams, "vision")


def test_cross_team_describe_stop_and_list_read_as_not_found(teams):
    mine = teams.team("nlp", small("private"))["job_name"]
    theirs = teams.team("vision", small("theirs"))["job_name"]
    ghost = mine[:-4] + "ffff" if not mine.endswith("ffff") else mine[:-4] + "eeee"
    nothing = missing_message(teams, "vision", ghost)
    for action in ("describe", "stop"):
        err = teams.team("vision", {"action": action, "job_name": mine})["error"]
        assert err == {**nothing, "message": nothing["message"].replace(ghost, mine)}, err
        assert err["type"] == "NotFound" and err["field"] == "job_name"
        status, body = teams.http(
            "viskey",
            "GET" if action == "describe" else "POST",
            f"/jobs/{mine}" + ("/stop" if action == "stop" else ""),
        )
        assert status == 404 and body["error"] == err
    # The job is untouched: nlp still sees it, and nothing asked SageMaker to stop it.
    assert teams.team("nlp", {"action": "describe", "job_name": mine})["job_name"] == mine
    listed = [j["job_name"] for j in teams.team("vision", {"action": "list"})["jobs"]]
    assert theirs in listed and not [n for n in listed if not n.startswith("vision-")]
    status, body = teams.http("nlpkey", "GET", "/jobs?limit=100")
    assert status == 200 and mine in [j["job_name"] for j in body["jobs"]]
    assert all(j["team"] == "nlp" for j in body["jobs"])
    # A team cannot ask for another team's listing (admins only).
    err = teams.team("vision", {"action": "list", "team": "nlp"})["error"]
    assert (err["type"], err["field"]) == ("ValidationError", "team")
    status, body = teams.http("viskey", "GET", "/jobs?team=nlp")
    assert status == 400 and body["error"]["field"] == "team"
    settle(teams, "nlp")
    settle(teams, "vision")


def test_list_next_tokens_are_bound_to_the_team(teams):
    for i in range(2):
        teams.team("nlp", small(f"page{i}"))
    page = teams.team("nlp", {"action": "list", "limit": 1})
    token = page["next_token"]
    assert teams.team("nlp", {"action": "list", "limit": 1, "next_token": token})["jobs"]
    for other in (lambda e: teams.team("vision", e), teams.admin):
        err = other({"action": "list", "limit": 1, "next_token": token})["error"]
        assert (err["type"], err["field"]) == ("ValidationError", "next_token")
    settle(teams, "nlp")


def test_admin_sees_every_team_filters_by_team_and_cannot_submit(teams):
    nlp = teams.team("nlp", small("adm"))["job_name"]
    vision = teams.team("vision", small("adm"))["job_name"]
    names = [j["job_name"] for j in teams.admin({"action": "list", "limit": 100})["jobs"]]
    assert nlp in names and vision in names
    only = teams.admin({"action": "list", "team": "vision", "limit": 100})["jobs"]
    assert vision in [j["job_name"] for j in only] and {j["team"] for j in only} == {"vision"}
    status, body = teams.http("opskey", "GET", "/jobs?team=nlp&limit=100")
    assert status == 200 and {j["team"] for j in body["jobs"]} == {"nlp"}
    assert teams.admin({"action": "describe", "job_name": nlp})["team"] == "nlp"
    status, body = teams.http("opskey", "GET", f"/jobs/{vision}")
    assert status == 200 and body["job_name"] == vision
    err = teams.admin({"action": "list", "team": "nobody"})["error"]
    assert err["field"] == "team"
    err = teams.admin(small("admin-submit"))["error"]
    assert (err["type"], err["field"]) == ("Forbidden", "team")
    status, body = teams.http("opskey", "POST", "/jobs", small("admin-submit"))
    assert status == 403 and body["error"]["field"] == "team"
    assert teams.jobs("admin-submit") == []
    settle(teams, "nlp")
    settle(teams, "vision")


def test_inputs_outside_the_team_prefix_are_refused_on_both_doors(teams):
    data = teams.data
    outside = [
        f"s3://{data}/vision/imdb/train/",  # another team's prefix
        f"s3://{data}/nlpx/imdb/train/",  # shares the letters, not the prefix
        f"s3://{data}/imdb/train/",  # the bucket's root
        f"s3://{data}/nlp/",  # the prefix itself, not under it
        f"s3://{teams.outputs['CheckpointBucketName']}/nlp/x/",  # not an input bucket
    ]
    for uri in outside:
        err = teams.team("nlp", small("leak", inputs={"train": uri}))["error"]
        assert err["type"] == "ValidationError" and err["field"] == "inputs.train", (uri, err)
    status, body = teams.http(
        "nlpkey", "POST", "/jobs", small("leak", inputs={"train": outside[0]})
    )
    assert status == 400 and f"s3://{data}/nlp/" in body["error"]["message"]
    assert teams.jobs("nlp-leak") == []
    ok = teams.team("nlp", small("inside", inputs={"train": f"s3://{data}/nlp/own/train/"}))
    assert "error" not in ok, ok
    settle(teams, "nlp")


def test_a_job_over_the_accounts_quota_is_refused_on_both_doors_and_writes_nothing(teams):
    """The sandbox's Service Quotas stand-in gives ml.p5.48xlarge a quota of 0: a job on it
    can never start, so submit and dry run refuse it naming the field, on both doors, and
    nothing is started or written (no job, no ledger item, no token)."""
    ledger = teams.ledger()
    request = {"template": "llm-sft", "job_name": "quota", "instance_type": "ml.p5.48xlarge"}
    for event in (request, {**request, "dry_run": True}, {**request, "client_token": "quota-1"}):
        err = teams.team("nlp", event)["error"]
        assert (err["type"], err["field"]) == ("ValidationError", "instance_type"), err
        assert "ml.p5.48xlarge for spot training job usage" in err["message"], err
        assert "request-service-quota-increase" in err["message"], err
    status, body = teams.http("nlpkey", "POST", "/jobs", {**request, "spot": False})
    assert status == 400, body
    assert (body["error"]["type"], body["error"]["field"]) == ("ValidationError", "instance_type")
    assert "ml.p5.48xlarge for training job usage" in body["error"]["message"]
    assert teams.jobs("nlp-quota") == [] and teams.ledger() == ledger
    # The token was not claimed: the same token on a job within the quota starts it.
    job = teams.team("nlp", small("quota", client_token="quota-1"))
    assert job["status"] == "InProgress", job
    settle(teams, "nlp")


def test_a_client_token_replayed_by_another_team_starts_a_second_job(teams):
    request = small("tok", client_token="shared-token-1")
    first = teams.team("nlp", request)
    second = teams.team("vision", request)
    assert first["job_name"].startswith("nlp-tok-")
    assert second["job_name"].startswith("vision-tok-")
    assert teams.jobs("nlp-tok-") == [first["job_name"]]
    assert teams.jobs("vision-tok-") == [second["job_name"]]
    # Each team's replay returns its own job; nothing new starts.
    assert teams.team("nlp", request)["job_name"] == first["job_name"]
    status, body = teams.http("viskey", "POST", "/jobs", request)
    assert (status, body["job_name"]) == (200, second["job_name"])
    # A Conflict names only the caller's own team's job.
    err = teams.team("vision", {**request, "job_name": "other"})["error"]
    assert err["type"] == "Conflict" and second["job_name"] in err["message"]
    assert first["job_name"] not in err["message"]
    assert len(teams.jobs("nlp-tok-") + teams.jobs("vision-tok-")) == 2
    settle(teams, "nlp")
    settle(teams, "vision")


def test_cost_cap_budget_and_unpriced_types_refuse_and_start_nothing(teams):
    settle(teams, "vision")
    ledger = teams.ledger()
    # 1 x 1.5 USD/h x 5 h = 7.5 > max_job_cost_usd 7.
    err = teams.team("vision", small("big", max_runtime_seconds=18000))["error"]
    assert err["type"] == "QuotaExceeded" and err["limit"] == "max_job_cost_usd", err
    assert (err["limit_value"], err["current_use"], err["requested"]) == (7, 0, 7.5)
    # A cap cannot be checked against an unknown price (ml.p3.2xlarge is not in ftl:prices).
    err = teams.team("vision", small("big", instance_type="ml.p3.2xlarge"))["error"]
    assert (err["type"], err["field"]) == ("ValidationError", "instance_type")
    assert teams.jobs("vision-big") == [] and teams.ledger() == ledger
    # 3 jobs of 2 h at 1.5 USD/h: 9 of the 10 USD budget; a fourth is refused.
    for i in range(3):
        job = teams.team("vision", small(f"budget{i}", max_runtime_seconds=7200))
        assert job["estimated_max_cost_usd"] == 3.0, job
    before, ledger = teams.jobs("vision-budget"), teams.ledger()
    err = teams.team("vision", small("budget3", max_runtime_seconds=7200))["error"]
    assert err["type"] == "QuotaExceeded" and err["limit"] == "monthly_budget_usd"
    assert (err["limit_value"], err["current_use"], err["requested"]) == (10, 9.0, 3.0)
    status, body = teams.http("viskey", "POST", "/jobs", small("budget3", max_runtime_seconds=7200))
    assert status == 429 and body["error"]["limit"] == "monthly_budget_usd"
    assert teams.jobs("vision-budget") == before and teams.ledger() == ledger
    assert teams.usage("vision")["month_reserved_usd"] == 9.0
    settle(teams, "vision")
    # Ended jobs give their reservation back (moto reports no billable time: no spend).
    usage = teams.usage("vision")
    assert (usage["month_reserved_usd"], usage["month_spend_usd"]) == (0, 0)


def test_a_team_without_cost_limits_may_launch_an_unpriced_type(teams):
    job = teams.team("nlp", small("unpriced", instance_type="ml.g6.xlarge"))
    assert (
        job["estimated_max_cost_usd"] is None and "ml.g6.xlarge" in job["estimate_unknown_reason"]
    )
    settle(teams, "nlp")


def test_twenty_concurrent_submits_against_four_instances_start_exactly_four(teams):
    settle(teams, "nlp")
    arn = teams.outputs["TeamNlpInvokeArn"]

    def submit(i: int) -> dict[str, Any]:
        # One client per thread, as 20 separate callers would have.
        reply = teams.client("lambda").invoke(
            FunctionName=arn, Payload=json.dumps(small("race", client_token=f"race-{i}")).encode()
        )
        return json.loads(reply["Payload"].read())

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(submit, range(20)))
    elapsed = time.perf_counter() - started
    won = [a for a in answers if "error" not in a]
    lost = [a["error"] for a in answers if "error" in a]
    assert len(won) == 4, (won, lost[:2])
    assert {e["type"] for e in lost} == {"QuotaExceeded"}, lost
    assert {(e["limit"], e["limit_value"], e["current_use"]) for e in lost} == {
        ("max_instances", 4, 4)
    }
    assert teams.jobs("nlp-race-") == sorted(a["job_name"] for a in won)
    assert teams.usage("nlp")["instances"] == 4
    # The losers left no job item and no token behind.
    race_items = [i for i in teams.ledger() if "race" in i["pk"]["S"]]
    assert len(race_items) == 8, [i["pk"]["S"] for i in race_items]  # 4 jobs + 4 tokens
    status, body = teams.http("nlpkey", "POST", "/jobs", small("race"))
    assert status == 429 and body["error"]["type"] == "QuotaExceeded"
    print(f"\n20 concurrent submits: {elapsed:.1f}s")
    settle(teams, "nlp")


def test_dry_run_runs_every_check_and_starts_and_writes_nothing(teams):
    """Team audio's first request: not even its usage item may be created."""
    ledger, jobs = teams.ledger(), teams.jobs("audio-")
    answer = teams.team("audio", small("dry", client_token="dry-1", dry_run=True))
    assert "error" not in answer, answer
    assert answer["dry_run"] is True and answer["status"] == "DryRun"
    assert answer["job_name"].startswith("audio-dry-") and "job_arn" not in answer
    assert answer["estimated_max_cost_usd"] == PRICE_G5 * 4
    checks = {c["check"]: c for c in answer["checks"]}
    assert list(checks) == ["validation", "team", "price", "service_quota", "max_instances"]
    assert checks["team"]["team"] == "audio" and checks["price"]["price_usd_per_hour"] == PRICE_G5
    # The sandbox's Service Quotas stand-in: 16 on-demand instances of each catalog type.
    quota = checks["service_quota"]
    assert quota["ok"] is True and quota["quota_value"] == 16, quota
    assert quota["quota_name"] == "ml.g5.xlarge for spot training job usage", quota
    assert checks["max_instances"] == {
        "check": "max_instances",
        "ok": True,
        "limit": 2,
        "current": 0,
        "requested": 1,
    }
    rendered = answer["create_training_job"]
    assert rendered["RoleArn"] == teams.outputs["TeamAudioTrainingRoleArn"]
    assert rendered["TrainingJobName"] == answer["job_name"]
    status, body = teams.http(
        "nlpkey", "POST", "/jobs", small("dry", client_token="dry-1", dry_run=True)
    )
    assert status == 200 and body["dry_run"] is True and body["team"] == "nlp"
    # A dry run that breaks a rule gets the real submit's error.
    err = teams.team("audio", small("dry", instance_count=2, dry_run=True))["error"]
    assert err["field"] == "instance_count"
    assert teams.jobs("audio-") == jobs and teams.jobs("nlp-dry") == []
    assert teams.ledger() == ledger
    # The token was not claimed: a real submit with it starts the job.
    job = teams.team("audio", small("dry", client_token="dry-1"))
    assert job["status"] == "InProgress" and teams.jobs("audio-dry-") == [job["job_name"]]
    settle(teams, "audio")
