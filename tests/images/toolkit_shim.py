"""The container's ``train`` command for the image matrix: the SageMaker training toolkit
(``sagemaker_training.trainer.train``, which runs ``sagemaker_pytorch_container.training:main``)
with only the process launch and the cluster plumbing replaced.

Runs inside an image's environment (Python 3.9+, standard library and the image's packages).
What stays the toolkit's own code: reading ``input/config/*.json`` under
``/opt/ml`` (the run's folder, mounted there in the container's namespace), the ``SM_*``
environment, decoding the hyperparameters into
``--name value`` arguments, unpacking ``sagemaker_submit_directory``, ``pip install -r
requirements.txt``, choosing the runner from the distribution flags (process, torchrun, MPI,
smddp) and building its command line. What is replaced (``launch`` below):

* mpirun / smddprun: the MPI job becomes one process, given the environment an ``-np 1``
  mpirun would give it (``OMPI_COMM_WORLD_*``) plus the runner's ``-x`` exports; no sshd,
  no waiting for other hosts. So MPI's own process placement, EFA and multi-host are not
  exercised.
* torchrun: run as built, with ``--nproc_per_node`` set to ``FTL_MATRIX_NPROC`` (the CPU
  has no GPUs to count) and a free ``--master_port``.
* host names resolve to loopback.

The command starts as the toolkit starts it (``process.create``): joined with spaces and run
by ``/bin/sh -c`` when the toolkit captures errors (its default), else as a list with the
last argument's quotes removed; in the container's process group, not a session of its own.
A stop reaches it only through the container's PID 1 (``container_run``). Its exit status
goes to ``FTL_MATRIX_RCFILE``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mpi_to_single(cmd: list, env: dict) -> list:
    """The program an mpirun/smddprun command line starts, as one process."""
    exe = sys.executable
    start = next((i for i, part in enumerate(cmd) if part == exe), None)
    if start is None:
        raise RuntimeError(f"cannot find the Python program in {cmd!r}")
    i = 0
    while i < start:
        if cmd[i] == "-x" and i + 1 < start:
            name, sep, value = cmd[i + 1].partition("=")
            if name != "LD_PRELOAD":
                if sep:
                    env[name] = value
            i += 2
            continue
        i += 1
    env.update(
        {
            "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": "1",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
            "OMPI_COMM_WORLD_NODE_RANK": "0",
        }
    )
    program = list(cmd[start:])
    if program[1:3] == ["-m", "mpi4py"]:  # mpi4py's abort-on-exception wrapper
        program = [program[0], *program[3:]]
    return program


def _torchrun(cmd: list) -> list:
    out = list(cmd)
    nproc = os.environ.get("FTL_MATRIX_NPROC", "1")
    if "--nproc_per_node" in out:
        out[out.index("--nproc_per_node") + 1] = nproc
    for flag in ("--master_port", "--master_addr"):
        if flag in out:
            j = out.index(flag)
            del out[j : j + 2]
    first = 1
    return [
        *out[:first],
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        *out[first:],
    ]


def launch(cmd: list, cwd: str | None, shell: bool = True) -> int:
    env = dict(os.environ)
    env["MASTER_ADDR"] = "127.0.0.1"
    if cmd and os.path.basename(str(cmd[0])) == "mpirun":
        cmd = _mpi_to_single(list(cmd), env)
        # The toolkit's MASTER_PORT (7777) is free on a job's own hosts; here several jobs
        # share one machine.
        env["MASTER_PORT"] = str(_free_port())
        kind = "mpi"
    elif cmd and os.path.basename(str(cmd[0])) == "torchrun":
        cmd = _torchrun(list(cmd))
        kind = "torchrun"
    else:
        kind = "process"
    is_user = any(str(c).endswith(".py") for c in cmd) and "pip" not in cmd
    print("ftl_matrix launch kind={} cmd={}".format(kind, " ".join(map(str, cmd))), flush=True)
    args = [str(c) for c in cmd]
    if not shell:  # process.check_error without capture_error: Popen(cmd), quotes removed
        args[-1] = args[-1].strip('"')
    proc = subprocess.Popen(
        " ".join(args) if shell else args,  # asyncio.create_subprocess_shell: /bin/sh -c
        shell=shell,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    for raw in proc.stdout:
        sys.stdout.write(raw.decode("utf-8", "replace"))
        sys.stdout.flush()
    rc = proc.wait()
    if is_user and os.environ.get("FTL_MATRIX_RCFILE"):
        with open(os.environ["FTL_MATRIX_RCFILE"], "w") as fh:
            fh.write(str(rc))
    return rc


def _patch() -> None:
    from sagemaker_training import environment, errors, process

    real_gethostbyname = socket.gethostbyname

    def gethostbyname(host: str) -> str:
        return "127.0.0.1" if host.startswith("algo-") else real_gethostbyname(host)

    socket.gethostbyname = gethostbyname  # type: ignore[assignment]

    def check_error(cmd, error_classes, processes_per_host, cwd=None, capture_error=True, **kw):
        rc = launch(cmd, cwd or environment.code_dir, shell=capture_error)
        if rc:
            raise errors.ExecuteUserScriptError(cmd=cmd, return_code=rc)
        return None

    def create(
        cmd, error_classes, processes_per_host, cwd=None, env=None, capture_error=False, **kw
    ):
        rc = launch(cmd, cwd or environment.code_dir)
        if rc:
            raise errors.ExecuteUserScriptError(cmd=cmd, return_code=rc)
        return rc, [], None

    process.check_error = check_error
    process.create = create
    for name in ("mpi", "smdataparallel"):
        try:
            mod = __import__("sagemaker_training." + name, fromlist=["_"])
        except ImportError:
            continue
        if hasattr(mod, "_start_sshd_daemon"):
            mod._start_sshd_daemon = lambda: None


def main() -> None:
    _patch()
    os.environ.setdefault("SAGEMAKER_TRAINING_MODULE", "sagemaker_pytorch_container.training:main")
    from sagemaker_training import trainer

    trainer.train()


if __name__ == "__main__":
    main()
