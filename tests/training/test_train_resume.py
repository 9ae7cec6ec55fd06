"""Spot interruptions: a killed run resumes from its newest complete checkpoint; SIGTERM saves."""

import json
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from ftl_train_testlib import (
    SLOW_ENTRY,
    cls_records,
    make_model_dir,
    parse_lines,
    run_entry,
    sm_environ,
    write_records,
)

from ftl_train import checkpoints

pytestmark = pytest.mark.slow

MAX_STEPS = 14


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    model = make_model_dir(
        root / "model", "classification", dropout=0.1
    )  # dropout: RNG state matters
    train = write_records(cls_records(40, seed=0), root / "train", "jsonl")
    val = write_records(cls_records(8, seed=1), root / "validation", "jsonl")
    return root, {"train": train, "validation": val, "model": model}


def _args(ckpt, max_steps=MAX_STEPS, save_steps=2):
    # 40 examples, batch 4, accumulation 2: 5 optimizer steps per epoch, so 14 steps span 3 epochs.
    return [
        "--task",
        "classification",
        "--seed",
        "1234",
        "--max_steps",
        str(max_steps),
        "--per_device_train_batch_size",
        "4",
        "--gradient_accumulation_steps",
        "2",
        "--learning_rate",
        "5e-3",
        "--warmup_ratio",
        "0.1",
        "--max_seq_length",
        "64",
        "--save_steps",
        str(save_steps),
        "--eval_steps",
        "2",
        "--save_total_limit",
        "2",
        "--logging_steps",
        "1",
        "--checkpoint_dir",
        str(ckpt),
    ]


def _losses(stdout):
    return {step: float(v) for name, v, step in parse_lines(stdout) if name == "train_loss"}


def test_killed_run_resumes_from_newest_complete_checkpoint(setup, tmp_path):
    root, channels = setup

    # 1. the uninterrupted reference run
    ref_env = sm_environ(tmp_path / "ref", channels)
    ref = run_entry(_args(tmp_path / "ref" / "ckpt"), ref_env)
    assert ref.returncode == 0, ref.stderr[-3000:]
    ref_losses = _losses(ref.stdout)
    assert sorted(ref_losses) == list(range(1, MAX_STEPS + 1))
    ref_results = json.loads((tmp_path / "ref" / "output_data" / "results.json").read_text())
    assert ref_results["global_step"] == MAX_STEPS

    # 2. the same job, SIGKILLed (no chance to save) once a checkpoint in epoch 2 is complete
    ckpt = tmp_path / "run" / "ckpt"
    env = sm_environ(tmp_path / "run", channels, FTL_TEST_STEP_DELAY="0.3")
    proc = subprocess.Popen(
        [sys.executable, str(SLOW_ENTRY), *_args(ckpt)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            newest = checkpoints.newest_complete(str(ckpt))
            if newest and checkpoints.step_of(newest) >= 6:
                break
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    resume_path = checkpoints.newest_complete(str(ckpt))
    k = checkpoints.step_of(resume_path)
    assert 6 <= k < MAX_STEPS

    # A half-written newer checkpoint (what a kill during a save leaves): must be ignored.
    partial = ckpt / f"checkpoint-{k + 2}"
    partial.mkdir(exist_ok=True)
    (partial / "model.safetensors").write_bytes(b"truncated")
    (partial / "trainer_state.json").write_text('{"global_step": ')
    (partial / checkpoints.COMPLETE_MARKER).unlink(missing_ok=True)

    # 3. restarted on the same checkpoint folder (what SageMaker does after a spot interruption)
    res = run_entry(_args(ckpt), sm_environ(tmp_path / "run", channels))
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"resuming from {resume_path}" in res.stderr
    losses = _losses(res.stdout)
    assert min(losses) == k + 1, "did not resume at the checkpoint's step"
    assert max(losses) == MAX_STEPS
    results = json.loads((tmp_path / "run" / "output_data" / "results.json").read_text())
    assert results["global_step"] == ref_results["global_step"] == MAX_STEPS
    # same trajectory after the restart as without one (fixed seed, restored RNG and data position)
    for step in range(k + 1, MAX_STEPS + 1):
        assert losses[step] == pytest.approx(ref_losses[step], rel=1e-4, abs=1e-5), step
    assert results["eval_loss"] == pytest.approx(ref_results["eval_loss"], rel=1e-4, abs=1e-5)
    # the half-written folder was rewritten as a complete checkpoint or rotated away
    assert not partial.exists() or checkpoints.is_complete(str(partial))


def test_sigterm_writes_a_checkpoint_and_the_next_run_continues_from_it(setup, tmp_path):
    _root, channels = setup
    ckpt = tmp_path / "ckpt"
    env = sm_environ(tmp_path, channels, FTL_TEST_STEP_DELAY="0.3")
    # save_steps far away: any checkpoint on disk comes from the SIGTERM handler
    proc = subprocess.Popen(
        [sys.executable, str(SLOW_ENTRY), *_args(ckpt, max_steps=60, save_steps=1000)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = threading.Event()
    out_lines: list[str] = []

    def reader():
        for line in proc.stdout:
            out_lines.append(line)
            m = re.match(r"ftl_metric name=train_loss value=\S+ step=(\d+)", line)
            if m and int(m.group(1)) >= 2:
                seen.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        assert seen.wait(120), "training never logged step 2"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    t.join(timeout=10)
    err = proc.stderr.read()
    assert rc == 143, err[-3000:]
    assert "received signal" in err
    saved = checkpoints.newest_complete(str(ckpt))
    assert saved is not None, err[-3000:]
    s = checkpoints.step_of(saved)
    assert 2 <= s < 60
    last_logged = max(
        int(step) for name, _v, step in parse_lines("".join(out_lines)) if name == "train_loss"
    )
    assert s == last_logged  # saved at the step it stopped, not an older one
    assert not (tmp_path / "model_out" / "model.safetensors").exists()  # not a finished job

    # the restarted job continues from that step
    res = run_entry(_args(ckpt, max_steps=s + 2, save_steps=1000), sm_environ(tmp_path, channels))
    assert res.returncode == 0, res.stderr[-3000:]
    assert min(_losses(res.stdout)) == s + 1
