"""Run one shipped template's entrypoint end to end in whatever Python runs this script.

    <image env>/bin/python tests/training/image_smoke.py TEMPLATE [TEMPLATE ...]

Meant for the image environments (``~/.cache/ftl/image-envs/<image set>-<hash>/``): the tiny
model is built from a config by that environment's transformers, the data is generated, and
``training/train.py`` is started with the template's own hyperparameters, overridden only in
``OVERRIDES`` (model size, step counts, checkpoint paths). Per template it checks:

1. a run SIGTERMed after step 2 exits 143 (torchrun: its agent stops the workers) and leaves
   a complete checkpoint at the step it stopped, with finite losses up to there;
2. the restarted run resumes from that checkpoint, trains to ``max_steps`` with finite
   losses and exits 0;
3. the model directory holds the model (or the LoRA adapter) and the tokenizer;
4. every metric the template declares was printed as an ``ftl_metric`` line, except those
   that cannot exist on a CPU (``CPU_ABSENT``).

Written for Python 3.9 and transformers 4.26 alike (the oldest image). Prints one summary
line per template and exits 1 when any failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ftl_train_testlib import (  # noqa: E402
    REPO,
    SLOW_ENTRY,
    TRAINING_DIR,
    VOCAB,
    cls_records,
    lm_records,
    make_tokenizer,
    parse_lines,
    qa_records,
    sm_environ,
    write_records,
)

sys.path.insert(0, str(TRAINING_DIR))
from ftl_train import checkpoints  # noqa: E402

TEMPLATES = REPO / "jobmodel" / "shipped_templates.json"
STOP_AFTER = 2  # SIGTERM once this step's loss is printed
SIGTERM_STEPS = 60  # max_steps of the interrupted run (never reached)
# Metrics that need a GPU: MFU divides by the GPU's peak FLOP/s.
CPU_ABSENT = {"train_mfu"}

# Everything changed from the template's hyperparameters (size, steps, checkpoint paths).
OVERRIDES: dict[str, Any] = {
    "max_seq_length": 64,
    "per_device_train_batch_size": 2,
    "per_device_eval_batch_size": 4,
    "gradient_accumulation_steps": 1,
    "logging_steps": 1,
    "save_steps": 1000,  # only the SIGTERM writes a checkpoint
    "eval_steps": 2,  # templates that evaluate by steps (their save_steps is a multiple)
    "doc_stride": 16,
}


def _cfg_common(dropout: float) -> dict[str, Any]:
    return dict(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def make_encoder_dir(path: Path, task: str, arch: str, num_labels: int) -> Path:
    """A tiny bert / roberta / distilbert / albert / gpt2 model with the wordpiece tokenizer."""
    import transformers

    path.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer()
    n = len(VOCAB)
    if arch == "bert":
        cfg = transformers.BertConfig(
            vocab_size=n,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            max_position_embeddings=128,
            **_cfg_common(0.1),
        )
    elif arch == "roberta":
        cfg = transformers.RobertaConfig(
            vocab_size=n,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            max_position_embeddings=130,
            pad_token_id=0,
            bos_token_id=VOCAB.index("[CLS]"),
            eos_token_id=VOCAB.index("[SEP]"),
            **_cfg_common(0.1),
        )
    elif arch == "distilbert":
        cfg = transformers.DistilBertConfig(
            vocab_size=n,
            dim=32,
            n_layers=2,
            n_heads=2,
            hidden_dim=37,
            max_position_embeddings=128,
            dropout=0.1,
            attention_dropout=0.1,
            pad_token_id=0,
        )
    elif arch == "albert":
        cfg = transformers.AlbertConfig(
            vocab_size=n,
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            max_position_embeddings=128,
            pad_token_id=0,
            **_cfg_common(0.1),
        )
    elif arch == "gpt2":
        cfg = transformers.GPT2Config(
            vocab_size=n,
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_positions=128,
            bos_token_id=VOCAB.index("[CLS]"),
            eos_token_id=VOCAB.index("[SEP]"),
            pad_token_id=0,
            resid_pdrop=0.1,
            embd_pdrop=0.1,
            attn_pdrop=0.1,
        )
    else:
        raise ValueError(arch)
    if task == "classification":
        cfg.num_labels = num_labels
    auto = {
        "qa": transformers.AutoModelForQuestionAnswering,
        "classification": transformers.AutoModelForSequenceClassification,
        "mlm": transformers.AutoModelForMaskedLM,
        "clm": transformers.AutoModelForCausalLM,
    }[task]
    transformers.set_seed(0)
    auto.from_config(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _two_labels(records: list[dict]) -> list[dict]:
    for r in records:
        r["label"] = r["label"] % 2
    return records


# template -> (architecture, train records, validation records)
DataFn = Callable[[int, int], list[dict]]
CASES: dict[str, tuple[str, DataFn]] = {
    "bert-large-qa": ("bert", lambda n, s: qa_records(n, seed=s, lo=10, hi=40)),
    "roberta-large-mnli-mp": ("roberta", lambda n, s: cls_records(n, seed=s, pair=True)),
    "distilbert-spot": ("distilbert", lambda n, s: _two_labels(cls_records(n, seed=s))),
    "distilbert-chain": ("distilbert", lambda n, s: _two_labels(cls_records(n, seed=s))),
    "distilbert-multilingual-sentiment": (
        "distilbert",
        lambda n, s: cls_records(n, seed=s, stars=True),
    ),
    "albert-mlm-pretrain": ("albert", lambda n, s: lm_records(n, seed=s)),
    "gpt-tp-sharded": ("gpt2", lambda n, s: lm_records(n, seed=s)),
    "llm-sft": ("llama", lambda n, s: _chat(n, s)),
    "llm-lora": ("llama", lambda n, s: _chat(n, s)),
    "llm-sft-fsdp": ("llama", lambda n, s: _chat(n, s)),
    "llm-smp-v2": ("llama", lambda n, s: _chat(n, s)),
}


def _chat(n: int, seed: int) -> list[dict]:
    from llm_testlib import chat_records

    return chat_records(n, seed=seed)


def load_template(name: str) -> dict:
    doc = json.loads(TEMPLATES.read_text())
    for t in doc["templates"]:
        if t["name"] == name:
            return t
    raise SystemExit(f"no shipped template {name!r}")


def build_inputs(tpl: dict, root: Path) -> tuple[dict[str, Path], list[str]]:
    """Channels (and extra argv) for a template: its tiny model, generated train/validation."""
    arch, data = CASES[tpl["name"]]
    hp = tpl["hyperparameters"]
    task = hp["task"]
    if arch == "llama":
        from llm_testlib import make_llama_dir

        model = make_llama_dir(root / "model", dropout=0.1)
    else:
        model = make_encoder_dir(root / "model", task, arch, int(hp.get("num_labels", 3)))
    channels = {"train": write_records(data(48, 0), root / "train", "jsonl")}
    names = {c["name"] for c in tpl["inputs"]}
    if "validation" in names:
        channels["validation"] = write_records(data(8, 1), root / "validation", "jsonl")
    if "model" in names:
        channels["model"] = model
        return channels, []
    return channels, ["--model_name_or_path", str(model)]


def hyperparameters(tpl: dict, ckpt: Path, max_steps: int) -> list[str]:
    hp = dict(tpl["hyperparameters"])
    hp.pop("model_name_or_path", None)
    for k, v in OVERRIDES.items():
        if k in hp or k in ("logging_steps", "save_steps", "per_device_eval_batch_size"):
            hp[k] = v
    if "eval_steps" in hp and hp.get("load_best_model_at_end"):
        hp["save_steps"] = hp["eval_steps"] * 500
    hp["max_steps"] = max_steps
    hp["checkpoint_dir"] = str(ckpt)
    argv: list[str] = []
    for k, v in hp.items():
        argv += [f"--{k}", json.dumps(v) if isinstance(v, bool) else str(v)]
    return argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(tpl: dict, script: Path) -> list[str]:
    if tpl["hyperparameters"].get("fsdp"):
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(_free_port()),
            str(script),
        ]
    return [sys.executable, str(script)]


def _losses(text: str) -> dict[int, float]:
    return {step: float(v) for name, v, step in parse_lines(text) if name == "train_loss"}


class Failure(Exception):
    pass


def check(cond: bool, what: str, err: str = "") -> None:
    if not cond:
        raise Failure(what + ("\n" + err[-4000:] if err else ""))


def run_template(name: str, root: Path, verbose: bool) -> dict[str, Any]:
    tpl = load_template(name)
    root.mkdir(parents=True, exist_ok=True)
    channels, extra = build_inputs(tpl, root)
    ckpt = root / "ckpt"
    env = sm_environ(root, channels, OMP_NUM_THREADS="1", FTL_TEST_STEP_DELAY="0.4")
    out: dict[str, Any] = {"template": name}

    # 1. SIGTERM after step STOP_AFTER
    t0 = time.time()
    argv = hyperparameters(tpl, ckpt, SIGTERM_STEPS) + extra
    proc = subprocess.Popen(
        command(tpl, SLOW_ENTRY) + argv,
        env=env,
        cwd=str(TRAINING_DIR),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    errs: list[str] = []
    seen = threading.Event()

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = re.match(r"ftl_metric name=train_loss value=\S+ step=(\d+)", line)
            if m and int(m.group(1)) >= STOP_AFTER:
                seen.set()

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            errs.append(line)

    readers = [threading.Thread(target=f, daemon=True) for f in (read_out, read_err)]
    for r in readers:
        r.start()
    try:
        while not seen.wait(0.2):
            if proc.poll() is not None:
                break
            check(time.time() - t0 < 600, "no step 2 within 600 s", "".join(errs))
        check(seen.is_set(), f"exited {proc.returncode} before step {STOP_AFTER}", "".join(errs))
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for r in readers:
        r.join(timeout=10)
    err = "".join(errs)
    first = "".join(lines)
    if verbose:
        print(err[-6000:], file=sys.stderr)
    torchrun = len(command(tpl, SLOW_ENTRY)) > 2
    out["sigterm_rc"] = rc
    check("received signal" in err, "the SIGTERM handler did not run", err)
    if not torchrun:
        check(rc == 143, f"SIGTERMed run exited {rc}, not 143", err)
    saved = checkpoints.newest_complete(str(ckpt))
    check(saved is not None, "no complete checkpoint after SIGTERM", err)
    assert saved is not None
    k = checkpoints.step_of(saved)
    assert k is not None
    losses1 = _losses(first)
    check(k == max(losses1), f"checkpoint step {k} is not the last logged {max(losses1)}", err)
    check(all(math.isfinite(v) for v in losses1.values()), f"non-finite loss: {losses1}", err)
    out["checkpoint_step"] = k
    check(
        not any((root / "model_out").glob("*.safetensors")),
        "a SIGTERMed run wrote a final model",
    )

    # 2. resume to the end
    final = k + 3
    env2 = dict(env)
    env2.pop("FTL_TEST_STEP_DELAY")
    argv = hyperparameters(tpl, ckpt, final) + extra
    res = subprocess.run(
        command(tpl, TRAINING_DIR / "train.py") + argv,
        env=env2,
        cwd=str(TRAINING_DIR),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if verbose:
        print(res.stderr[-6000:], file=sys.stderr)
    check(res.returncode == 0, f"resumed run exited {res.returncode}", res.stderr)
    check(f"resuming from {saved}" in res.stderr, "the restart did not resume", res.stderr)
    losses2 = _losses(res.stdout)
    check(
        sorted(losses2) == list(range(k + 1, final + 1)),
        f"resumed steps {sorted(losses2)}, want {k + 1}..{final}",
        res.stderr,
    )
    check(all(math.isfinite(v) for v in losses2.values()), f"non-finite loss: {losses2}")
    out["losses"] = {**losses1, **losses2}

    # 3. the model directory
    model_out = root / "model_out"
    files = sorted(p.name for p in model_out.iterdir()) if model_out.is_dir() else []
    peft = tpl["hyperparameters"].get("peft", "none") != "none"
    weights = ("adapter_model.safetensors",) if peft else ("model.safetensors", "pytorch_model.bin")
    check(any(w in files for w in weights), f"model dir lacks {weights}: {files}")
    check(any(f.startswith("tokenizer") for f in files), f"model dir lacks the tokenizer: {files}")
    out["model_dir"] = files

    # 4. the template's metrics
    printed = {n for n, _v, _s in parse_lines(first + res.stdout)}
    declared = [m if isinstance(m, str) else m["name"] for m in tpl.get("metrics", [])]
    missing = [m for m in declared if m not in printed and m not in CPU_ABSENT]
    check(not missing, f"metrics not printed: {missing} (printed: {sorted(printed)})")
    out["metrics"] = [m for m in declared if m in printed]
    out["metrics_cpu_absent"] = [m for m in declared if m not in printed]
    out["seconds"] = round(time.time() - t0, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("templates", nargs="+", help="template names (jobmodel/shipped_templates.json)")
    ap.add_argument("--workdir", help="keep the runs here (default: a temporary folder)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    import torch
    import transformers

    env = f"python {sys.version.split()[0]} torch {torch.__version__} "
    env += f"transformers {transformers.__version__}"
    failed = 0
    base = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ftl_smoke_"))
    for name in args.templates:
        try:
            out = run_template(name, base / name, args.verbose)
            print(f"PASS {name} [{env}] {json.dumps(out, sort_keys=True)}", flush=True)
        except Failure as exc:
            failed += 1
            print(f"FAIL {name} [{env}] {exc}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
