"""Spot interruptions for the LLM recipes: FSDP under torchrun (2 CPU processes, gloo) and LoRA.

FSDP: a SIGTERM to the torchrun agent (what a spot reclaim delivers) makes every rank save
the same step as a sharded checkpoint (one ``__<rank>_0.distcp`` per rank) and exit; the
restarted job resumes from it and follows the uninterrupted run's loss trajectory.
"""

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
from ftl_train_testlib import SLOW_ENTRY, TRAINING_DIR, parse_lines, sm_environ, write_records
from llm_testlib import chat_records, make_llama_dir

from ftl_train import checkpoints

pytestmark = pytest.mark.slow

STEPS = 6


@pytest.fixture(scope="module")
def channels(tmp_path_factory):
    root = tmp_path_factory.mktemp("llm")
    model = make_llama_dir(root / "model", dropout=0.1)  # dropout: the RNG state must resume too
    train = write_records(chat_records(48, seed=3), root / "train", "jsonl")
    return {"train": train, "model": model}


def _argv(ckpt, *extra, steps=STEPS, save_steps=1000):
    argv = ["--task", "sft", "--seed", "7", "--max_steps", str(steps), "--logging_steps", "1"]
    argv += ["--per_device_train_batch_size", "2", "--learning_rate", "3e-3"]
    argv += ["--max_seq_length", "64", "--save_steps", str(save_steps)]
    return [*argv, "--checkpoint_dir", str(ckpt), *extra]


def _losses(text):
    return {step: float(v) for name, v, step in parse_lines(text) if name == "train_loss"}


def _torchrun(argv, env, port):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", str(port), str(SLOW_ENTRY), *argv]
    env = dict(env, OMP_NUM_THREADS="1")
    return subprocess.Popen(
        cmd,
        env=env,
        cwd=str(TRAINING_DIR),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


FSDP = ("--fsdp", "full_shard auto_wrap")


def test_fsdp_sigterm_checkpoints_every_rank_and_resumes_on_the_same_trajectory(channels, tmp_path):
    # 1. uninterrupted reference
    ref = _torchrun(
        _argv(tmp_path / "ref_ckpt", *FSDP), sm_environ(tmp_path / "ref", channels), 29611
    )
    out, err = ref.communicate(timeout=240)
    assert ref.returncode == 0, err[-3000:]
    ref_losses = _losses(out)
    assert sorted(ref_losses) == list(range(1, STEPS + 1))
    assert "FSDP on CPU processes" in err

    # 2. the same job, SIGTERMed (agent -> workers) after step 2; no scheduled checkpoint
    ckpt = tmp_path / "ckpt"
    env = sm_environ(tmp_path / "run", channels, FTL_TEST_STEP_DELAY="0.5")
    proc = _torchrun(_argv(ckpt, *FSDP), env, 29612)
    seen, lines = threading.Event(), []

    def read():
        for line in proc.stdout:
            lines.append(line)
            m = re.match(r"ftl_metric name=train_loss value=\S+ step=(\d+)", line)
            if m and int(m.group(1)) >= 2:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(180), "never reached step 2"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    err = proc.stderr.read()
    assert "received signal" in err, err[-3000:]
    saved = checkpoints.newest_complete(str(ckpt))
    assert saved is not None, err[-3000:]
    k = checkpoints.step_of(saved)
    assert 2 <= k < STEPS
    shards = sorted(os.listdir(os.path.join(saved, "pytorch_model_fsdp_0")))
    assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]  # one file per rank
    assert sorted(os.listdir(os.path.join(saved, "optimizer_0")))[1:] == shards[1:]
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= set(os.listdir(saved))

    # 3. restarted (other hosts get the synced folder back): continues from step k
    res = _torchrun(_argv(ckpt, *FSDP), sm_environ(tmp_path / "run", channels), 29613)
    out, err = res.communicate(timeout=240)
    assert res.returncode == 0, err[-3000:]
    assert f"resuming from {saved}" in err
    losses = _losses(out)
    assert min(losses) == k + 1 and max(losses) == STEPS
    for step in range(k + 1, STEPS + 1):
        assert losses[step] == pytest.approx(ref_losses[step], rel=1e-4, abs=1e-5), step
    # the final model is a plain, loadable safetensors model despite the sharded checkpoints
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "model_out")
    assert model.config.use_cache is True


def test_lora_resumes_and_the_merged_model_loads(channels, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from ftl_train.run import main

    lora = ("--peft", "lora", "--lora_r", "4", "--lora_target_modules", "q_proj,v_proj")
    ref_env = sm_environ(tmp_path / "ref", channels)

    from transformers import TrainerCallback

    class SigtermAtStep3(TrainerCallback):  # a spot reclaim in the middle of the job
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                os.kill(os.getpid(), signal.SIGTERM)

    def run(argv, env, callbacks=()):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(argv, env, callbacks)
        return rc, buf.getvalue()

    rc, out = run(_argv(tmp_path / "ref_ckpt", *lora), ref_env)
    assert rc == 0
    ref = _losses(out)

    ckpt = tmp_path / "ckpt"
    env = sm_environ(tmp_path / "run", channels)
    rc, _ = run(_argv(ckpt, *lora), env, [SigtermAtStep3()])
    saved = checkpoints.newest_complete(str(ckpt))
    assert rc == 143 and saved is not None
    k = checkpoints.step_of(saved)
    assert 3 <= k < STEPS
    assert os.path.isfile(os.path.join(saved, "adapter_model.safetensors"))
    rc, out = run(_argv(ckpt, *lora, "--merge_adapter", "true"), env)
    assert rc == 0
    losses = _losses(out)
    assert min(losses) == k + 1
    for step in range(k + 1, STEPS + 1):
        assert losses[step] == pytest.approx(ref[step], rel=1e-4, abs=1e-5), step

    out_dir = tmp_path / "run" / "model_out"
    merged = AutoModelForCausalLM.from_pretrained(out_dir).eval()
    base = AutoModelForCausalLM.from_pretrained(channels["model"]).eval()
    adapted = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(channels["model"]), out_dir / "adapter"
    ).eval()
    ids = torch.tensor([[2, 10, 11, 12, 13, 14]])
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, adapted(ids).logits, rtol=1e-4, atol=1e-5)
        # and the merge changed something: the adapter was trained
        assert not torch.allclose(merged(ids).logits, base(ids).logits)
