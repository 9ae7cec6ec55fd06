"""One container start on this machine, as SageMaker starts and stops it.

Used by the image matrix (``harness.py``, in an image environment's Python 3.9+: standard
library only) and by ``test_container_start.py``.

* ``start``: a new PID and mount namespace (``unshare --pid --fork --mount-proc --mount``,
  as root), with a folder bind-mounted at ``/opt/ml`` inside it only; its PID 1 is exactly
  the command given (``container_command``: the request's ``ContainerEntrypoint`` +
  ``ContainerArguments`` when set, else the image's ENTRYPOINT + ``train``).
* ``Container.stop``: SIGTERM to PID 1 from outside the namespace (its host pid), then
  SIGKILL when the grace period ends, as ``docker stop`` does.
* ``Container.watchdog``: past its deadline, every Python process in the namespace is dumped
  with ``py-spy dump`` and the container is killed; the stacks go to the run's report.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The folder put first on PATH in the container: the image's start script and ``train``.
CONTAINER_BIN = HERE / "container"
# What runs inside the new namespace before PID 1 is exec'd in place of it: the bind mount.
_MOUNT_THEN_EXEC = 'mkdir -p /opt/ml && mount --bind "$0" /opt/ml && exec "$@"'


def container_command(algorithm: Mapping[str, Any], image_entrypoint: Sequence[str]) -> list[str]:
    """PID 1's command line as SageMaker resolves it: ``ContainerEntrypoint`` +
    ``ContainerArguments`` when the request sets an entrypoint, else the image's ENTRYPOINT
    followed by ``train`` (SageMaker's argument, which replaces the image's CMD). Arguments
    without an entrypoint take ``train``'s place; an entrypoint without arguments is taken to
    run alone, as ``docker run --entrypoint`` does (the platform always sets both)."""
    entry = [str(x) for x in algorithm.get("ContainerEntrypoint") or []]
    arguments = [str(x) for x in algorithm.get("ContainerArguments") or []]
    return (entry or list(image_entrypoint)) + (arguments or ([] if entry else ["train"]))


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (a process forked from a thread other than the
    main one is listed under that thread)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [x.decode("utf-8", "replace") for x in raw.split(b"\0") if x]


class Container:
    """A started container: ``proc`` is ``unshare`` (its output is PID 1's), ``pid1`` the host
    pid of the namespace's PID 1."""

    def __init__(self, proc: subprocess.Popen[bytes], pid1: int) -> None:
        self.proc = proc
        self.pid1 = pid1
        self.signalled_at: float | None = None
        self.killed_after_grace = False
        self.hung = False
        self.stacks = ""
        self._timers: list[threading.Timer] = []

    def python_pids(self) -> list[int]:
        """Host pids of the Python processes in the container (PID 1's descendants)."""
        return [
            p
            for p in _descendants(self.pid1)
            if _cmdline(p) and os.path.basename(_cmdline(p)[0]).startswith("python")
        ]

    def _kill(self) -> None:
        try:
            os.kill(self.pid1, signal.SIGKILL)  # the kernel then kills the whole namespace
        except ProcessLookupError:
            pass

    def stop(self, grace_seconds: float) -> None:
        """SIGTERM to PID 1 from outside, SIGKILL if it is still there after the grace."""
        if self.signalled_at is not None:
            return
        self.signalled_at = time.monotonic()
        try:
            os.kill(self.pid1, signal.SIGTERM)
        except ProcessLookupError:
            return

        def expire() -> None:
            if self.proc.poll() is None:
                self.killed_after_grace = True
                self._kill()

        self._later(grace_seconds, expire)

    def watchdog(self, deadline_seconds: float, py_spy: str | None) -> None:
        """Past the deadline: dump every Python process's stack, then kill the container."""

        def expire() -> None:
            if self.proc.poll() is not None:
                return
            self.hung = True
            self.stacks = dump_stacks(self.python_pids(), py_spy)
            self._kill()

        self._later(deadline_seconds, expire)

    def _later(self, seconds: float, action) -> None:  # type: ignore[no-untyped-def]
        timer = threading.Timer(seconds, action)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def wait(self) -> int:
        rc = self.proc.wait()
        for timer in self._timers:
            timer.cancel()
        return rc


def dump_stacks(pids: Sequence[int], py_spy: str | None) -> str:
    """``py-spy dump`` of each pid (host pids), one block each."""
    exe = py_spy or shutil.which("py-spy")
    if not exe:
        return f"py-spy is not installed (requirements-dev.txt pins it); pids: {list(pids)}"
    blocks = []
    for pid in pids:
        done = subprocess.run(
            [exe, "dump", "--pid", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=60,
        )
        text = done.stdout.decode("utf-8", "replace")
        blocks.append(f"--- pid {pid}: {' '.join(_cmdline(pid))[:200]}\n{text}")
    return "\n".join(blocks)


def start(
    command: Sequence[str],
    *,
    opt_ml: Path,
    env: dict[str, str],
    cwd: Path | None = None,
) -> Container:
    """Start ``command`` as PID 1 of a new PID and mount namespace with ``opt_ml`` mounted at
    ``/opt/ml``; stdout and stderr together in ``Container.proc.stdout``."""
    env = dict(env)
    env["PATH"] = str(CONTAINER_BIN) + os.pathsep + env.get("PATH", os.defpath)
    argv = [
        "unshare",
        "--pid",
        "--fork",
        "--mount-proc",
        "--mount",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
        _MOUNT_THEN_EXEC,
        str(opt_ml),
        *command,
    ]
    proc = subprocess.Popen(
        argv,
        cwd=str(cwd or opt_ml),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 10
    while True:
        kids = _children(proc.pid)
        if kids:
            return Container(proc, kids[0])
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
            raise RuntimeError(f"unshare did not start PID 1 (rc {proc.poll()}): {out[-2000:]}")
        time.sleep(0.01)
