"""A stop reaches the training script through the container's PID 1 (issue 34), on this machine.

Each case starts a container as the image matrix does (``container_run``: its own PID and
mount namespace, ``/opt/ml`` mounted, PID 1 what SageMaker would run) with the matrix's copy
of the image's start script, and a small stand-in for the toolkit: it starts the script
through ``/bin/sh -c`` as the toolkit does (directly, through a torchrun-like agent, or as
``python -m mpi4py``), then prints a last line with the script's status. The script's SIGTERM
handler prints a line, writes ``/opt/ml/checkpoints/<rank>`` and exits 143.

The defect: with the image's ENTRYPOINT as PID 1, SIGTERM from outside is dropped and the
handler never runs. With the init the renderer sets, every rank's handler runs, the agent and
the toolkit get no signal, and the container exits with the toolkit's status.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jobmodel.templates.container_start import container_start
from tests.images import container_run

IMAGE_ENTRYPOINT = ("bash", "-m", "start_with_right_hostname.sh")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"),
    reason="needs root and unshare (a PID and mount namespace per container)",
)

SCRIPT = """
import os, signal, sys, time
rank = os.environ.get("RANK", "0")
def handler(signum, frame):
    print(f"rank {rank} handled {signum}", flush=True)
    os.makedirs("/opt/ml/checkpoints", exist_ok=True)
    open(f"/opt/ml/checkpoints/{rank}", "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, handler)
print(f"rank {rank} ready", flush=True)
for _ in range(600):
    time.sleep(0.1)
print(f"rank {rank} was never stopped", flush=True)
"""

AGENT = """
import os, signal, subprocess, sys
def handler(signum, frame):
    print("agent got a signal", flush=True)
signal.signal(signal.SIGTERM, handler)
def worker(rank):
    env = {**os.environ, "RANK": str(rank)}
    return subprocess.Popen([sys.executable, "-u", sys.argv[-1]], env=env)
workers = [worker(r) for r in range(2)]
sys.exit(max(w.wait() for w in workers))
"""

TOOLKIT = """
import os, signal, subprocess, sys, time
def handler(signum, frame):
    print("toolkit got a signal", flush=True)
signal.signal(signal.SIGTERM, handler)
time.sleep(float(os.environ.get("FAKE_DELAY", "0")))
py, here = sys.executable, os.path.dirname(os.path.abspath(__file__))
line = {"process": f"{py} train.py",
        "torchrun": f"{py} {here}/torchrun --nproc_per_node 2 train.py",
        "mpi": f"{py} -m mpi4py train.py"}[os.environ["FAKE_LAUNCH"]]
rc = subprocess.call(line, shell=True, cwd=here)
print(f"toolkit: the script exited {rc}", flush=True)
sys.exit(1 if rc else 0)
"""


def _write(tmp: Path) -> Path:
    code = tmp / "code"
    (code / "mpi4py").mkdir(parents=True)
    (code / "train.py").write_text(textwrap.dedent(SCRIPT))
    (code / "torchrun").write_text(textwrap.dedent(AGENT))
    (code / "toolkit.py").write_text(textwrap.dedent(TOOLKIT))
    (code / "mpi4py" / "__init__.py").write_text("")
    (code / "mpi4py" / "__main__.py").write_text(
        "import runpy, sys\nsys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    return code


def _start(tmp: Path, command: list[str], launch: str, delay: float = 0) -> container_run.Container:
    code = _write(tmp)
    (tmp / "opt-ml").mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "FTL_MATRIX_PYTHON": sys.executable,
        "FTL_MATRIX_TOOLKIT": str(code / "toolkit.py"),
        "FAKE_LAUNCH": launch,
        "FAKE_DELAY": str(delay),
        "PYTHONPATH": str(code),
        "PYTHONUNBUFFERED": "1",
    }
    return container_run.start(command, opt_ml=tmp / "opt-ml", env=env)


def _read_until(
    box: container_run.Container, needle: str, lines: list[str], count: int = 1
) -> None:
    assert box.proc.stdout is not None
    seen = 0
    for raw in box.proc.stdout:
        lines.append(raw.decode().rstrip("\n"))
        seen += lines[-1].count(needle)  # ranks share the pipe: lines may run together
        if seen >= count:
            return
    raise AssertionError("\n".join(lines))


def _init_command() -> list[str]:
    fields = container_start(IMAGE_ENTRYPOINT, "train.py")
    return container_run.container_command(fields, IMAGE_ENTRYPOINT)


def test_with_the_images_entrypoint_as_pid_1_sigterm_is_dropped(tmp_path: Path) -> None:
    command = container_run.container_command({}, IMAGE_ENTRYPOINT)
    assert command == [*IMAGE_ENTRYPOINT, "train"]
    box = _start(tmp_path, command, "process")
    lines: list[str] = []
    _read_until(box, "rank 0 ready", lines)
    os.kill(box.pid1, signal.SIGTERM)
    time.sleep(3)
    alive = box.proc.poll() is None
    os.kill(box.pid1, signal.SIGKILL)
    rest = box.proc.stdout.read().decode() if box.proc.stdout else ""
    box.wait()
    assert alive, "\n".join(lines)
    assert "handled" not in rest and not (tmp_path / "opt-ml" / "checkpoints").exists(), rest


@pytest.mark.parametrize("launch,ranks", [("process", 1), ("torchrun", 2), ("mpi", 1)])
def test_with_the_init_every_rank_handles_sigterm_and_pid_1_outlives_them(
    tmp_path: Path, launch: str, ranks: int
) -> None:
    box = _start(tmp_path, _init_command(), launch)
    lines: list[str] = []
    _read_until(box, "ready", lines, count=ranks)
    box.stop(grace_seconds=30)
    rest = box.proc.stdout.read().decode() if box.proc.stdout else ""
    rc = box.wait()
    log = "\n".join(lines) + "\n" + rest
    assert not box.killed_after_grace, log
    for rank in range(ranks):
        assert f"rank {rank} handled 15" in rest, log
    assert sorted(p.name for p in (tmp_path / "opt-ml" / "checkpoints").iterdir()) == [
        str(r) for r in range(ranks)
    ]
    # Neither the toolkit nor torchrun's agent was signalled; the toolkit wrote its last line.
    assert "got a signal" not in rest, log
    assert "toolkit: the script exited" in rest, log
    assert rc == 1, log  # the toolkit's status, through the start script and the init


def test_a_stop_before_the_script_exists_ends_the_container(tmp_path: Path) -> None:
    box = _start(tmp_path, _init_command(), "process", delay=60)
    time.sleep(1)
    started = time.monotonic()
    box.stop(grace_seconds=30)
    out = box.proc.stdout.read().decode() if box.proc.stdout else ""
    rc = box.wait()
    assert time.monotonic() - started < 10 and not box.killed_after_grace, out
    assert rc != 0 and "ready" not in out, out


def test_past_its_deadline_a_container_fails_with_every_python_processs_stack(
    tmp_path: Path,
) -> None:
    box = _start(tmp_path, _init_command(), "torchrun")
    lines: list[str] = []
    _read_until(box, "ready", lines, count=2)
    box.watchdog(1, str(Path(sys.executable).parent / "py-spy"))
    rest = box.proc.stdout.read().decode() if box.proc.stdout else ""
    box.wait()
    assert box.hung, rest
    # the toolkit, torchrun's agent and both ranks, each with its Python stack
    assert box.stacks.count("--- pid ") == 4, box.stacks
    assert box.stacks.count("train.py") >= 2 and "<module>" in box.stacks, box.stacks
    assert "torchrun" in box.stacks and "toolkit.py" in box.stacks, box.stacks
