"""A real MLflow tracking server on localhost (MLflow from PyPI, requirements-train.txt): the
sandbox's stand-in for SageMaker managed MLflow (issue 27). SQLite for runs, a folder for
artifacts, a free port; stopped (and its process reaped) on exit."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def mlflow_server(root: Path) -> Iterator[str]:
    """Start ``mlflow server`` with its state under ``root``; yields its http URI."""
    root.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    mlflow = Path(sys.executable).parent / "mlflow"
    cmd = [
        str(mlflow),
        "server",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--default-artifact-root",
        (root / "artifacts").as_uri(),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(root / 'server.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server not up: {(root / 'server.log').read_text()}")
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
