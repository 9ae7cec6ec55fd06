"""Teams through both doors against moto: identity, isolation, data prefixes, limits, dry_run."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.lambda_support import (
    client,
    create_ledger_table,
    emf_records,
    http_event,
    load_handler,
    trigger_env,
)
from tests.unit.trigger.conftest import TRIGGER_DIR, Launcher
from testsupport import ACCOUNT

ROLE_A = f"arn:aws:iam::{ACCOUNT}:role/ftl-alpha-training"
ROLE_B = f"arn:aws:iam::{ACCOUNT}:role/ftl-beta-training"
ALICE = f"arn:aws:sts::{ACCOUNT}:assumed-role/alpha-scientists/alice"
BOB = f"arn:aws:sts::{ACCOUNT}:assumed-role/beta-scientists/bob"
ADMIN = f"arn:aws:iam::{ACCOUNT}:role/platform-admin"
STRANGER = f"arn:aws:iam::{ACCOUNT}:user/stranger"


def teams_env(team_b_limits: dict | None = None) -> dict[str, str]:
    teams = [
        {
            "name": "alpha",
            "principals": [f"arn:aws:iam::{ACCOUNT}:role/alpha-scientists"],
            "buckets": ["alpha-extra"],
        },
        {
            "name": "beta",
            "principals": [f"arn:aws:iam::{ACCOUNT}:role/beta-scientists"],
            "limits": team_b_limits or {},
        },
    ]
    return {
        "FTL_TEAMS": json.dumps(teams),
        "FTL_ADMINS": json.dumps([ADMIN]),
        "FTL_TEAM_ROLES": json.dumps({"alpha": ROLE_A, "beta": ROLE_B}),
    }


def make(moto_endpoint, monkeypatch, tmp_path, limits=None) -> Launcher:
    table = f"ftl-jobs-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    env = trigger_env(moto_endpoint, tmp_path, table=table) | teams_env(limits)
    return Launcher(load_handler(TRIGGER_DIR, monkeypatch, env), moto_endpoint, table)


@pytest.fixture
def teams(moto_endpoint, monkeypatch, tmp_path) -> Launcher:
    return make(moto_endpoint, monkeypatch, tmp_path)


def body(resp):
    return json.loads(resp["body"])


def job(prefix, **extra):
    return {"template": "distilbert-spot", "job_name": prefix, **extra}


def as_user(launcher, arn, method, path, payload=None, query=None):
    resp = launcher(http_event(method, path, payload, query=query, user_arn=arn))
    return resp["statusCode"], body(resp)


def test_each_door_names_the_team_and_the_real_principal(teams, prefix):
    direct = teams(job(prefix), alias="team-alpha")
    assert direct["team"] == "alpha" and direct["job_name"].startswith(f"alpha-{prefix}-")
    assert direct["checkpoint_s3_uri"].startswith("s3://ftl-checkpoints/alpha/")
    assert direct["output_s3_uri"] == f"s3://ftl-artifacts/alpha/{direct['job_name']}/"
    status, http = as_user(teams, BOB, "POST", "/jobs", job(prefix))
    assert status == 201 and http["team"] == "beta"
    described = teams({"action": "describe", "job_name": http["job_name"]}, alias="team-beta")
    assert described["requested_by"] == BOB
    assert (
        teams({"action": "describe", "job_name": direct["job_name"]}, alias="team-alpha")[
            "requested_by"
        ]
        == "team-alpha alias"
    )
    tags = teams.sagemaker.list_tags(ResourceArn=http["job_arn"])["Tags"]
    assert {"Key": "ftl:team", "Value": "beta"} in tags


def test_the_team_role_is_the_one_passed(teams, prefix):
    sent = []
    events = teams.module.RUNTIME.sagemaker.meta.events
    hook = lambda params, **_: sent.append(params)  # noqa: E731
    events.register("provide-client-params.sagemaker.CreateTrainingJob", hook)
    try:
        teams(job(prefix), alias="team-alpha")
        as_user(teams, BOB, "POST", "/jobs", job(prefix))
    finally:
        events.unregister("provide-client-params.sagemaker.CreateTrainingJob", hook)
    assert [p["RoleArn"] for p in sent] == [ROLE_A, ROLE_B]
    assert sent[1]["OutputDataConfig"]["S3OutputPath"] == "s3://ftl-artifacts/beta/"


def test_another_teams_job_is_not_found_on_both_doors(teams, prefix):
    name = teams(job(prefix), alias="team-alpha")["job_name"]
    missing = teams({"action": "describe", "job_name": "beta-never-1"}, alias="team-beta")
    for action in ("describe", "stop"):
        resp = teams({"action": action, "job_name": name}, alias="team-beta")
        assert resp["error"]["type"] == "NotFound"
        assert resp["error"]["message"] == missing["error"]["message"].replace("beta-never-1", name)
    assert as_user(teams, BOB, "GET", f"/jobs/{name}")[0] == 404
    assert as_user(teams, BOB, "POST", f"/jobs/{name}/stop")[0] == 404
    assert name not in [j["job_name"] for j in teams({"action": "list"}, alias="team-beta")["jobs"]]
    assert name in [j["job_name"] for j in teams({"action": "list"}, alias="team-alpha")["jobs"]]
    # beta's stop never reached alpha's job.
    owner = teams({"action": "describe", "job_name": name}, alias="team-alpha")
    assert owner["status"] != "Stopping"


def test_admins_see_every_team_and_filter_by_team(teams, prefix):
    a = teams(job(prefix), alias="team-alpha")["job_name"]
    b = as_user(teams, BOB, "POST", "/jobs", job(prefix))[1]["job_name"]
    names = [j["job_name"] for j in teams({"action": "list", "limit": 100}, alias="admin")["jobs"]]
    assert {a, b} <= set(names)
    only_b = teams({"action": "list", "team": "beta"}, alias="admin")["jobs"]
    assert {j["team"] for j in only_b} == {"beta"}
    status, described = as_user(teams, ADMIN, "GET", f"/jobs/{a}")
    assert status == 200 and described["team"] == "alpha"
    assert teams({"action": "list", "team": "alpha"}, alias="team-beta")["error"]["field"] == "team"


@pytest.mark.parametrize(
    ("alias", "event"),
    [
        (None, {"action": "list"}),  # unqualified invoke in teams mode
        ("$LATEST", {"action": "list"}),
        ("7", {"action": "list"}),
        ("team-zz", {"action": "list"}),
    ],
)
def test_direct_invokes_without_a_team_alias_are_forbidden(teams, alias, event):
    resp = teams(event, alias=alias or "")
    assert resp["error"]["type"] == "Forbidden"
    assert ":team-<name>" in resp["error"]["message"]


def test_http_callers_in_no_team_are_forbidden(teams, prefix):
    status, err = as_user(teams, STRANGER, "POST", "/jobs", job(prefix))
    assert status == 403 and err["error"]["type"] == "Forbidden"
    assert STRANGER in err["error"]["message"]
    assert teams.jobs_named(prefix) == []


def test_forged_http_events_on_the_direct_door_are_refused(teams, prefix):
    forged = http_event("POST", "/jobs", job(prefix), user_arn=ADMIN)
    for alias in ("team-alpha", "admin", ""):
        resp = teams(forged, alias=alias)
        assert resp == {
            "error": {
                "type": "ValidationError",
                "message": "HTTP events are accepted only from the HTTP API",
                "field": "request",
            }
        }
    assert teams({"action": "list"}, alias="http")["error"]["field"] == "request"
    assert teams.jobs_named(prefix) == []


@pytest.mark.parametrize(
    "uri",
    [
        "s3://ftl-data/beta/private/",
        "s3://ftl-data/alpha",  # a bare prefix would also match alphab/...
        "s3://ftl-data/shared/",
        "s3://other-bucket/x/",
    ],
)
def test_inputs_outside_the_team_prefix_are_refused(teams, prefix, uri):
    resp = teams(job(prefix, inputs={"train": uri}), alias="team-alpha")
    assert resp["error"]["type"] == "ValidationError"
    assert resp["error"]["field"] == "inputs.train"
    assert "s3://ftl-data/alpha/" in resp["error"]["message"]
    assert teams.jobs_named(prefix) == []


def test_inputs_under_the_team_prefix_or_its_bucket_are_accepted(teams, prefix):
    ok = teams(
        job(
            prefix,
            inputs={
                "train": "s3://ftl-data/alpha/imdb/",
                "validation": "s3://alpha-extra/imdb-validation/",
            },
        ),
        alias="team-alpha",
    )
    assert ok["status"] == "InProgress", ok


def test_token_replay_across_teams_starts_a_second_job(teams, prefix):
    request = job(prefix, client_token=prefix)
    first = teams(request, alias="team-alpha")
    again = teams(request, alias="team-alpha")
    other = teams(request, alias="team-beta")
    assert first["job_name"] == again["job_name"]
    assert other["job_name"] != first["job_name"] and other["team"] == "beta"
    conflict = teams(job(prefix, client_token=prefix, spot=False), alias="team-beta")
    assert conflict["error"]["type"] == "Conflict"
    assert first["job_name"] not in conflict["error"]["message"]


def test_next_tokens_are_bound_to_the_team(teams, prefix):
    for _ in range(3):
        teams(job(prefix), alias="team-alpha")
    page = teams({"action": "list", "limit": 1}, alias="team-alpha")
    token = page["next_token"]
    assert teams({"action": "list", "limit": 1, "next_token": token}, alias="team-alpha")["jobs"]
    for alias in ("team-beta", "admin"):
        resp = teams({"action": "list", "next_token": token}, alias=alias)
        assert resp["error"]["field"] == "next_token"
    edited = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    resp = teams({"action": "list", "next_token": edited}, alias="team-alpha")
    assert resp["error"]["field"] == "next_token"


def test_an_admins_next_token_is_bound_to_the_team_it_listed(teams, prefix):
    """A token from an admin's list of team alpha continues only that list: with team beta
    (or no team) it is refused, naming next_token, not read as a page of beta's jobs."""
    for alias in ("team-alpha", "team-alpha", "team-beta"):
        teams(job(prefix), alias=alias)
    page = teams({"action": "list", "limit": 1, "team": "alpha"}, alias="admin")
    token = page["next_token"]
    same = {"action": "list", "limit": 1, "team": "alpha", "next_token": token}
    again = teams(same, alias="admin")
    assert [j["team"] for j in again["jobs"]] == ["alpha"]
    for other in ({"team": "beta"}, {}):
        resp = teams({"action": "list", "next_token": token, **other}, alias="admin")
        assert resp["error"]["type"] == "ValidationError", resp
        assert resp["error"]["field"] == "next_token"


def test_whoami_on_both_doors(teams):
    assert teams({"action": "whoami"}, alias="team-alpha")["team"] == "alpha"
    status, me = as_user(teams, BOB, "GET", "/whoami")
    assert status == 200 and me["team"] == "beta" and me["principal"] == BOB
    assert me["usage"]["instances"] == 0 and me["admin"] is False
    admin = teams({"action": "whoami"}, alias="admin")
    assert admin["admin"] is True and admin["team"] is None


def test_stop_of_a_job_still_submitting_is_a_conflict(teams, prefix, monkeypatch):
    from ftl_trigger.backends.direct import backend as backend_direct

    def crash(sm, rendered):
        raise SystemExit

    monkeypatch.setattr(backend_direct, "start_job", crash)
    with pytest.raises(SystemExit):
        teams(job(prefix), alias="team-alpha")
    (item,) = [i for i in teams.ledger_items() if i["pk"]["S"].startswith("job#")]
    resp = teams({"action": "stop", "job_name": item["job_name"]["S"]}, alias="team-alpha")
    assert resp["error"]["type"] == "Conflict" and "still starting" in resp["error"]["message"]


# ------------------------------------------------------------------------------ spend
def test_submit_returns_the_estimate_and_describe_the_cost(teams, prefix):
    resp = teams(job(prefix, max_runtime_seconds=7200, spot=False), alias="team-alpha")
    # distilbert-spot's default instance: ml.g5.xlarge at the test price 1.0 USD/h.
    assert resp["instance_type"] == "ml.g5.xlarge"
    assert resp["estimated_max_cost_usd"] == pytest.approx(1 * 1.0 * 2)
    unknown = teams(job(prefix, instance_type="ml.g6.xlarge"), alias="team-alpha")
    assert unknown["estimated_max_cost_usd"] is None
    assert "ml.g6.xlarge" in unknown["estimate_unknown_reason"]


def test_a_team_jobs_end_seen_by_describe_reports_the_teams_month_spend(teams, prefix, capsys):
    """When describe records the end of a team job (and gives its usage back) before the
    job-events function does, its fleet-metrics line carries the team's month-to-date spend,
    which the budget alarms read; the job-events function then publishes nothing for it."""
    name = teams(job(prefix, spot=False), alias="team-alpha")["job_name"]
    capsys.readouterr()
    described = teams({"action": "describe", "job_name": name}, alias="team-alpha")
    assert described["status"] == "Completed"
    (line,) = emf_records(capsys.readouterr().out)
    assert line["JobName"] == name and line["Team"] == "alpha" and line["JobsCompleted"] == 1
    spend = teams({"action": "whoami"}, alias="team-alpha")["usage"]
    assert line["MonthSpendUsd"] == pytest.approx(spend["month_spend_usd"])


@pytest.fixture
def capped(moto_endpoint, monkeypatch, tmp_path) -> Launcher:
    limits = {"max_instances": 4, "max_job_cost_usd": 10, "monthly_budget_usd": 20}
    return make(moto_endpoint, monkeypatch, tmp_path, limits)


def test_limits_refuse_with_quota_exceeded_and_start_nothing(capped, prefix):
    too_long = capped(job(prefix, max_runtime_seconds=12 * 3600, spot=False), alias="team-beta")
    err = too_long["error"]
    assert err["type"] == "QuotaExceeded" and err["limit"] == "max_job_cost_usd"
    assert err["limit_value"] == 10 and err["requested"] == pytest.approx(12)
    status, http = as_user(capped, BOB, "POST", "/jobs", job(prefix, max_runtime_seconds=12 * 3600))
    assert status == 429 and http["error"]["limit"] == "max_job_cost_usd"
    unpriced = capped(job(prefix, instance_type="ml.g6.xlarge"), alias="team-beta")
    assert unpriced["error"]["field"] == "instance_type"
    for _ in range(3):  # 3 x 6 USD reserved of a 20 USD budget
        assert capped(job(prefix, max_runtime_seconds=6 * 3600), alias="team-beta")["status"] == (
            "InProgress"
        )
    over = capped(job(prefix, max_runtime_seconds=6 * 3600), alias="team-beta")["error"]
    assert over["limit"] == "monthly_budget_usd" and over["current_use"] == pytest.approx(18)
    assert len(capped.jobs_named("beta-" + prefix)) == 3
    assert capped({"action": "whoami"}, alias="team-beta")["usage"]["instances"] == 3


def test_a_refused_submit_writes_no_usage_record(capped, prefix):
    """QuotaExceeded writes nothing (docs/API.md, Limits): not even an all-zero usage item
    for a team that has never started a job; the first job that fits creates it."""
    before = capped.ledger_items()
    refused = capped(job(prefix, max_runtime_seconds=12 * 3600, spot=False), alias="team-beta")
    assert refused["error"]["type"] == "QuotaExceeded"
    assert capped.ledger_items() == before
    assert capped({"action": "whoami"}, alias="team-beta")["usage"]["instances"] == 0
    assert capped.ledger_items() == before  # whoami reads only
    assert capped(job(prefix, max_runtime_seconds=3600), alias="team-beta")["status"] == (
        "InProgress"
    )
    usage = [i for i in capped.ledger_items() if i["pk"]["S"] == "usage#beta"]
    assert [(u["instances"]["N"], u["team_usage"]["S"]) for u in usage] == [("1", "beta")]


def test_concurrent_submits_start_exactly_the_jobs_that_fit(capped, prefix):
    request = job(prefix, max_runtime_seconds=600)
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda _: capped(dict(request), alias="team-beta"), range(20)))
    started = [r for r in results if "job_name" in r]
    refused = [r for r in results if r.get("error", {}).get("type") == "QuotaExceeded"]
    assert len(started) == 4 and len(refused) == 16, results
    assert len(capped.jobs_named("beta-" + prefix)) == 4
    assert {r["error"]["limit"] for r in refused} == {"max_instances"}


def test_dry_run_checks_everything_and_writes_nothing(capped, prefix):
    before = capped.ledger_items()
    resp = capped(job(prefix, dry_run=True, max_runtime_seconds=3600), alias="team-beta")
    assert resp["dry_run"] is True and resp["estimated_max_cost_usd"] == pytest.approx(1.0)
    assert resp["create_training_job"]["RoleArn"] == ROLE_B
    assert {c["check"] for c in resp["checks"]} >= {"validation", "team", "max_instances"}
    refused = capped(job(prefix, dry_run=True, max_runtime_seconds=11 * 3600), alias="team-beta")
    assert refused["error"]["type"] == "QuotaExceeded"
    assert capped.jobs_named("beta-" + prefix) == []
    # Nothing at all: not even the team's usage item, which this team's first call creates.
    assert not [i for i in before if i["pk"]["S"] == "usage#beta"]
    assert capped.ledger_items() == before


def test_a_failed_start_gives_the_instances_back(capped, prefix, monkeypatch):
    sm = capped.module.RUNTIME.sagemaker
    from botocore.exceptions import ClientError

    def refuse(**kwargs):
        raise ClientError(
            {"Error": {"Code": "ResourceLimitExceeded", "Message": "quota"}}, "CreateTrainingJob"
        )

    monkeypatch.setattr(sm, "create_training_job", refuse)
    for _ in range(5):
        assert capped(job(prefix), alias="team-beta")["error"]["type"] == "CapacityError"
    usage = capped({"action": "whoami"}, alias="team-beta")["usage"]
    assert usage["instances"] == 0 and usage["month_reserved_usd"] == 0
