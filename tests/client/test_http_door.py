"""The HTTP door without moto: the client's SigV4 requests against the local HTTP API stand-in,
whose Lambda client is stubbed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.stub import ANY, Stubber

from ftl_client import LauncherClient, LauncherError
from sandbox.http_api import LocalHttpApi
from tests.client.support import aws, job, payload


class Api:
    def __init__(self, api: LocalHttpApi) -> None:
        self.api = api
        self.lam = aws("lambda")
        self.stub = Stubber(self.lam)
        self.events: list[dict] = []
        self.lam.meta.events.register(
            "before-parameter-build.lambda.Invoke",
            lambda params, **_: self.events.append(json.loads(params["Payload"])),
        )
        api._lambda = self.lam
        self.stub.activate()

    def answer(self, status: int, body: dict) -> None:
        reply = {"statusCode": status, "headers": {"content-type": "application/json"}}
        reply["body"] = json.dumps(body)
        self.stub.add_response(
            "invoke",
            {"StatusCode": 200, "Payload": payload(reply)},
            {"FunctionName": "fn", "Qualifier": "http", "Payload": ANY},
        )


@pytest.fixture
def api() -> Iterator[Api]:
    with LocalHttpApi("http://localhost:9", "fn") as local:
        yield Api(local)


def http_client(api: Api) -> LauncherClient:
    return LauncherClient(api_url=api.api.url, transport="http")


def send(url: str, method: str = "GET", data: bytes | None = None, headers: dict | None = None):
    request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def signed(url: str, method: str, body: bytes | None, secret: str = "testing") -> dict:
    request = AWSRequest(
        method=method, url=url, data=body, headers={"content-type": "application/json"}
    )
    SigV4Auth(Credentials("testing", secret), "execute-api", "us-east-1").add_auth(request)
    return dict(request.headers.items())


def test_signed_submit_reaches_the_function_as_a_payload_v2_event(api):
    api.answer(201, job())
    result = http_client(api).submit("distilbert-spot", hyperparameters={"seed": 7})
    assert result["job_name"] == job()["job_name"]
    event = api.events[0]
    assert event["version"] == "2.0" and event["routeKey"] == "POST /jobs"
    assert event["requestContext"]["http"]["method"] == "POST"
    iam = event["requestContext"]["authorizer"]["iam"]
    assert iam["userArn"] == "arn:aws:iam::123456789012:user/sandbox-testing"
    body = json.loads(event["body"])
    assert body["template"] == "distilbert-spot" and body["hyperparameters"] == {"seed": 7}
    assert "action" not in body


def test_list_and_describe_use_their_routes(api):
    api.answer(200, {"jobs": [job()]})
    api.answer(200, job(status="Completed"))
    client = http_client(api)
    assert len(client.list_jobs(template="distilbert-spot", status="Completed")) == 1
    assert client.describe("sbx-1")["status"] == "Completed"
    listing, describe = api.events
    assert listing["routeKey"] == "GET /jobs"
    assert listing["queryStringParameters"] == {
        "template": "distilbert-spot",
        "status": "Completed",
    }
    assert describe["routeKey"] == "GET /jobs/{job_name}"
    assert describe["pathParameters"] == {"job_name": "sbx-1"}


def test_queue_lists_queued_jobs_through_the_list_route(api):
    api.answer(200, {"jobs": [job("b", status="Queued")], "next_token": "t"})
    api.answer(200, {"jobs": [job("a", status="Queued", queue_position=1)]})
    jobs = http_client(api).queue(team="nlp")
    assert [j["job_name"] for j in jobs] == ["a", "b"]
    first, second = api.events
    assert first["routeKey"] == second["routeKey"] == "GET /jobs"
    assert first["queryStringParameters"] == {"status": "Queued", "team": "nlp"}
    assert second["queryStringParameters"] == {"status": "Queued", "team": "nlp", "next_token": "t"}


def test_contract_errors_keep_their_http_status(api):
    api.answer(404, {"error": {"type": "NotFound", "message": "no job", "field": "job_name"}})
    with pytest.raises(LauncherError) as info:
        http_client(api).stop("nope")
    assert (info.value.type, info.value.http_status, info.value.field) == (
        "NotFound",
        404,
        "job_name",
    )
    assert api.events[0]["routeKey"] == "POST /jobs/{job_name}/stop"


def test_unsigned_badly_signed_and_tampered_requests_are_forbidden(api):
    url = api.api.url + "jobs"
    body = json.dumps({"template": "distilbert-spot"}).encode()
    assert send(url, "POST", body) == (403, {"message": "Forbidden"})
    wrong = signed(url, "POST", body, secret="not-the-secret")
    assert send(url, "POST", body, wrong) == (403, {"message": "Forbidden"})
    good = signed(url, "POST", body)
    tampered = json.dumps({"template": "bert-large-qa"}).encode()
    assert send(url, "POST", tampered, good) == (403, {"message": "Forbidden"})
    assert send(url + "?status=Completed", "GET", None, signed(url, "GET", None))[0] == 403
    assert api.events == []  # nothing reached the function


def test_unknown_routes_are_not_found(api):
    url = api.api.url + "jobs/x/delete"
    assert send(url, "POST", b"{}", signed(url, "POST", b"{}")) == (404, {"message": "Not Found"})
    with pytest.raises(LauncherError) as info:
        LauncherClient(api_url=api.api.url + "v2/", transport="http").templates()
    assert info.value.type == "NotFound" and info.value.http_status == 404
