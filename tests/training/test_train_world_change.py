"""A capacity chain's next attempt may land on a host with another number of GPUs: the
entrypoint resumes from the previous attempt's checkpoint with a different number of
processes (gloo on CPU) and, with ``global_batch_size``, keeps the examples per optimizer step.

DDP: 2 processes to a checkpoint, then 1 process to the end, on the loss trajectory of an
uninterrupted 1-process run (same examples per step, so the same gradients). FSDP: a sharded
checkpoint of 2 processes resumes on 3 (torch.distributed.checkpoint reshards; rank 2 has no
RNG file), and a run without FSDP is refused with a message instead of failing deep inside.
"""

import json
import os
import socket
import subprocess
import sys

import pytest
from ftl_train_testlib import (
    ENTRYPOINT,
    TRAINING_DIR,
    cls_records,
    make_model_dir,
    parse_lines,
    run_entry,
    sm_environ,
    write_records,
)
from llm_testlib import chat_records, make_llama_dir

from ftl_train import checkpoints

pytestmark = pytest.mark.slow


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(nproc: int, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
    cmd += ["--master_port", str(_port()), str(ENTRYPOINT), *argv]
    return subprocess.run(
        cmd,
        env=dict(env, OMP_NUM_THREADS="1"),
        cwd=str(TRAINING_DIR),
        capture_output=True,
        text=True,
        timeout=180,
    )


def _losses(text: str) -> dict[int, float]:
    return {step: float(v) for name, v, step in parse_lines(text) if name == "train_loss"}


def _results(root) -> dict:
    return json.loads((root / "output_data" / "results.json").read_text())


def _batch(root) -> tuple[int, int, int, int]:
    b = _results(root)["batch"]
    return (
        b["global_batch_size"],
        b["devices"],
        b["per_device_train_batch_size"],
        b["gradient_accumulation_steps"],
    )


def test_ddp_checkpoint_of_two_processes_resumes_on_one_with_the_same_global_batch(tmp_path):
    model = make_model_dir(tmp_path / "model", "classification")  # no dropout: exact gradients
    train = write_records(cls_records(40, seed=0), tmp_path / "train", "jsonl")
    channels = {"train": train, "model": model}

    def argv(ckpt, steps):
        # 40 examples, 8 per optimizer step: 5 steps an epoch, so step 4 is in the second epoch.
        return [
            "--task", "classification", "--seed", "11", "--max_steps", str(steps),
            "--global_batch_size", "8", "--per_device_train_batch_size", "4",
            "--learning_rate", "5e-3", "--lr_scheduler_type", "constant",
            "--max_seq_length", "64", "--save_steps", "3", "--logging_steps", "1",
            "--checkpoint_dir", str(ckpt),
        ]  # fmt: skip

    ref = run_entry(argv(tmp_path / "ref_ckpt", 6), sm_environ(tmp_path / "ref", channels))
    assert ref.returncode == 0, ref.stderr[-3000:]
    ref_losses = _losses(ref.stdout)
    assert sorted(ref_losses) == [1, 2, 3, 4, 5, 6]
    assert _batch(tmp_path / "ref") == (8, 1, 4, 2)

    # attempt 1: two processes (say, a 2-GPU type), cut short after its checkpoint at step 3
    ckpt = tmp_path / "ckpt"
    first = _torchrun(2, argv(ckpt, 3), sm_environ(tmp_path / "a1", channels))
    assert first.returncode == 0, first.stderr[-3000:]
    assert _batch(tmp_path / "a1") == (8, 2, 4, 1)
    saved = checkpoints.newest_complete(str(ckpt))
    assert saved is not None and checkpoints.step_of(saved) == 3
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= set(os.listdir(saved))
    assert "rng_state.pth" not in os.listdir(saved)  # what a one-process run looks for
    # the same examples per step on two processes as on one
    for step in (1, 2, 3):
        assert _losses(first.stdout)[step] == pytest.approx(ref_losses[step], rel=1e-4), step

    # attempt 2: one process (a 1-GPU type) in the same checkpoint folder
    second = run_entry(argv(ckpt, 6), sm_environ(tmp_path / "a2", channels))
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming from {saved}" in second.stderr
    assert _batch(tmp_path / "a2") == (8, 1, 4, 2)
    losses = _losses(second.stdout)
    assert sorted(losses) == [4, 5, 6], "did not resume at the checkpoint's step"
    for step in (4, 5, 6):
        assert losses[step] == pytest.approx(ref_losses[step], rel=1e-4), step
    assert _results(tmp_path / "a2")["global_step"] == 6


def test_fsdp_sharded_checkpoint_of_two_processes_resumes_on_three(tmp_path):
    model = make_llama_dir(tmp_path / "model")
    train = write_records(chat_records(48, seed=3), tmp_path / "train", "jsonl")
    channels = {"train": train, "model": model}

    def argv(ckpt, steps):
        return [
            "--task", "sft", "--seed", "7", "--max_steps", str(steps), "--logging_steps", "1",
            "--global_batch_size", "6", "--per_device_train_batch_size", "3",
            "--learning_rate", "3e-3", "--lr_scheduler_type", "constant",
            "--max_seq_length", "64", "--save_steps", "2", "--save_total_limit", "3",
            "--fsdp", "full_shard auto_wrap", "--checkpoint_dir", str(ckpt),
        ]  # fmt: skip

    ckpt = tmp_path / "ckpt"
    first = _torchrun(2, argv(ckpt, 2), sm_environ(tmp_path / "a1", channels))
    assert first.returncode == 0, first.stderr[-3000:]
    assert "FSDP on CPU processes" in first.stderr
    assert _batch(tmp_path / "a1") == (6, 2, 3, 1)
    saved = checkpoints.newest_complete(str(ckpt))
    assert saved is not None and checkpoints.step_of(saved) == 2
    shards = sorted(os.listdir(os.path.join(saved, "pytorch_model_fsdp_0")))
    assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]

    # one process: no FSDP on a CPU; refused by name before anything is loaded, nothing lost
    alone = run_entry(argv(ckpt, 4), sm_environ(tmp_path / "alone", channels))
    assert alone.returncode == 2, alone.stderr[-3000:]
    assert "hyperparameter fsdp needs a distributed launch" in alone.stderr
    assert "this run has 1 process(es)" in alone.stderr
    assert checkpoints.newest_complete(str(ckpt)) == saved

    # three processes: the two-rank shards reshard on load; rank 2 finds no RNG file of its own
    second = _torchrun(3, argv(ckpt, 4), sm_environ(tmp_path / "a2", channels))
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resuming from {saved}" in second.stderr
    assert _batch(tmp_path / "a2") == (6, 3, 2, 1)
    assert sorted(_losses(second.stdout)) == [3, 4]
    assert _results(tmp_path / "a2")["global_step"] == 4
    last = checkpoints.newest_complete(str(ckpt))
    assert checkpoints.step_of(last) == 4
    assert sorted(os.listdir(os.path.join(last, "optimizer_0")))[1:] == [
        "__0_0.distcp",
        "__1_0.distcp",
        "__2_0.distcp",
    ]
