"""Helpers for the training entrypoint tests: tiny models, a tiny tokenizer, generated data.

Everything is built offline: no model, tokenizer or dataset is downloaded.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINING_DIR = REPO / "training"
if str(TRAINING_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINING_DIR))

# Keep the datasets library's own cache out of the home folder.
if "HF_DATASETS_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _HF_CACHE = tempfile.mkdtemp(prefix="ftl_test_hf_")
    os.environ["HF_DATASETS_CACHE"] = _HF_CACHE
    atexit.register(shutil.rmtree, _HF_CACHE, True)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

# docs/DECISIONS.md: the template metric definition for a metric `name`.
VALUE_RE = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def metric_regex(name: str) -> str:
    return f"ftl_metric name={name} value={VALUE_RE}"


def metric_values(text: str, name: str) -> list[float]:
    return [float(v) for v in re.findall(metric_regex(name), text)]


LINE_RE = re.compile(r"^ftl_metric name=([a-z0-9_]+) value=(\S+) step=(\d+)$")

WORDS = [f"w{i}" for i in range(120)]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = SPECIAL + WORDS + list("abcdefghijklmnopqrstuvwxyz0123456789") + [".", ",", "?", "!"]


def wordpiece_tokenizer(vocab: list[str], model_max_length: int = 512):
    """A BERT-style fast tokenizer over `vocab`, built offline with the tokenizers library
    (works with transformers 4.x and 5.x alike)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    ids = {t: i for i, t in enumerate(vocab)}
    tk = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.decoder = decoders.WordPiece(prefix="##")
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tk,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
    )


def make_tokenizer():
    return wordpiece_tokenizer(VOCAB)


def make_model_dir(path: Path, task: str, arch: str = "bert", dropout: float = 0.0) -> Path:
    """Save a tiny random model + tokenizer into `path` (a model_name_or_path or model channel)."""
    import transformers

    path.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer()
    if arch == "bert":
        cfg = transformers.BertConfig(
            vocab_size=len(VOCAB),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            max_position_embeddings=128,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
        )
    elif arch == "albert":
        cfg = transformers.AlbertConfig(
            vocab_size=len(VOCAB),
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            max_position_embeddings=128,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
            pad_token_id=0,
        )
    elif arch == "gpt2":
        cfg = transformers.GPT2Config(
            vocab_size=len(VOCAB),
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_positions=128,
            bos_token_id=VOCAB.index("[CLS]"),
            eos_token_id=VOCAB.index("[SEP]"),
            pad_token_id=0,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
        )
    else:
        raise ValueError(arch)
    if task == "classification":
        cfg.num_labels = 3
    auto = {
        "qa": transformers.AutoModelForQuestionAnswering,
        "classification": transformers.AutoModelForSequenceClassification,
        "mlm": transformers.AutoModelForMaskedLM,
        "clm": transformers.AutoModelForCausalLM,
    }[task]
    transformers.set_seed(0)
    model = auto.from_config(cfg)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


# ---------------------------------------------------------------- generated data


def _sentence(rng: random.Random, lo: int, hi: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]


def qa_records(n: int, seed: int = 0, lo: int = 20, hi: int = 90) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = _sentence(rng, lo, hi)
        a = rng.randrange(len(words) - 2)
        span = words[a : a + rng.randint(1, 2)]
        answer = " ".join(span)
        start = len(" ".join(words[:a])) + (1 if a else 0)
        context = " ".join(words)
        assert context[start : start + len(answer)] == answer
        question = " ".join(_sentence(rng, 3, 6) + span[:1]) + " ?"
        out.append(
            {
                "id": f"q{seed}-{i}",
                "question": question,
                "context": context,
                "answers": {"text": [answer], "answer_start": [start]},
            }
        )
    return out


def cls_records(
    n: int, seed: int = 0, pair: bool = False, stars: bool = False, string_labels: bool = False
) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if stars:
            label = rng.randint(1, 5)
            cue = {1: "w1", 2: "w2", 3: "w3", 4: "w4", 5: "w5"}[label]
        else:
            label = rng.randint(0, 2)
            cue = f"w{label + 1}"
        words = _sentence(rng, 4, 40)
        words.insert(rng.randrange(len(words)), cue)
        rec = {"text": " ".join(words)}
        if pair:
            rec = {"premise": " ".join(_sentence(rng, 4, 20)), "hypothesis": " ".join(words)}
        if stars:
            rec = {"review_body": rec["text"], "stars": label}
        else:
            rec["label"] = (
                ["entailment", "neutral", "contradiction"][label] if string_labels else label
            )
        out.append(rec)
    return out


def lm_records(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [{"text": " ".join(_sentence(rng, 5, 60)) + " ."} for _ in range(n)]


def write_records(records: list[dict], folder: Path, fmt: str) -> Path:
    """Write records as one of the channel formats: jsonl, csv, parquet, save_to_disk."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with open(folder / "part-0000.jsonl", "w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")
        return folder
    import datasets

    ds = datasets.Dataset.from_list(records)
    if fmt == "csv":
        ds.to_csv(str(folder / "data.csv"), index=False)
    elif fmt == "parquet":
        ds.to_parquet(str(folder / "data.parquet"))
    elif fmt == "save_to_disk":
        ds.save_to_disk(str(folder))
    else:
        raise ValueError(fmt)
    return folder


def sm_environ(tmp: Path, channels: dict[str, Path], **extra: str) -> dict[str, str]:
    """An environment like the SageMaker toolkit's, rooted in `tmp`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    env.update(
        {
            "SM_MODEL_DIR": str(tmp / "model_out"),
            "SM_OUTPUT_DATA_DIR": str(tmp / "output_data"),
            "SM_NUM_GPUS": "0",
            "SM_HOSTS": json.dumps(["algo-1"]),
            "SM_CURRENT_HOST": "algo-1",
            "FTL_CACHE_DIR": str(tmp / "cache"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    for name, path in channels.items():
        env[f"SM_CHANNEL_{name.upper()}"] = str(path)
    env.update(extra)
    return env


def parse_lines(text: str) -> list[tuple[str, str, int]]:
    out = []
    for line in text.splitlines():
        m = LINE_RE.match(line.strip())
        if m:
            out.append((m.group(1), m.group(2), int(m.group(3))))
    return out


ENTRYPOINT = TRAINING_DIR / "train.py"
SLOW_ENTRY = Path(__file__).resolve().parent / "slow_entry.py"


def run_entry(argv: list[str], env: dict[str, str], slow: bool = False, timeout: float = 120):
    """Run the shipped entrypoint (`python train.py ...`) in a subprocess, as the toolkit does."""
    import subprocess

    script = SLOW_ENTRY if slow else ENTRYPOINT
    return subprocess.run(
        [sys.executable, str(script), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(TRAINING_DIR),
    )
