"""The README's quick start, pasted into a fresh shell after ``make sandbox``'s export lines
(issue 18, points 1 and 2): ``DATA_BUCKET`` is set, ``ftl`` is on PATH, ``ftl --via http``
reaches the sandbox's HTTP API stand-in."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.shell import export_lines, http_api

ROOT = Path(__file__).resolve().parents[2]


def quick_start_block() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Quick start with the client") :]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)


@pytest.fixture
def ftl_bin(tmp_path):
    """``ftl`` as ``.venv/bin/ftl`` runs it, from this checkout's code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ftl"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec "{sys.executable}" -m ftl_client "$@"\n')
    script.chmod(0o755)
    return bin_dir


def test_the_quick_start_runs_as_pasted(deployed, ftl_bin, tmp_path):
    block = quick_start_block()
    assert "$DATA_BUCKET" in block and "ftl --via http" in block
    with http_api(deployed.endpoint, deployed.outputs) as api_url:
        lines = export_lines(deployed.endpoint, deployed.outputs, api_url, venv_bin=ftl_bin)
        proc = subprocess.run(
            [
                "bash",
                "--norc",
                "--noprofile",
                "-e",
                "-o",
                "pipefail",
                "-c",
                "\n".join([*lines, block]),
            ],
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    out = proc.stdout
    name = re.search(r"^submitted (squad-lr3e5-\S+)$", out, re.MULTILINE).group(1)
    assert f"Completed: {name}" in out
    assert f"job_name {name}".split() in [line.split() for line in out.splitlines()]
    assert f"{name} is already Completed; nothing to stop" in out
    assert f"no log lines for {name}: it ended Completed" in proc.stderr
    assert "queue is empty" in out
    # ``ftl --via http list`` went through the stand-in: it lists the job it just made.
    assert out.count(name) >= 4
