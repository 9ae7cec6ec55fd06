"""Find (or, once, create) the checkov command: it lives in its own virtual environment.

checkov 3.3.30 pins boto3==1.35.49, which conflicts with the runtime pins in
``requirements.txt``, so it cannot share ``.venv``. ``make setup-test`` (``make test``) creates
``.venv/checkov`` from ``requirements-checkov.txt``; when it has not, the first test that needs
checkov creates it here (under a file lock, so parallel workers build it once).
``$CHECKOV`` overrides the command.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv" / "checkov"
REQUIREMENTS = ROOT / "requirements-checkov.txt"


def checkov_command() -> list[str]:
    if os.environ.get("CHECKOV"):
        return [os.environ["CHECKOV"]]
    exe = VENV / "bin" / "checkov"
    if exe.exists():
        return [str(exe)]
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / ".checkov.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.exists():
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", str(VENV)], check=True)
            subprocess.run(
                [str(VENV / "bin" / "pip"), "install", "-q", "-r", str(REQUIREMENTS)],
                check=True,
            )
    return [str(exe)]
