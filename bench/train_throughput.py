"""Training throughput of the shipped entrypoint: the seed's settings against its tuned defaults.

    python bench/train_throughput.py [--config auto|tiny|bert-large] [--steps N] [--json PATH]
    python bench/train_throughput.py --task sft [--config auto|tiny|llama-1b] [--json PATH]
        [--steps N] [--warmup N] [--plain-steps N] [--order new,today,plain]
        [--profile-steps N] [--profile-top K]

``--task sft`` measures causal-LM SFT (``bench/sft_throughput.py``): a plain configuration
(fp32, no packing, eager attention), the defaults before issue 21's kernels and the shipped
defaults, in one run: tokens/s, MFU and peak memory, with the device named.
The default, ``--task qa``, is the seed comparison below.

Both runs go through ``training/ftl_train`` itself (``run.prepare_run``: the same
hyperparameter parsing, performance defaults, tokenization, collator, sampler and
Trainer the SageMaker job uses), on extractive QA with generated SQuAD-like data whose
context lengths vary the way SQuAD's do, so padding matters.

* ``seed``: the seed article's BERT-large SQuAD job (fp16, batch 4 per device, every
  window padded to 384 tokens, eager attention, plain AdamW); ``ftl_train.defaults.SEED_PROFILE``.
* ``tuned``: the entrypoint with nothing overridden (bf16 where supported, batch 16,
  SDPA attention, fused AdamW on CUDA, dynamic padding with length grouping, TF32 on
  Ampere and newer, padding to a multiple of 8 on CUDA).

On a GPU the configuration is BERT-large (random weights) at sequence 384; on a CPU a
small BERT at sequence 128, which finishes in well under two minutes. fp16/bf16 do not
apply on a CPU (the entrypoint trains in float32 there), so the CPU ratio measures batch
size, padding and attention only.

Samples are QA windows (features). MFU = 6 x parameters x real (non-padding) tokens per
second / peak FLOP/s; attention FLOPs are left out (the usual 6N approximation). The GPU
peak is the dense 16-bit tensor-core figure from a small table; on a CPU the peak is an
estimate (cores x clock x FLOP per cycle from the vector width) and says so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "training"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CONFIGS = {
    # name: model shape, sequence, stride, context length distribution (tokens), steps
    "bert-large": dict(
        hidden=1024, layers=24, heads=16, intermediate=4096, vocab=30522, positions=512,
        seq=384, stride=128, ctx_median=150, ctx_sigma=0.45, q_lo=6, q_hi=20,
        steps_seed=60, steps_tuned=30, warmup=8,
    ),
    "tiny": dict(
        hidden=256, layers=4, heads=4, intermediate=1024, vocab=4096, positions=512,
        seq=128, stride=32, ctx_median=50, ctx_sigma=0.45, q_lo=4, q_hi=12,
        steps_seed=16, steps_tuned=6, warmup=2,
    ),
}  # fmt: skip


@dataclass
class Result:
    name: str
    batch: int
    precision: str
    attention: str
    padding: str
    optim: str
    steps: int
    seconds: float
    samples_per_s: float
    real_tokens_per_s: float
    padding_efficiency: float
    mfu: float | None


# ---------------------------------------------------------------- inputs


def wordpiece_tokenizer(vocab: list[str]):
    """A BERT-style fast tokenizer over `vocab`, built offline (no hub download)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    ids = {t: i for i, t in enumerate(vocab)}
    tk = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=512,
    )  # fmt: skip


def build_workdir(cfg: dict, root: Path, n_examples: int, seed: int = 0) -> dict[str, Path]:
    """A random-weight QA model with its tokenizer, and a train channel of generated data."""
    import transformers

    rng = random.Random(seed)
    n_words = cfg["vocab"] - 5
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(n_words)]
    tok = wordpiece_tokenizer(vocab)
    config = transformers.BertConfig(
        vocab_size=cfg["vocab"], hidden_size=cfg["hidden"], num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"], intermediate_size=cfg["intermediate"],
        max_position_embeddings=cfg["positions"],
    )  # fmt: skip
    model = transformers.AutoModelForQuestionAnswering.from_config(config)
    model_dir = root / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    del model

    train = root / "train"
    train.mkdir(parents=True)
    with open(train / "train.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n_examples):
            # SQuAD-like: a log-normal context length with a tail past the window size.
            n = max(8, int(rng.lognormvariate(math.log(cfg["ctx_median"]), cfg["ctx_sigma"])))
            words = [f"w{rng.randrange(n_words)}" for _ in range(n)]
            a = rng.randrange(n - 3)
            answer = " ".join(words[a : a + rng.randint(1, 3)])
            start = len(" ".join(words[:a])) + (1 if a else 0)
            q = [f"w{rng.randrange(n_words)}" for _ in range(rng.randint(cfg["q_lo"], cfg["q_hi"]))]
            rec = {
                "id": str(i),
                "question": " ".join(q) + " ?",
                "context": " ".join(words),
                "answers": {"text": [answer], "answer_start": [start]},
            }
            fh.write(json.dumps(rec) + "\n")
    return {"model": model_dir, "train": train}


# ---------------------------------------------------------------- measurement


def make_timer(warmup: int, cuda: bool):
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        """Wall time from the end of the warm-up steps to the last step; counts tokens meanwhile."""

        def __init__(self):
            self.t0 = self.t1 = None
            self.measuring = False
            self.real_tokens = 0
            self.padded_tokens = 0
            self.samples = 0

        def hook(self, module, args, kwargs):  # forward pre-hook on the model
            if not (self.measuring and module.training):
                return
            mask = kwargs.get("attention_mask")
            ids = kwargs.get("input_ids")
            if mask is not None:
                self.real_tokens += int(mask.sum())
                self.padded_tokens += mask.numel()
                self.samples += mask.shape[0]
            elif ids is not None:
                self.real_tokens += ids.numel()
                self.padded_tokens += ids.numel()
                self.samples += ids.shape[0]

        def _sync(self):
            if cuda:
                import torch

                torch.cuda.synchronize()

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == warmup:
                self._sync()
                self.t0 = time.perf_counter()
                self.measuring = True
            elif state.global_step == state.max_steps and self.measuring:
                self._sync()
                self.t1 = time.perf_counter()
                self.measuring = False

    return StepTimer()


def peak_flops(cuda: bool) -> tuple[float | None, str]:
    import torch

    if cuda:
        from ftl_train.throughput import peak_flops as gpu_peak

        name = torch.cuda.get_device_name()
        peak = gpu_peak(name)
        if peak:
            return peak, f"{name}: {peak / 1e12:.0f} TFLOP/s dense 16-bit peak"
        return None, f"{name}: peak unknown, MFU n/a"
    cores = torch.get_num_threads()
    ghz, flags = None, ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("cpu MHz") and ghz is None:
                    ghz = float(line.split(":")[1]) / 1000
                elif line.startswith("flags") and not flags:
                    flags = line
    except OSError:
        pass
    if not ghz:
        return None, "CPU peak unknown, MFU n/a"
    # fp32 FLOP per cycle per core: two FMA units x vector lanes x 2
    per_cycle = 64 if " avx512f" in flags else 32 if " avx2" in flags and " fma" in flags else 8
    peak = cores * ghz * 1e9 * per_cycle
    note = (
        f"CPU: estimated fp32 peak {peak / 1e9:.0f} GFLOP/s = {cores} threads x {ghz:.2f} GHz"
        f" x {per_cycle} FLOP/cycle (an estimate; MFU on a CPU is indicative only)"
    )
    return peak, note


def run_one(
    name: str, overrides: dict, cfg: dict, channels: dict, root: Path, cuda: bool
) -> Result:
    import logging

    import torch

    from ftl_train import hparams
    from ftl_train.callbacks import MetricLineCallback
    from ftl_train.run import prepare_run

    steps = cfg["steps_seed"] if name == "seed" else cfg["steps_tuned"]
    warmup = cfg["warmup"]
    base = {
        "task": "qa",
        "max_seq_length": cfg["seq"],
        "doc_stride": cfg["stride"],
        "max_steps": warmup + steps,
        "save_steps": 10**9,  # no checkpoints inside the measured window
        "logging_steps": 10**9,
        "eval_steps": 0,
        "learning_rate": 3e-5,
        "checkpoint_dir": str(root / f"ckpt-{name}"),
    }
    base.update(overrides)
    argv = [x for k, v in base.items() for x in (f"--{k}", str(v))]
    env = dict(os.environ)
    for k in [k for k in env if k.startswith("SM_")]:
        env.pop(k)
    env.update({
        "SM_CHANNEL_TRAIN": str(channels["train"]),
        "SM_CHANNEL_MODEL": str(channels["model"]),
        "SM_MODEL_DIR": str(root / f"out-{name}"),
        "SM_OUTPUT_DATA_DIR": str(root / f"data-{name}"),
        "FTL_CACHE_DIR": str(root / "cache"),
    })  # fmt: skip
    timer = make_timer(warmup, cuda)
    run = prepare_run(argv, env, callbacks=[timer])
    run.trainer.remove_callback(MetricLineCallback)
    for logger_name in ("ftl_train", "transformers.trainer", "transformers.trainer_utils"):
        logging.getLogger(logger_name).setLevel(logging.WARNING)
    handle = run.trainer.model.register_forward_pre_hook(timer.hook, with_kwargs=True)
    try:
        run.trainer.train()
    finally:
        handle.remove()
    hp = hparams.parse(argv)
    perf = run.perf
    seconds = (timer.t1 or time.perf_counter()) - (timer.t0 or time.perf_counter())
    params = sum(p.numel() for p in run.trainer.model.parameters())
    peak, _note = peak_flops(cuda)
    real_tps = timer.real_tokens / seconds if seconds > 0 else 0.0
    mfu = (6 * params * real_tps / peak) if peak else None
    padding = "dynamic+grouped" if perf.group_by_length else "dynamic"
    if perf.pad_to_max_length:
        padding = "max_length"
    precision = "bf16" if perf.bf16 else "fp16" if perf.fp16 else "fp32"
    if perf.tf32:
        precision += "+tf32"
    result = Result(
        name=name,
        batch=hp.per_device_train_batch_size,
        precision=precision,
        attention=run.trainer.model.config._attn_implementation,
        padding=padding,
        optim=perf.optim,
        steps=steps,
        seconds=seconds,
        samples_per_s=timer.samples / seconds if seconds > 0 else 0.0,
        real_tokens_per_s=real_tps,
        padding_efficiency=timer.real_tokens / max(1, timer.padded_tokens),
        mfu=mfu,
    )  # fmt: skip
    del run
    if cuda:
        torch.cuda.empty_cache()
    return result


def seed_overrides(cfg: dict) -> dict:
    from ftl_train.defaults import SEED_PROFILE

    out = dict(SEED_PROFILE)
    out["max_seq_length"] = cfg["seq"]
    out["doc_stride"] = cfg["stride"]
    return out


def print_table(results: list[Result], note: str, cfg_name: str, device: str) -> None:
    print(f"\ntrain throughput, extractive QA, config={cfg_name}, device={device}")
    header = (
        f"{'run':<6} {'batch':>5} {'precision':<10} {'attention':<9} {'padding':<16} {'optim':<18}"
        f" {'samples/s':>10} {'real tok/s':>11} {'pad eff':>8} {'MFU':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        mfu = f"{100 * r.mfu:6.2f}%" if r.mfu is not None else "    n/a"
        print(
            f"{r.name:<6} {r.batch:>5} {r.precision:<10} {r.attention:<9} {r.padding:<16}"
            f" {r.optim:<18} {r.samples_per_s:>10.2f} {r.real_tokens_per_s:>11.0f}"
            f" {r.padding_efficiency:>8.2f} {mfu:>7}"
        )
    print(f"note: {note}")


# size: the benchmark's command line and its report, in the order they print
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=["qa", "sft"], default="qa")
    parser.add_argument(
        "--config", choices=["auto", *CONFIGS, "llama-1b", "tiny-32k"], default="auto"
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="measured steps of the tuned run (qa seed: x 4; sft: of today/new)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="alternate seed/tuned runs this many times, keep each one's best (CPU 2, GPU 1)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="sft: also run the defaults with these overrides (a JSON object); repeatable",
    )
    parser.add_argument("--skip-plain", action="store_true", help="sft: leave the plain run out")
    parser.add_argument("--warmup", type=int, default=None, help="sft: steps before the timing")
    parser.add_argument("--plain-steps", type=int, default=None, help="sft: measured plain steps")
    parser.add_argument(
        "--order",
        default=None,
        help="sft: which configurations, in this order (comma list of plain, today, new)",
    )
    parser.add_argument(
        "--profile-steps",
        type=int,
        default=0,
        help="sft: profile this many steps after each tuned run's timing; print the best's kernels",
    )
    parser.add_argument("--profile-top", type=int, default=15, help="sft: kernels to print")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    parser.add_argument(
        "--smoke", action="store_true", help="the tiny config, a step or two, once: does it run"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.config, args.repeats = "tiny", 1
        args.steps, args.warmup, args.plain_steps = (2, 1, 2) if args.task == "sft" else (1, 0, 0)
    if args.task == "sft":
        try:
            from bench import sft_throughput
        except ImportError:  # run as a script from bench/
            import sft_throughput  # type: ignore[no-redef]

        if args.config not in ("auto", *sft_throughput.CONFIGS):
            parser.error(f"--task sft takes --config auto, {', '.join(sft_throughput.CONFIGS)}")
        variants = [json.loads(v) for v in args.variant]
        return sft_throughput.main(
            args.config,
            args.json,
            args.repeats,
            variants,
            args.skip_plain,
            steps=args.steps,
            warmup=args.warmup,
            plain_steps=args.plain_steps,
            order=[k.strip() for k in args.order.split(",") if k.strip()] if args.order else None,
            profile_steps=args.profile_steps,
            profile_top=args.profile_top,
        )
    if args.config not in ("auto", *CONFIGS):
        parser.error(f"--task qa takes --config auto, {', '.join(CONFIGS)}")

    import torch

    cuda = torch.cuda.is_available()
    cfg_name = args.config if args.config != "auto" else ("bert-large" if cuda else "tiny")
    cfg = dict(CONFIGS[cfg_name])
    if args.steps:
        cfg["steps_tuned"] = args.steps
        cfg["steps_seed"] = args.steps * 4
    if args.smoke:
        cfg["warmup"] = 1
    device = torch.cuda.get_device_name() if cuda else f"cpu ({torch.get_num_threads()} threads)"

    root = Path(tempfile.mkdtemp(prefix="ftl_bench_"))
    try:
        tuned_batch = 16
        n_examples = int((cfg["warmup"] + cfg["steps_tuned"]) * tuned_batch * 1.2) + 64
        n_examples = max(n_examples, int((cfg["warmup"] + cfg["steps_seed"]) * 4 * 1.2) + 64)
        channels = build_workdir(cfg, root, n_examples)
        # Alternating runs, best of each: a shared CPU's noise hits both sides alike.
        repeats = args.repeats or (1 if cuda else 2)
        runs: dict[str, list[Result]] = {"seed": [], "tuned": []}
        for _ in range(repeats):
            runs["seed"].append(run_one("seed", seed_overrides(cfg), cfg, channels, root, cuda))
            runs["tuned"].append(run_one("tuned", {}, cfg, channels, root, cuda))
        results = [max(runs[name], key=lambda r: r.samples_per_s) for name in ("seed", "tuned")]
    finally:
        shutil.rmtree(root, ignore_errors=True)

    _peak, note = peak_flops(cuda)
    print_table(results, note + f"; best of {repeats} alternating runs each", cfg_name, device)
    ratio = (
        results[1].samples_per_s / results[0].samples_per_s
        if results[0].samples_per_s
        else float("nan")
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(
            {"config": cfg_name, "device": device, "note": note, "ratio": ratio,
             "results": [asdict(r) for r in results]}, indent=2))  # fmt: skip
    print(f"ratio tuned/seed: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
