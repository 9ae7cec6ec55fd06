"""The sandbox's Invoke runs a function as Lambda does: the payload decoded once, and the
invoked ARN (with its alias) in the context."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from botocore.exceptions import ClientError

from sandbox import server
from sandbox.server import Sandbox
from tests.lambda_support import client

ECHO = (
    "def handler(event, context):\n"
    "    return {'type': type(event).__name__, 'arn': context.invoked_function_arn}\n"
)


@pytest.fixture(scope="module")
def echo():
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("h.py", ECHO)
    # This module's own server points the Invoke shim at itself; put back the session
    # sandbox's endpoint afterwards, or functions first invoked later would reach a stopped one.
    session_endpoint = list(server._ENDPOINT)
    with Sandbox() as sandbox:
        role = client("iam", sandbox.endpoint).create_role(
            RoleName="echo", AssumeRolePolicyDocument="{}"
        )["Role"]["Arn"]
        lam = client("lambda", sandbox.endpoint)
        lam.create_function(
            FunctionName="echo",
            Runtime="python3.12",
            Role=role,
            Handler="h.handler",
            Code={"ZipFile": code.getvalue()},
            Publish=True,
        )
        lam.create_alias(FunctionName="echo", Name="team-x", FunctionVersion="1")
        yield lam
    server._ENDPOINT[:] = session_endpoint


def _invoke(lam, **kwargs):
    return json.loads(lam.invoke(FunctionName="echo", **kwargs)["Payload"].read())


def test_a_json_string_payload_reaches_the_handler_as_a_string(echo):
    assert _invoke(echo, Payload=json.dumps('{"action": "list"}'))["type"] == "str"
    assert _invoke(echo, Payload=b'{"action": "list"}')["type"] == "dict"


def test_the_alias_is_in_the_invoked_arn(echo):
    assert _invoke(echo, Payload=b"{}", Qualifier="team-x")["arn"].endswith(":function:echo:team-x")
    assert _invoke(echo, Payload=b"{}")["arn"].endswith(":function:echo")
    with pytest.raises(ClientError):
        _invoke(echo, Payload=b"{}", Qualifier="http")  # no such alias: as Lambda, a 404
