"""Issue 34: every rank of an FSDP job takes the same decision about loading the best model.

transformers 5.x points ``best_model_checkpoint`` at the best step's folder only if it
exists when it looks, which under FSDP's sharded saves is a race between the ranks writing
the folder (``checkpoints.best_checkpoint``). A rank that found the folder loaded the best
model (a collective) while the other went on to evaluate: both waited forever.
``race_entry.py`` slows rank 1's look so the race ends the way it did in the issue.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from ftl_train_testlib import TRAINING_DIR, sm_environ, write_records
from llm_testlib import chat_records, make_llama_dir

from ftl_train import checkpoints

RACE_ENTRY = os.path.join(os.path.dirname(__file__), "race_entry.py")
HANG_SECONDS = 240  # the run takes about a minute on two cores; a hang fails here


@pytest.fixture(scope="module")
def channels(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm-best")
    return {
        "model": make_llama_dir(root / "model"),
        "train": write_records(chat_records(32, seed=3), root / "train", "jsonl"),
        "validation": write_records(chat_records(8, seed=4), root / "validation", "jsonl"),
    }


def _stacks_and_kill(pid: int) -> str:
    """py-spy's stack of every process under ``pid`` (torchrun's workers run in sessions of
    their own), then SIGKILL to all of them: a hang fails with each rank's stack."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    stacks = []
    for proc in procs:
        if os.path.exists(spy) and "python" in " ".join(proc.cmdline()):
            dump = subprocess.run(
                [spy, "dump", "--pid", str(proc.pid)], capture_output=True, text=True, timeout=30
            )
            stacks.append(dump.stdout[-3000:])
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    return "\n".join(stacks)


def _run_to_the_end(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """torchrun with two gloo ranks; a hang is killed and fails with the ranks' stacks."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", "29631", RACE_ENTRY, *argv]
    proc = subprocess.Popen(
        cmd,
        env=dict(env, OMP_NUM_THREADS="1"),
        cwd=str(TRAINING_DIR),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired:
        stacks = _stacks_and_kill(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"the job hung after {HANG_SECONDS} s; stacks:\n{stacks}\n{err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.slow
def test_fsdp_ranks_agree_on_the_best_checkpoint_when_the_last_save_is_the_best(channels, tmp_path):
    ckpt = tmp_path / "ckpt"
    argv = ["--task", "sft", "--seed", "7", "--max_steps", "4", "--logging_steps", "1"]
    argv += ["--per_device_train_batch_size", "2", "--learning_rate", "3e-3"]
    argv += ["--max_seq_length", "64", "--save_steps", "2", "--eval_steps", "2"]
    argv += ["--fsdp", "full_shard auto_wrap", "--checkpoint_dir", str(ckpt)]
    env = sm_environ(tmp_path / "run", channels, FTL_TEST_SLOW_EXISTS_RANK="1")
    done = _run_to_the_end(argv, env)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "FSDP on CPU processes" in done.stderr
    last = checkpoints.newest_complete(str(ckpt))
    assert last is not None and checkpoints.step_of(last) == 4
    with open(os.path.join(last, "trainer_state.json"), encoding="utf-8") as fh:
        state = json.load(fh)
    assert state["best_metric"] is not None
    best = state.get("best_global_step")
    if best is not None:  # transformers 5.x records the step; 4.x only the folder
        assert state["best_model_checkpoint"] == str(ckpt / f"checkpoint-{best}")
    assert state["best_model_checkpoint"] is not None
    assert f"Loading best model from {state['best_model_checkpoint']}" in done.stderr
