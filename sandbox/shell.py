"""`make sandbox`: keep the sandbox up and hand a second shell what ``ftl`` needs.

The sandbox listens on ``localhost:4566`` unless that port is taken: then it takes a free port
and says so (``--port N`` / ``make sandbox PORT=N`` asks for one; a requested port that is taken
is an error, not a silent change). It also starts the HTTP API's stand-in
(:class:`sandbox.http_api.LocalHttpApi`, moto has no API Gateway v2) in front of the deployed
trigger, so ``ftl --via http`` works as it does against AWS.

:func:`export_lines` are the lines to paste into the second shell: the sandbox's AWS
variables, ``DATA_BUCKET`` (the data bucket the quick start uploads to), ``FTL_API_URL``
(the HTTP stand-in) and the virtual environment's ``bin`` on ``PATH``, so the README's
``ftl ...`` lines run as written.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sandbox.deploy import ACCOUNT, ROOT, sandbox_env
from sandbox.server import PortInUse, free_port, port_free

DEFAULT_PORT = 4566
VENV_BIN = ROOT / ".venv" / "bin"


def choose_port(requested: int | None, *, default: int = DEFAULT_PORT) -> tuple[int, str | None]:
    """The port to serve on and a note for the user when it is not the one they expect.

    A ``requested`` port that is taken raises :class:`PortInUse`; the default port, when
    taken, gives way to a free one.
    """
    if requested is not None:
        if not 1 <= requested <= 65535:
            raise PortInUse(f"--port must be between 1 and 65535, got {requested}")
        if not port_free(requested):
            raise PortInUse(
                f"port {requested} is in use; stop what listens there or pick another port "
                "with --port N (make sandbox PORT=N)"
            )
        return requested, None
    if port_free(default):
        return default, None
    port = free_port()
    return port, (
        f"port {default} is in use (another sandbox or localstack?); this sandbox listens on "
        f"{port} instead (choose one with --port N, make sandbox PORT=N)"
    )


# ``--teams``: the sandbox's caller (``testing``; the HTTP stand-in reports it as the IAM user
# ``sandbox-testing``) is in team ``nlp``; ``vision`` is a second team to be refused by.
SANDBOX_CALLER = f"arn:aws:iam::{ACCOUNT}:user/sandbox-testing"
TEAMS = [
    {"name": "nlp", "principals": [SANDBOX_CALLER], "limits": {"max_instances": 8}},
    {"name": "vision", "principals": [f"arn:aws:iam::{ACCOUNT}:role/vision-*"]},
]
ADMINS = [f"arn:aws:iam::{ACCOUNT}:role/ops"]
TEAM_INVOKE_OUTPUT = "TeamNlpInvokeArn"


def teams_context() -> dict[str, str]:
    """The ``-c`` context of the ``--teams`` variant."""
    return {"ftl:teams": json.dumps(TEAMS), "ftl:admins": json.dumps(ADMINS)}


class JobFinisher:
    """Queue mode while serving: keeps the Batch stand-in's rules and its event pump running,
    and ends each training job the stand-in started ``run_seconds`` after it started (moto
    has no training to wait for), so queued jobs move on and ``ftl wait`` returns."""

    def __init__(self, standin: Any, pump: Any, run_seconds: float) -> None:
        self.standin, self.pump, self.run_seconds = standin, pump, run_seconds
        self._stop = threading.Event()

    def finish_due(self) -> list[str]:
        """End the training jobs that have run long enough; their names."""
        now = self.standin.clock()
        due = [
            job.training_arn.rsplit("/", 1)[1]
            for job in list(self.standin.jobs.values())
            if job.status in ("SCHEDULED", "RUNNING")
            and job.training_arn
            and job.scheduled is not None
            and now - job.scheduled >= self.run_seconds
        ]
        for name in due:
            self.standin.finish_training_job(name, "Completed")
        return due

    def __enter__(self) -> JobFinisher:
        self.standin.start_ticker()
        self.pump.start()

        def run() -> None:
            while not self._stop.wait(1.0):
                self.finish_due()
                self.pump.drain()

        threading.Thread(target=run, daemon=True, name="sandbox-job-finisher").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.pump.stop()
        self.standin.stop_ticker()


def exports(
    endpoint: str,
    outputs: Mapping[str, Mapping[str, str]],
    api_url: str | None,
) -> dict[str, str]:
    """The variables a second shell needs (PATH is handled by :func:`export_lines`). In a
    teams deployment the direct door needs the team's alias: ``FTL_FUNCTION_NAME`` names it."""
    env = {k: v for k, v in sandbox_env(endpoint).items() if k.startswith(("AWS_", "CDK_DEFAULT"))}
    flat = {k: v for stack in outputs.values() for k, v in stack.items()}
    if "DataBucketName" in flat:
        env["DATA_BUCKET"] = flat["DataBucketName"]
    if api_url:
        env["FTL_API_URL"] = api_url
    if TEAM_INVOKE_OUTPUT in flat:
        env["FTL_FUNCTION_NAME"] = flat[TEAM_INVOKE_OUTPUT]
    return env


def export_lines(
    endpoint: str,
    outputs: Mapping[str, Mapping[str, str]],
    api_url: str | None,
    *,
    venv_bin: Path = VENV_BIN,
) -> list[str]:
    """``export`` lines for a POSIX shell, quoted; ``ftl`` on PATH from the project's venv."""
    lines = [
        f"export {k}={shlex.quote(v)}"
        for k, v in sorted(exports(endpoint, outputs, api_url).items())
    ]
    lines.append(f'export PATH={shlex.quote(str(venv_bin))}:"$PATH"')
    return lines


@contextlib.contextmanager
def http_api(endpoint: str, outputs: Mapping[str, Mapping[str, str]]) -> Iterator[str | None]:
    """The HTTP API's stand-in in front of the deployed trigger; yields its URL."""
    from sandbox.http_api import LocalHttpApi

    flat = {k: v for stack in outputs.values() for k, v in stack.items()}
    function = flat.get("TriggerFunctionName")
    if not function:
        yield None
        return
    with LocalHttpApi(endpoint, function) as api:
        yield api.url


def serve_forever(
    endpoint: str,
    outputs: Mapping[str, Mapping[str, str]],
    *,
    commands: tuple[str, ...] = (
        "ftl templates",
        "ftl whoami",
        "ftl submit distilbert-spot --wait         # its data: the template's default location",
        "ftl --via http list",
    ),
) -> None:
    """Keep the sandbox up until Ctrl-C, printing what to paste into another shell. The
    deployed functions' fleet-metric lines show as one short line each (MetricLines)."""
    from sandbox.metric_lines import MetricLines

    short = contextlib.redirect_stdout(MetricLines(sys.stdout))
    with short, http_api(endpoint, outputs) as api_url:
        print("\nThe sandbox stays up until Ctrl-C. Paste into another shell:\n")
        for line in export_lines(endpoint, outputs, api_url):
            print(f"  {line}")
        print()
        for command in commands:
            print(f"  {command}")
        print()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("sandbox stopped")
