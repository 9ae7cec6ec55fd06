"""The matrix's launch replacement: what it keeps of the toolkit's command lines, and PID 1."""

from __future__ import annotations

import sys

from tests.images import toolkit_shim
from tests.images.container_run import container_command


def test_an_mpirun_line_becomes_its_program_with_the_exports_and_one_rank():
    cmd = [
        "mpirun", "--host", "algo-1:8", "-np", "8", "--allow-run-as-root",
        "-x", "NCCL_DEBUG=INFO", "-x", "PATH", "-x", "LD_PRELOAD=/x/gethostname.so",
        "-x", "SMDATAPARALLEL_USE_SINGLENODE=1",
        sys.executable, "-m", "mpi4py", "train.py", "--task", "qa",
    ]  # fmt: skip
    env: dict[str, str] = {}
    program = toolkit_shim._mpi_to_single(cmd, env)
    assert program == [sys.executable, "train.py", "--task", "qa"]
    assert env["NCCL_DEBUG"] == "INFO" and env["SMDATAPARALLEL_USE_SINGLENODE"] == "1"
    assert "LD_PRELOAD" not in env and "PATH" not in env  # a bare -x keeps the current value
    assert env["OMPI_COMM_WORLD_SIZE"] == "1" and env["OMPI_COMM_WORLD_RANK"] == "0"


def test_a_torchrun_line_gets_the_rows_process_count_and_a_free_loopback_port(monkeypatch):
    monkeypatch.setenv("FTL_MATRIX_NPROC", "2")
    cmd = ["torchrun", "--nnodes", "1", "--nproc_per_node", "8", "--master_addr", "algo-1",
           "--master_port", "7777", "train.py", "--fsdp", "full_shard auto_wrap"]  # fmt: skip
    out = toolkit_shim._torchrun(cmd)
    assert out[out.index("--nproc_per_node") + 1] == "2"
    assert out[out.index("--master_addr") + 1] == "127.0.0.1"
    assert out.count("--master_port") == 1 and out[out.index("--master_port") + 1] != "7777"
    assert out[-3:] == ["train.py", "--fsdp", "full_shard auto_wrap"]


def test_pid_1_is_what_sagemaker_runs_for_the_request():
    image = ["bash", "-m", "start_with_right_hostname.sh"]
    init = {
        "ContainerEntrypoint": ["bash", "-c", "init", "pat"],
        "ContainerArguments": [*image, "train"],
    }
    assert container_command(init, image) == ["bash", "-c", "init", "pat", *image, "train"]
    assert container_command({"TrainingImage": "x"}, image) == [*image, "train"]
    assert container_command({"ContainerArguments": ["other"]}, image) == [*image, "other"]
