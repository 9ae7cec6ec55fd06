"""Issue 21's kernels against the plain path, on CPU, with tiny models built from configs.

Tolerances (stated once here): float32 paths must agree with the plain path to 1e-5
relative (loss and every gradient, max |a-b| / max |a|); under bf16 autocast to 1e-2;
AdamW with bf16 moments stays within 1e-2 of float32 AdamW's weights after 20 steps.
"""

from __future__ import annotations

import copy
import json
import sys
import types
from pathlib import Path

import pytest
import torch
import transformers
from ftl_train_testlib import parse_lines, sm_environ, write_records
from llm_testlib import chat_records, make_llama_dir

from ftl_train import attention, hparams, parallel
from ftl_train import loss as fused_loss
from ftl_train.defaults import resolve
from ftl_train.env import DeviceCaps
from ftl_train.hparams import HyperparameterError
from ftl_train.optim import AdamWBf16States
from ftl_train.run import main

CPU = DeviceCaps(cuda=False, bf16=False, tf32=False, name="cpu")
GPU = DeviceCaps(cuda=True, bf16=True, tf32=True, name="NVIDIA H100 80GB HBM3")


def tiny_llama(vocab: int = 300, tie: bool = True, layers: int = 2) -> torch.nn.Module:
    cfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        tie_word_embeddings=tie, use_cache=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    return model.train()


def packed_batch(vocab: int = 300) -> dict[str, torch.Tensor]:
    """Two packed rows: 3 examples + padding in the first, one example filling the second."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (2, 32), generator=g)
    pos = torch.tensor([[*range(11), *range(9), *range(7), *range(5)], list(range(32))])
    labels = ids.clone()
    labels[0, [0, 11, 20]] = -100  # every example's first token (sft.pack_rows)
    labels[0, 27:] = -100  # the padding segment
    labels[1, :6] = -100  # a prompt
    return {"input_ids": ids, "position_ids": pos, "labels": labels}


def loss_and_grads(model: torch.nn.Module, batch: dict, autocast: bool = False, **extra):
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(**batch, **extra).loss
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach().float(), grads


def assert_same(a, b, rtol: float) -> None:
    (la, ga), (lb, gb) = a, b
    assert abs(float(la - lb)) <= rtol * abs(float(la))
    assert ga.keys() == gb.keys() and ga
    for name in ga:
        scale = float(ga[name].abs().max()) or 1.0
        err = float((ga[name] - gb[name]).abs().max()) / scale
        assert err <= rtol, f"{name}: relative gradient difference {err:.2e} > {rtol}"


# ---------------------------------------------------------------- attention


def test_varlen_attention_matches_the_dense_mask_in_loss_and_gradients():
    attention.register()
    model = tiny_llama()
    batch = packed_batch()
    model.set_attn_implementation("sdpa")
    dense = loss_and_grads(model, batch)
    model.set_attn_implementation("eager")
    assert_same(dense, loss_and_grads(model, batch), 1e-5)
    model.set_attn_implementation(attention.NAME)
    assert_same(dense, loss_and_grads(model, batch), 1e-5)
    # examples do not see each other: the third example alone gives the same logits
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).logits
        alone = model(input_ids=batch["input_ids"][:1, 20:27]).logits
    torch.testing.assert_close(packed[0, 20:27], alone[0], rtol=1e-5, atol=1e-6)
    # a padded (unpacked) batch: the 2D mask is honoured
    mask = torch.ones(2, 32, dtype=torch.long)
    mask[1, 25:] = 0
    with torch.no_grad():
        ours = model(input_ids=batch["input_ids"], attention_mask=mask).logits
        model.set_attn_implementation("sdpa")
        ref = model(input_ids=batch["input_ids"], attention_mask=mask).logits
    keep = mask.bool()
    torch.testing.assert_close(ours[keep], ref[keep], rtol=1e-5, atol=1e-6)


def dense_causal_varlen(q, k, v, cu_q, scale):
    """What torch's varlen kernel computes, densely: causal attention within each example of
    the ``[T, H, D]`` tensors (examples cut at ``cu_q``), grouped key/value heads repeated."""
    seg = torch.repeat_interleave(torch.arange(len(cu_q) - 1), cu_q.diff().long())
    idx = torch.arange(q.shape[0])
    allowed = (seg[:, None] == seg[None, :]) & (idx[None, :] <= idx[:, None])
    qh, kh, vh = (t.transpose(0, 1) for t in (q, k, v))
    rep = qh.shape[0] // kh.shape[0]
    kh, vh = kh.repeat_interleave(rep, 0), vh.repeat_interleave(rep, 0)
    scores = (qh.float() @ kh.float().transpose(1, 2)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    return (scores.softmax(-1) @ vh.float()).to(q.dtype).transpose(0, 1)


def test_varlen_hands_the_torch_kernel_each_example_as_a_cumulative_length(monkeypatch):
    """The CUDA path's call into torch.nn.attention.varlen.varlen_attn, with a reference
    kernel of the same signature standing in for the GPU one (a dense causal mask per
    example built from cu_seq_q): right layout, boundaries, causality and GQA flag."""
    calls = []

    def reference_varlen(q, k, v, cu_q, cu_k, max_q, max_k, *, scale, window_size, enable_gqa):
        calls.append((cu_q.tolist(), max_q, window_size, enable_gqa, q.shape))
        assert cu_q.dtype == torch.int32 and torch.equal(cu_q, cu_k) and max_q == max_k
        return dense_causal_varlen(q, k, v, cu_q, scale)

    monkeypatch.setattr(attention, "torch_varlen", lambda: reference_varlen)
    monkeypatch.setattr(attention, "use_fused", lambda q, dropout, training: True)
    attention.register()
    model = tiny_llama()
    batch = packed_batch()
    dense = loss_and_grads(model, batch)
    model.set_attn_implementation(attention.NAME)
    assert_same(dense, loss_and_grads(model, batch), 1e-5)
    cu, longest, window, gqa, shape = calls[0]
    assert cu == [0, 11, 20, 27, 32, 64] and longest == 32
    assert window == (-1, 0) and gqa is True and tuple(shape) == (64, 4, 8)


def test_attention_auto_picks_varlen_only_for_packed_causal_rows(monkeypatch):
    from ftl_train import defaults

    def perf(*argv, caps=CPU):
        return resolve(hparams.parse(["--task", *argv]), caps)

    assert perf("sft", caps=GPU).attn_implementation == attention.NAME
    assert perf("sft", "--packing", "false", caps=GPU).attn_implementation == "sdpa"
    assert perf("clm", caps=GPU).attn_implementation == "sdpa"
    assert perf("qa", caps=GPU).attn_implementation == "sdpa"
    assert perf("sft", "--attn_implementation", "sdpa", caps=GPU).attn_implementation == "sdpa"
    assert perf("sft").attn_implementation == "sdpa"  # CPU: measured slower, not a default
    assert perf("sft", "--attn_implementation", "varlen").attn_implementation == attention.NAME
    monkeypatch.setattr(defaults, "flash_attention_available", lambda: True)
    assert perf("sft", caps=GPU).attn_implementation == "flash_attention_2"


# ---------------------------------------------------------------- linear + cross-entropy


@pytest.mark.parametrize("tie", [True, False])
def test_chunked_loss_matches_the_plain_loss_and_gradients(tie):
    model = tiny_llama(tie=tie)
    batch = packed_batch()
    plain = loss_and_grads(model, batch)
    plain_n = loss_and_grads(model, batch, num_items_in_batch=torch.tensor(80))
    plain_bf16 = loss_and_grads(model, batch, autocast=True)
    assert fused_loss.install(model, chunk=7)  # chunks that do not divide the token count
    assert_same(plain, loss_and_grads(model, batch), 1e-5)
    assert_same(plain_n, loss_and_grads(model, batch, num_items_in_batch=torch.tensor(80)), 1e-5)
    assert_same(plain_bf16, loss_and_grads(model, batch, autocast=True), 1e-2)
    # evaluation keeps the plain forward and its logits
    model.eval()
    with torch.no_grad():
        assert model(**batch).logits.shape == (2, 32, 300)


def test_chunked_loss_under_lora_trains_only_the_adapters_the_same_way():
    from peft import LoraConfig, get_peft_model

    def lora(install: bool):
        model = tiny_llama()
        if install:
            assert fused_loss.install(model, chunk=16)
        torch.manual_seed(3)
        config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
        return get_peft_model(model, config).train()

    batch = packed_batch()
    assert_same(loss_and_grads(lora(False), batch), loss_and_grads(lora(True), batch), 1e-5)


def test_chunked_loss_refuses_models_whose_head_is_not_plain():
    gpt2 = transformers.AutoModelForCausalLM.from_config(
        transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)
    )
    assert "model type 'gpt2'" in fused_loss.supported(gpt2)
    assert not fused_loss.install(gpt2)
    scaled = tiny_llama()
    scaled.config.logits_scaling = 4.0
    assert "scales its logits (logits_scaling)" in fused_loss.supported(scaled)
    assert fused_loss.supported(tiny_llama()) is None


# ---------------------------------------------------------------- optimizer states


def test_bf16_optimizer_states_halve_the_moments_and_track_float32_adamw():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ours = copy.deepcopy(ref)
    kw = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    opt_ref, opt_ours = (
        torch.optim.AdamW(ref.parameters(), **kw),
        AdamWBf16States(ours.parameters(), **kw),
    )
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    for _ in range(20):
        for model, opt in ((ref, opt_ref), (ours, opt_ours)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    for a, b in zip(ref.parameters(), ours.parameters(), strict=True):
        a, b = a.detach(), b.detach()
        assert float((a - b).abs().max()) <= 1e-2 * float(a.abs().max())
        assert not torch.equal(a, b)  # not the same arithmetic: rounding shows
    state = next(iter(opt_ours.state.values()))
    assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.bfloat16


# ---------------------------------------------------------------- hyperparameters, job


def test_kernel_hyperparameters_are_checked():
    assert resolve(hparams.parse(["--task", "sft"]), GPU).loss_kernel == "chunked"
    assert resolve(hparams.parse(["--task", "clm"]), GPU).loss_kernel == "chunked"
    assert resolve(hparams.parse(["--task", "qa"]), GPU).loss_kernel == "plain"
    assert resolve(hparams.parse(["--task", "sft"]), CPU).loss_kernel == "plain"
    chunked = hparams.parse(["--task", "sft", "--loss_kernel", "chunked"])
    assert resolve(chunked, CPU).loss_kernel == "chunked"
    bad = [
        (["--task", "qa", "--loss_kernel", "chunked"], "loss_kernel='chunked' applies to task sft"),
        (["--task", "qa", "--attn_implementation", "varlen"], "causal attention for task sft"),
        (["--task", "sft", "--liger_kernel", "true", "--loss_kernel", "chunked"], "own fused"),
        (["--task", "sft", "--optim_state_dtype", "bfloat16", "--optim", "adafactor"], "optim="),
        (["--task", "sft", "--optim_state_dtype", "float16"], "optim_state_dtype"),
        (["--task", "sft", "--loss_chunk_tokens", "0"], "loss_chunk_tokens"),
    ]
    for argv, message in bad:
        with pytest.raises(HyperparameterError, match=message):
            hparams.parse(argv)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_llama_dir(tmp_path_factory.mktemp("llama") / "model")


def _sft(tmp_path, channels, *extra):
    argv = ["--task", "sft", "--max_steps", "3", "--per_device_train_batch_size", "4"]
    argv += ["--logging_steps", "1", "--save_steps", "100", "--max_seq_length", "64"]
    argv += ["--checkpoint_dir", str(tmp_path / "ckpt"), *extra]
    return main(argv, sm_environ(tmp_path, channels))


def test_metric_lines_name_the_kernels_that_ran(tmp_path, llama, capsys):
    channels = {
        "train": write_records(chat_records(30), tmp_path / "train", "jsonl"),
        "model": llama,
    }
    extra = ["--attn_implementation", "varlen", "--loss_kernel", "chunked"]
    assert _sft(tmp_path, channels, *extra, "--optim_state_dtype", "bfloat16") == 0
    lines = parse_lines(capsys.readouterr().out)
    names = {n for n, _v, _s in lines}
    assert {
        "kernel_attention_ftl_varlen", "kernel_loss_chunked", "kernel_norm_rope_swiglu_plain",
        "kernel_optimizer_adamw_bf16_states", "kernel_optimizer_states_bfloat16",
    } <= names  # fmt: skip
    assert {"train_loss", "train_tokens_per_second"} <= names
    results = json.loads((tmp_path / "output_data" / "results.json").read_text())
    assert results["kernels"]["loss"] == "chunked"


def test_liger_kernel_is_refused_on_a_cpu_before_reading_data(tmp_path, llama, capsys):
    channels = {"train": tmp_path / "missing", "model": llama}
    assert _sft(tmp_path, channels, "--liger_kernel", "true") == 2
    assert "liger_kernel=true needs a CUDA GPU" in capsys.readouterr().err


# ---------------------------------------------------------------- SMP v2 without the image


def test_smp_v2_calls_without_the_library(monkeypatch):
    """What can be checked without the SMP image: the parameters reach torch.sagemaker.init
    unchanged, transform() gets the loaded model and its result is what trains, and the
    Trainer's FSDP options follow hybrid_shard_degree. The library itself is closed."""
    seen = {}
    fake = types.ModuleType("torch.sagemaker")
    fake.init = lambda params: seen.setdefault("init", params)
    fake.transform = lambda model: seen.setdefault("transform", model) and ("sharded", model)
    monkeypatch.setitem(sys.modules, "torch.sagemaker", fake)
    params = {
        "tensor_parallel_degree": 2,
        "hybrid_shard_degree": 4,
        "sm_activation_offloading": True,
    }
    env = {"SM_HP_MP_PARAMETERS": json.dumps(json.dumps(params))}  # the SDK's double encoding
    tsm = parallel.smp_v2_init(env)
    assert tsm is fake and seen["init"] == params
    model = object()
    assert (
        parallel.smp_v2_transform(tsm, model) == ("sharded", model) and seen["transform"] is model
    )
    hp = hparams.parse(["--task", "sft"])
    assert parallel.smp_v2_fsdp_options(env, hp) == "hybrid_shard auto_wrap"
    one = {
        "SM_HP_MP_PARAMETERS": json.dumps({"tensor_parallel_degree": 2, "hybrid_shard_degree": 1})
    }
    assert parallel.smp_v2_fsdp_options(one, hp) == "full_shard auto_wrap"
    given = hparams.parse(["--task", "sft", "--fsdp", "shard_grad_op auto_wrap"])
    assert parallel.smp_v2_fsdp_options(env, given) == "shard_grad_op auto_wrap"


def test_liger_kernel_is_installed_from_its_pin_only_when_asked(monkeypatch, tmp_path):
    import subprocess
    import tempfile

    from ftl_train import kernels

    assert kernels.pinned("liger-kernel") == "liger-kernel==0.8.5"
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "No matching distribution (offline)")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    kernels.check(hparams.parse(["--task", "sft"]), cuda=True, environ={})
    assert calls == []  # not asked: nothing installed, no PyPI needed
    hp = hparams.parse(["--task", "sft", "--liger_kernel", "true"])
    with pytest.raises(
        HyperparameterError, match="liger-kernel==0.8.5.*offline.*needs it in its image"
    ):
        kernels.check(hp, cuda=True, environ={})
    assert calls[0][-1] == "liger-kernel==0.8.5" and calls[0][1:4] == ["-m", "pip", "install"]
    # requirements.txt (what the toolkit installs in every job) stays free of requirement lines
    text = (Path(kernels.REQUIREMENTS).parent / "requirements.txt").read_text()
    assert [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")] == []


def test_varlen_repeats_grouped_heads_for_a_kernel_without_enable_gqa(monkeypatch):
    """torch 2.10-2.11's varlen_attn has no ``enable_gqa`` (it raised TypeError on an H100):
    the key/value heads are repeated to the query's count and the result is unchanged."""
    calls = []

    def old_varlen(q, k, v, cu_q, cu_k, max_q, max_k, *, scale, window_size):
        calls.append((q.shape[1], k.shape[1]))
        assert q.shape[1] == k.shape[1], "grouped heads must arrive repeated"
        return dense_causal_varlen(q, k, v, cu_q, scale)

    monkeypatch.setattr(attention, "torch_varlen", lambda: old_varlen)
    monkeypatch.setattr(attention, "use_fused", lambda q, dropout, training: True)
    attention.register()
    model = tiny_llama()
    batch = packed_batch()
    dense = loss_and_grads(model, batch)
    model.set_attn_implementation(attention.NAME)
    assert_same(dense, loss_and_grads(model, batch), 1e-5)
    assert calls and calls[0][0] == calls[0][1] == 4


def test_the_compute_dtype_follows_autocast_on_cuda_only_and_gqa_support_is_detected(monkeypatch):
    """Full fine-tuning on a GPU: float32 weights and rotary embeddings hand attention float32
    queries inside bf16 autocast; the fused kernel must get autocast's dtype (on an H100 the
    float32 queries sent every step down the per-example fallback). A CPU tensor keeps its
    dtype (no fused kernel there)."""
    from ftl_train import compat

    q = torch.zeros(4, 2, 8)
    monkeypatch.setattr(compat, "autocast_dtype", lambda device_type: torch.bfloat16)
    assert attention.compute_dtype(q) == torch.float32
    assert compat.varlen_takes_gqa(lambda q, k, v, *, enable_gqa: None)
    assert not compat.varlen_takes_gqa(lambda q, k, v, *, scale, window_size: None)
