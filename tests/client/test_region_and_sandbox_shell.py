"""Issue 18, points 1-4: the region the client reads, and what ``make sandbox`` hands a second
shell (the exports, the HTTP stand-in's URL, a free port when 4566 is taken)."""

from __future__ import annotations

import socket
import subprocess

import pytest

from ftl_client import LauncherClient, LauncherError
from sandbox.server import PortInUse, Sandbox, free_port, port_free
from sandbox.shell import DEFAULT_PORT, choose_port, export_lines, exports

OUTPUTS = {
    "ftl-foundation": {"DataBucketName": "ftl-foundation-databucket-abc"},
    "ftl-launcher": {"TriggerFunctionName": "ftl-trigger", "JobApiUrl": "https://None.x/"},
}


@pytest.fixture
def no_region(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))


def test_aws_region_alone_is_the_clients_region(no_region, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert LauncherClient(function_name="ftl-trigger").region == "eu-west-1"


def test_aws_default_region_wins_over_aws_region(no_region, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert LauncherClient(function_name="ftl-trigger").region == "us-west-2"


def test_no_region_names_the_variable_botocore_reads(no_region):
    with pytest.raises(LauncherError) as caught:
        LauncherClient(function_name="ftl-trigger")
    assert caught.value.type == "ConfigError"
    assert "set AWS_DEFAULT_REGION" in caught.value.message


def test_exports_carry_the_data_bucket_and_the_http_stand_in():
    env = exports("http://localhost:4566", OUTPUTS, "http://127.0.0.1:5555/")
    assert env["DATA_BUCKET"] == "ftl-foundation-databucket-abc"
    assert env["FTL_API_URL"] == "http://127.0.0.1:5555/"
    assert env["AWS_ENDPOINT_URL"] == "http://localhost:4566"
    assert env["AWS_DEFAULT_REGION"] == "us-east-1"


def test_export_lines_run_in_a_fresh_shell_and_put_ftl_on_path(tmp_path):
    bin_dir = tmp_path / "venv bin"
    bin_dir.mkdir()
    fake = bin_dir / "ftl"
    fake.write_text('#!/bin/sh\necho "ftl $DATA_BUCKET $FTL_API_URL $AWS_ENDPOINT_URL"\n')
    fake.chmod(0o755)
    lines = export_lines(
        "http://localhost:4566", OUTPUTS, "http://127.0.0.1:5555/", venv_bin=bin_dir
    )
    script = "\n".join([*lines, "ftl"])
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == [
        "ftl",
        "ftl-foundation-databucket-abc",
        "http://127.0.0.1:5555/",
        "http://localhost:4566",
    ]


@pytest.fixture
def taken_port():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_taken_default_port_gives_way_to_a_free_one_and_says_so(taken_port):
    port, note = choose_port(None, default=taken_port)
    assert port != taken_port and port_free(port)
    assert f"port {taken_port} is in use" in note and f"listens on {port} instead" in note
    assert "--port N" in note


def test_a_free_default_port_is_used_quietly():
    port = free_port()
    assert choose_port(None, default=port) == (port, None)
    assert DEFAULT_PORT == 4566


def test_a_requested_port_that_is_taken_is_an_error_not_a_hang(taken_port):
    with pytest.raises(PortInUse, match=f"port {taken_port} is in use.*--port N"):
        choose_port(taken_port)
    with pytest.raises(PortInUse, match=f"port {taken_port} is in use"), Sandbox(port=taken_port):
        pass


def test_demo_refuses_a_taken_port_with_exit_2(taken_port, capsys):
    from sandbox.demo import main

    assert main(["--serve", "--port", str(taken_port)]) == 2
    assert f"error: port {taken_port} is in use" in capsys.readouterr().err


def test_teams_variant_exports_the_teams_alias_and_the_caller_is_in_a_team():
    from sandbox.shell import SANDBOX_CALLER, TEAMS, teams_context

    outputs = {**OUTPUTS, "ftl-launcher": {**OUTPUTS["ftl-launcher"], "TeamNlpInvokeArn": "arn:x"}}
    assert exports("http://localhost:4566", outputs, None)["FTL_FUNCTION_NAME"] == "arn:x"
    assert "FTL_FUNCTION_NAME" not in exports("http://localhost:4566", OUTPUTS, None)
    assert SANDBOX_CALLER in TEAMS[0]["principals"]
    assert set(teams_context()) == {"ftl:teams", "ftl:admins"}
