"""Running a `make demo-*` target as a user does: ``python -m sandbox.demo <flag>`` in its own
process and sandbox, with no ``FTL_*`` or ``AWS_*`` variable of the test run leaking in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_demo(flag: str) -> str:
    """The demo's standard output; it must exit 0 within 15 minutes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FTL_", "AWS_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "sandbox.demo", flag],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout
