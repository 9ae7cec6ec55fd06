"""SFT training throughput of the shipped entrypoint: its defaults against a plain configuration.

    python bench/train_throughput.py --task sft [--config auto|tiny|llama-1b] [--json PATH]

Both runs go through ``ftl_train.run.prepare_run`` (the job's own hyperparameter
parsing, defaults, chat templating, packing, collator and Trainer) on generated chat data
whose lengths are log-normal (median about a quarter of the sequence, a tail past it).

* ``plain``: fp32, no packing (dynamic padding, random batches), eager attention, plain
  AdamW, no torch.compile: a Trainer with nothing tuned (``PLAIN_PROFILE``).
* ``today``: the entrypoint's defaults before issue 21's kernels (``today_profile``): bf16
  autocast where supported, packing into ``max_seq_length`` rows, SDPA with a dense
  block-diagonal mask (or FlashAttention-2 when installed), logits then cross-entropy,
  fused AdamW, TF32, torch.compile on CUDA.
* ``new``: on a GPU the shipped defaults, nothing overridden: as ``today`` plus
  variable-length attention over the packed rows (``attn_implementation=varlen``, unless
  FlashAttention-2 is installed) and the chunked linear + cross-entropy
  (``loss_kernel=chunked``). On a CPU, where those two are not defaults, the same two asked
  for explicitly.

All use the same batch (rows per step) and sequence limit. Peak memory: the CUDA
allocator's peak on a GPU; on a CPU the growth of the process's resident memory during
training (sampled every 2 ms). tokens/s counts non-padding tokens; MFU =
flops_per_token x tokens/s / the GPU's dense 16-bit peak
(``ftl_train.throughput``: 6N for full fine-tuning), printed only for a GPU in that table.
On a GPU the model is a Llama-3.2-1B-shaped model (1.24 B parameters, random weights); on a
CPU a small Llama at sequence 256 (fp32 either way there, so the CPU ratio measures packing
and attention only).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

CONFIGS = {
    "llama-1b": dict(
        hidden=2048, layers=16, heads=32, kv_heads=8, intermediate=8192, vocab=128256,
        tie=True, seq=2048, batch=4, median=400, sigma=0.9, warmup=4, steps=20, steps_plain=8,
    ),
    "tiny": dict(
        hidden=256, layers=4, heads=4, kv_heads=2, intermediate=688, vocab=4096,
        tie=True, seq=256, batch=8, median=60, sigma=0.8, warmup=1, steps=4, steps_plain=4,
    ),
    # the tiny model with a Llama-2-sized vocabulary: where the output head and loss weigh
    "tiny-32k": dict(
        hidden=256, layers=4, heads=4, kv_heads=2, intermediate=688, vocab=32000,
        tie=True, seq=512, batch=4, median=120, sigma=0.8, warmup=1, steps=4, steps_plain=4,
    ),
}  # fmt: skip

PLAIN_PROFILE: dict[str, object] = {
    "bf16": False,
    "fp16": False,
    "tf32": False,
    "packing": False,
    "attn_implementation": "eager",
    "optim": "adamw_torch",
    "group_by_length": False,
    "dataloader_num_workers": 0,
    "torch_compile": False,
    "loss_kernel": "plain",
}


def today_profile(cuda: bool) -> dict[str, object]:
    """The defaults as they were before issue 21's kernels: FlashAttention-2 when installed on
    CUDA, else SDPA with its dense block-diagonal mask; logits, then cross-entropy. The "new"
    row overrides nothing (the shipped defaults)."""
    from ftl_train.defaults import flash_attention_available

    attn = "flash_attention_2" if cuda and flash_attention_available() else "sdpa"
    return {"attn_implementation": attn, "loss_kernel": "plain"}


class RssPeak:
    """CPU only: the process's resident memory, sampled every 2 ms; ``peak`` is the growth
    over the value at ``start`` (what the training run added), in bytes."""

    def __init__(self) -> None:
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.base = self.high = 0

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.high = max(self.high, self.rss())

    def start(self) -> None:
        self.base = self.high = self.rss()
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.high, self.rss()) - self.base


SPECIAL = ["<pad>", "<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>"]
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


@dataclass
class SftResult:
    name: str
    precision: str
    attention: str
    packing: bool
    optim: str
    batch: int
    steps: int
    seconds: float
    tokens_per_s: float
    mfu: float | None
    peak_mem_gib: float | None
    kernels: dict | None = None
    profile: dict | None = None


def build_workdir(cfg: dict, root: Path, n_examples: int, seed: int = 0) -> dict[str, Path]:
    """A random-weight Llama with a word-level chat tokenizer, and generated chat data."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [f"w{i}" for i in range(cfg["vocab"] - len(SPECIAL))]
    vocab = {t: i for i, t in enumerate(SPECIAL + words)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
        eos_token="</s>", additional_special_tokens=SPECIAL[4:], model_max_length=cfg["seq"],
    )  # fmt: skip
    tok.chat_template = TEMPLATE
    config = transformers.LlamaConfig(
        vocab_size=cfg["vocab"], hidden_size=cfg["hidden"], num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"],
        intermediate_size=cfg["intermediate"], max_position_embeddings=cfg["seq"],
        tie_word_embeddings=cfg["tie"], bos_token_id=2, eos_token_id=3, pad_token_id=0,
        rope_theta=500000.0,
    )  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model_dir = root / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    del model

    rng = random.Random(seed)
    train = root / "train"
    train.mkdir(parents=True)
    with open(train / "train.jsonl", "w", encoding="utf-8") as fh:
        for _ in range(n_examples):
            n = max(8, int(rng.lognormvariate(math.log(cfg["median"]), cfg["sigma"])))
            q = " ".join(rng.choice(words) for _ in range(max(4, n // 3)))
            a = " ".join(rng.choice(words) for _ in range(max(4, n - n // 3)))
            msgs = [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            fh.write(json.dumps({"messages": msgs}) + "\n")
    return {"model": model_dir, "train": train}


def make_timer(warmup: int, cuda: bool, end: int | None = None, profile_steps: int = 0):
    """Marks the measured window: from the end of step ``warmup`` to step ``end`` (default the
    last step). With ``profile_steps``, the steps after ``end`` run under torch.profiler
    (``prof``), outside the measured window."""
    from transformers import TrainerCallback

    class Timer(TrainerCallback):
        t0 = t1 = None
        measuring = False
        prof = None
        prof_seconds = 0.0
        _p0 = 0.0

        def _now(self) -> float:
            if cuda:
                import torch

                torch.cuda.synchronize()
            return time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            last = end if end is not None else state.max_steps
            if state.global_step == warmup:
                self.t0, self.measuring = self._now(), True
            elif state.global_step == last and self.measuring:
                self.t1, self.measuring = self._now(), False
                if profile_steps > 0:
                    self._start_profile()
            elif self.prof is not None and state.global_step == last + profile_steps:
                self.prof_seconds = self._now() - self._p0
                self.prof.stop()
            if state.global_step >= state.max_steps:
                # no end-of-training checkpoint: for a 1B model that writes the weights and
                # AdamW states (15 GB), after the measurement and of no use to it
                control.should_save = False
                return control
            return None

        def _start_profile(self):
            import torch

            acts = [torch.profiler.ProfilerActivity.CPU]
            if cuda:
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            self.prof = torch.profiler.profile(activities=acts)
            self.prof.start()
            self._p0 = time.perf_counter()

    return Timer()


# Kernel name patterns -> where the device time goes (first match wins).
KERNEL_CLASSES = (
    ("attention", ("flash", "fmha", "attention", "attn")),
    (
        "matmul",
        (
            "gemm",
            "cutlass",
            "xmma",
            "nvjet",
            "cublas",
            "matmul",
            "sm90_",
            "wgmma",
            "::mm",
            "addmm",
            "bmm",
        ),
    ),
    ("optimizer", ("multi_tensor", "adam", "foreach")),
    ("loss/softmax", ("cross_entropy", "log_softmax", "softmax", "nll_loss")),
    ("copy/memset", ("memcpy", "memset", "copy_")),
    ("compiled (triton)", ("triton",)),
    ("elementwise/reduce", ("elementwise", "reduce", "vectorized", "unrolled")),
)


def kernel_profile(prof, cuda: bool, seconds: float, steps: int, top: int = 15) -> dict:
    """The profiled steps' top kernels by device time (CPU: top ops by self CPU time), the
    device time by kind of kernel, and device time against wall time (the idle share)."""
    import torch

    def collect(kernels_only: bool) -> list[tuple[str, float, int]]:
        rows = []
        for e in prof.key_averages():
            if cuda:
                on_device = getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
                if kernels_only and not on_device:
                    continue
                us = getattr(e, "self_device_time_total", None)
                if us is None:
                    us = getattr(e, "self_cuda_time_total", 0.0)
            else:
                us = e.self_cpu_time_total
            if us and us > 0:
                rows.append((e.key, float(us), int(e.count)))
        return rows

    # kernels (device-side events); should none be tagged so, every event with device time
    rows = collect(True) or collect(False)
    rows.sort(key=lambda r: -r[1])
    total_us = sum(r[1] for r in rows) or 1.0
    classes: dict[str, float] = {}
    for name, us, _n in rows:
        low = name.lower()
        kind = next((k for k, pats in KERNEL_CLASSES if any(p in low for p in pats)), "other")
        classes[kind] = classes.get(kind, 0.0) + us
    return {
        "unit": "device time" if cuda else "self CPU time",
        "steps": steps,
        "wall_ms": 1000 * seconds,
        "busy_ms": total_us / 1000,
        "busy_share_of_wall": (total_us / 1e6) / seconds if seconds > 0 else None,
        "by_kind_pct": {
            k: round(100 * v / total_us, 2)
            for k, v in sorted(classes.items(), key=lambda kv: -kv[1])
        },
        "top": [
            {
                "name": n[:160],
                "ms": round(us / 1000, 3),
                "calls": c,
                "pct": round(100 * us / total_us, 2),
            }
            for n, us, c in rows[:top]
        ],
    }


def print_profile(name: str, prof: dict) -> None:
    if "error" in prof:
        print(f"profile of {name!r} failed: {prof['error']}")
        return
    share = prof.get("busy_share_of_wall")
    print(
        f"\nprofile of {name!r}: {prof['steps']} steps, wall {prof['wall_ms']:.1f} ms, "
        f"{prof['unit']} {prof['busy_ms']:.1f} ms"
        + (f" ({100 * share:.1f}% of wall)" if share is not None else "")
    )
    print("by kind: " + ", ".join(f"{k} {v:.1f}%" for k, v in prof["by_kind_pct"].items()))
    print(f"{'%':>6} {'ms':>10} {'calls':>6}  kernel")
    for r in prof["top"]:
        print(f"{r['pct']:6.2f} {r['ms']:10.3f} {r['calls']:>6}  {r['name'][:120]}")


# size: one measured run (set-up, warm-up, timed steps, profile, memory) in the order it happens
def run_one(
    name: str,
    overrides: dict,
    cfg: dict,
    channels: dict,
    root: Path,
    cuda: bool,
    profile_steps: int = 0,
    profile_top: int = 15,
):
    import gc
    import logging

    import torch

    from ftl_train.callbacks import MetricLineCallback
    from ftl_train.kernels import KernelLines
    from ftl_train.run import prepare_run
    from ftl_train.throughput import TokenMeter, cuda_device_name, mfu, peak_flops

    gc.collect()
    steps = cfg["steps_plain"] if name == "plain" else cfg["steps"]
    batch = int(overrides.get("per_device_train_batch_size", cfg["batch"]))
    warmup = cfg["warmup"]
    base = {
        "task": "sft",
        "max_seq_length": cfg["seq"],
        "per_device_train_batch_size": cfg["batch"],
        "max_steps": warmup + steps + profile_steps,
        "save_steps": 10**9,
        "logging_steps": 10**9,
        "eval_steps": 0,
        "learning_rate": 1e-5,
        "checkpoint_dir": str(root / f"ckpt-{name}"),
    }
    base.update(overrides)
    argv = [x for k, v in base.items() for x in (f"--{k}", str(v))]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    env.update({
        "SM_CHANNEL_TRAIN": str(channels["train"]), "SM_CHANNEL_MODEL": str(channels["model"]),
        "SM_MODEL_DIR": str(root / f"out-{name}"), "SM_OUTPUT_DATA_DIR": str(root / f"data-{name}"),
        "FTL_CACHE_DIR": str(root / "cache"),
    })  # fmt: skip
    timer = make_timer(warmup, cuda, warmup + steps, profile_steps)
    run = prepare_run(argv, env, callbacks=[timer])
    run.trainer.remove_callback(MetricLineCallback)
    run.trainer.remove_callback(KernelLines)  # the kernels are in the table and the JSON
    for logger_name in ("ftl_train", "transformers.trainer", "transformers.trainer_utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    meter = TokenMeter(run.tokenizer.pad_token_id)

    def hook(module, args, kwargs):
        if timer.measuring and module.training:
            meter.count(kwargs)

    handle = run.trainer.model.register_forward_pre_hook(hook, with_kwargs=True)
    rss = None
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    else:
        rss = RssPeak()
        rss.start()
    try:
        run.trainer.train()
    finally:
        handle.remove()
        grown = rss.stop() if rss is not None else None
        if timer.prof is not None and timer.prof_seconds == 0.0:
            timer.prof.stop()  # training ended early
    seconds = (timer.t1 or time.perf_counter()) - (timer.t0 or time.perf_counter())
    tps = meter.global_total(1) / seconds if seconds > 0 else 0.0
    perf = run.perf
    precision = ("bf16" if perf.bf16 else "fp16" if perf.fp16 else "fp32") + (
        "+tf32" if perf.tf32 else ""
    )
    profile = None
    if timer.prof is not None and timer.prof_seconds > 0:
        try:
            profile = kernel_profile(
                timer.prof, cuda, timer.prof_seconds, profile_steps, profile_top
            )
        except Exception as exc:  # the figures above stand without it
            profile = {"error": f"{type(exc).__name__}: {exc}"[:300], "top": [], "by_kind_pct": {}}
    result = SftResult(
        name=name, precision=precision, attention=run.trainer.model.config._attn_implementation,
        packing=bool(run.hp.packing), optim=perf.optim, batch=batch, steps=steps,
        seconds=seconds, tokens_per_s=tps,
        mfu=mfu(run.trainer._ftl_fpt or 0.0, tps, peak_flops(cuda_device_name()), 1),
        peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else grown / 2**30,
        kernels=run.trainer.ftl_kernels.as_dict(),
        profile=profile,
    )  # fmt: skip
    del run
    if cuda:
        torch.cuda.empty_cache()
    return result


def print_table(results: list, cfg_name: str, device: str) -> None:
    print(f"\ntrain throughput, sft, config={cfg_name}, device={device}")
    header = (
        f"{'run':<6} {'precision':<10} {'attention':<18} {'loss':<8} {'packing':<7}"
        f" {'optim':<18} {'batch':>5} {'tokens/s':>10} {'MFU':>7} {'peak GiB':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        m = f"{100 * r.mfu:6.2f}%" if r.mfu is not None else "    n/a"
        mem = f"{r.peak_mem_gib:8.3f}" if r.peak_mem_gib is not None else "     n/a"
        loss = (r.kernels or {}).get("loss", "?")
        print(
            f"{r.name:<6} {r.precision:<10} {r.attention:<18} {loss:<8} {str(r.packing):<7}"
            f" {r.optim:<18} {r.batch:>5} {r.tokens_per_s:>10.0f} {m:>7} {mem}"
        )


def _ratios(results: list) -> dict[str, float]:
    by = {r.name: r.tokens_per_s for r in results}
    out = {}
    for a, b in (("new", "plain"), ("new", "today"), ("today", "plain")):
        if by.get(a) and by.get(b):
            out[f"{a}/{b}"] = by[a] / by[b]
    return out


def _print_row(r) -> None:
    m = f"{100 * r.mfu:.2f}%" if r.mfu is not None else "n/a"
    mem = f"{r.peak_mem_gib:.2f}" if r.peak_mem_gib is not None else "n/a"
    print(
        f"[{time.strftime('%H:%M:%S')}] {r.name}: {r.tokens_per_s:.0f} tokens/s, MFU {m}, peak"
        f" {mem} GiB ({r.steps} steps in {r.seconds:.2f} s; {r.precision}, {r.attention},"
        f" loss {(r.kernels or {}).get('loss', '?')})",
        flush=True,
    )


# size: the benchmark's command line and its report, in the order they print
def main(
    config: str,
    json_path: str | None,
    repeats: int | None,
    variants: list[dict] | None = None,
    skip_plain: bool = False,
    steps: int | None = None,
    warmup: int | None = None,
    plain_steps: int | None = None,
    order: list[str] | None = None,
    profile_steps: int = 0,
    profile_top: int = 15,
) -> int:
    """plain, today's defaults and the new defaults, alternating; each ``variants`` entry adds
    a run of the defaults with those overrides (a run that fails, e.g. out of memory, is
    reported). ``steps``/``warmup``/``plain_steps`` override the config's step counts,
    ``order`` picks and orders the configurations, and ``profile_steps`` profiles that many
    steps after each tuned run's measured window (the best run's top kernels are printed)."""
    import shutil
    import tempfile
    from dataclasses import asdict

    import torch

    cuda = torch.cuda.is_available()
    cfg_name = config if config != "auto" else ("llama-1b" if cuda else "tiny")
    cfg = dict(CONFIGS[cfg_name])
    for key, value in (("steps", steps), ("warmup", warmup), ("steps_plain", plain_steps)):
        if value is not None:
            cfg[key] = value
    device = torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)"
    root = Path(tempfile.mkdtemp(prefix="ftl_bench_sft_"))
    results: list = []
    failed: dict[str, str] = {}
    reps = repeats or (1 if cuda else 2)

    def write_json() -> None:
        if json_path:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(json_path).write_text(json.dumps(
                {"task": "sft", "config": cfg_name, "device": device, "cfg": cfg,
                 "ratios": _ratios(results), "failed": failed,
                 "results": [asdict(r) for r in results]}, indent=2))  # fmt: skip

    def attempt(name: str, overrides: dict, runs: list) -> None:
        t = time.perf_counter()
        print(f"[{time.strftime('%H:%M:%S')}] {name}: {json.dumps(overrides)}", flush=True)
        try:
            prof = 0 if name == "plain" else profile_steps
            runs.append(run_one(name, overrides, cfg, channels, root, cuda, prof, profile_top))
            _print_row(runs[-1])
            if runs[-1].profile:
                print_profile(name, runs[-1].profile)
            print(f"  ({time.perf_counter() - t:.1f} s with loading and compiling)", flush=True)
        except Exception as exc:  # report and go on (e.g. out of memory)
            failed[name] = f"{type(exc).__name__}: {exc}"[:500]
            print(f"{name}: {json.dumps(overrides)} failed: {failed[name]}", flush=True)
            if cuda:
                torch.cuda.empty_cache()

    try:
        steps_max = max(cfg["steps"], cfg["steps_plain"]) + profile_steps
        rows = (cfg["warmup"] + steps_max) * cfg["batch"]
        # packed rows hold several examples: enough examples for the packed runs' rows too
        tokens_per_example = cfg["median"] * math.exp(cfg["sigma"] ** 2 / 2)
        n = int(rows * max(1.5, 1.3 * cfg["seq"] / tokens_per_example)) + 64
        channels = build_workdir(cfg, root, n)
        # CPU: the kernels are not defaults there (measured slower), so "new" asks for them
        new = {} if cuda else {"attn_implementation": "varlen", "loss_kernel": "chunked"}
        profiles = {"plain": PLAIN_PROFILE, "today": today_profile(cuda), "new": new}
        if order:
            unknown = [k for k in order if k not in profiles]
            if unknown:
                raise SystemExit(f"--order: unknown configuration(s) {unknown}")
            profiles = {k: profiles[k] for k in order}
        if skip_plain:
            profiles.pop("plain", None)
        runs: dict[str, list] = {k: [] for k in profiles}
        for _ in range(reps):
            for name, overrides in profiles.items():
                attempt(name, overrides, runs[name])
                results[:] = [max(runs[k], key=lambda r: r.tokens_per_s) for k in runs if runs[k]]
                write_json()
        for i, extra in enumerate(variants or []):
            vruns: list = []
            attempt(f"v{i}", extra, vruns)
            results.extend(vruns)
            write_json()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(results, cfg_name, device)
    ratios = _ratios(results)
    memory = (
        "peak GiB: torch.cuda.max_memory_allocated"
        if cuda
        else ("peak GiB: growth of the process's resident memory during training (CPU)")
    )
    print(
        f"note: best of {reps} alternating runs each; MFU against the dense 16-bit peak; {memory}"
    )
    print("ratios (tokens/s): " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    profiled = [r for r in results if r.profile]
    if profiled:
        best = max(profiled, key=lambda r: r.tokens_per_s)
        print_profile(best.name, best.profile)
    for name, err in failed.items():
        print(f"FAILED {name}: {err}")
    write_json()
    return 1 if failed else 0
