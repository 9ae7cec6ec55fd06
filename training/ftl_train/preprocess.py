"""What every task's data preparation shares: the prepared data's shape, sequence limits,
column guessing and ``Dataset.map`` with a cache keyed on its inputs."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .hparams import HyperparameterError, Hyperparameters

logger = logging.getLogger("ftl_train")

DEFAULT_MAX_SEQ_LENGTH = {"qa": 384, "classification": 256, "mlm": 512, "clm": 512, "sft": 2048}
DEFAULT_BEST_METRIC = {
    "qa": "f1",
    "classification": "f1",
    "mlm": "loss",
    "clm": "loss",
    "sft": "loss",
}
TEXT_COLUMN_GUESSES = (
    "text",
    "sentence",
    "review_body",
    "content",
    "premise",
    "sentence1",
    "question",
)
LABEL_COLUMN_GUESSES = ("label", "labels", "stars", "target", "class")
LENGTH_COLUMN = "length"


@dataclass
class TaskData:
    train: Any
    eval: Any | None
    collator: Callable | None
    compute_metrics: Callable | None
    model_kwargs: dict = field(default_factory=dict)
    label_names: list[str] | None = None
    lengths_column: str | None = None  # column with per-example token counts, for length grouping
    is_lm: bool = False


def effective_max_length(hp: Hyperparameters, tokenizer: Any, config: Any) -> int:
    wanted = hp.max_seq_length or DEFAULT_MAX_SEQ_LENGTH[hp.task]
    limits = []
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < 1_000_000:
        limits.append(model_max)
    for attr in ("max_position_embeddings", "n_positions"):
        v = getattr(config, attr, None)
        if isinstance(v, int) and v > 0:
            # RoBERTa-style models reserve two positions for the padding offset.
            limits.append(
                v - 2
                if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert")
                else v
            )
            break
    limit = min(limits) if limits else wanted
    if wanted > limit:
        if hp.max_seq_length is not None:
            logger.warning(
                "max_seq_length=%d is longer than the model allows; using %d", wanted, limit
            )
        wanted = limit
    return wanted


_CACHE_DIR: str | None = None


def configure_cache(path: str | None) -> None:
    """Where tokenized datasets are cached (FTL_CACHE_DIR; default <tmp>/ftl_cache)."""
    global _CACHE_DIR
    _CACHE_DIR = path


def cache_dir() -> str:
    path = (
        _CACHE_DIR
        or os.environ.get("FTL_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "ftl_cache")
    )
    os.makedirs(path, exist_ok=True)
    return path


def cached_map(
    ds: Any, fn: Callable, *, key: list, remove_columns: list[str], desc: str, batched: bool = True
) -> Any:
    """``Dataset.map`` with a cache file in a writable folder keyed on the inputs.

    Keying the cache file lets the other processes of a node reuse what the node's main
    process computed (``main_process_first``), and works when the channel is read-only.
    """
    from datasets.fingerprint import Hasher

    fingerprint = Hasher.hash([getattr(ds, "_fingerprint", None), key])
    num_proc = None
    if len(ds) >= 20_000:
        num_proc = max(
            1, min(8, (os.cpu_count() or 1) // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
        )
        if num_proc == 1:
            num_proc = None
    return ds.map(
        fn,
        batched=batched,
        remove_columns=remove_columns,
        desc=desc,
        num_proc=num_proc,
        cache_file_name=os.path.join(cache_dir(), f"{desc.replace(' ', '_')}-{fingerprint}.arrow"),
        new_fingerprint=fingerprint,
    )


def map_splits(train_raw: Any, eval_raw: Any, fn: Callable, *, key: list, desc: str) -> list:
    """``cached_map`` over the train and eval splits (either may be absent); ``desc`` has a
    ``{}`` for the split name."""
    return [
        None
        if raw is None
        else cached_map(
            raw, fn, key=key + [split], remove_columns=raw.column_names, desc=desc.format(split)
        )
        for raw, split in ((train_raw, "train"), (eval_raw, "eval"))
    ]


def limit_raw(ds: Any, n: int | None) -> Any:
    """The first ``n`` rows of ``ds`` (all of them when ``n`` is None)."""
    if ds is None or n is None or len(ds) <= n:
        return ds
    return ds.select(range(n))


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A hash of what the tokenizer does: a fast tokenizer's whole backend state
    (``tokenizer.json``: vocabulary, merges, added tokens, normalizer, pre-tokenizer,
    post-processor), else the vocabulary and added tokens; plus the special tokens."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    h = hashlib.sha256()
    if backend is not None:
        h.update(backend.to_str().encode("utf-8"))
    else:
        vocab = sorted(tokenizer.get_vocab().items())
        h.update(json.dumps(vocab, ensure_ascii=False).encode("utf-8"))
        h.update(repr(sorted(tokenizer.get_added_vocab().items())).encode("utf-8"))
    specials = getattr(tokenizer, "special_tokens_map", {}) or {}
    h.update(json.dumps(specials, sort_keys=True, default=str).encode("utf-8"))
    return h.hexdigest()


def tokenizer_key(tokenizer: Any) -> list:
    """What identifies a tokenizer in a cache key: its class, path, size, padding side and
    a fingerprint of its vocabulary (two tokenizers alike in all else differ there)."""
    return [
        type(tokenizer).__name__,
        getattr(tokenizer, "name_or_path", ""),
        len(tokenizer),
        tokenizer.padding_side,
        tokenizer_fingerprint(tokenizer),
    ]


def pick_column(
    ds: Any, wanted: str | None, guesses: tuple[str, ...], what: str, hp_name: str
) -> str:
    """The column ``hp_name`` names, else the first of ``guesses`` the data has."""
    if wanted is not None:
        if wanted not in ds.column_names:
            raise HyperparameterError(
                f"{hp_name}={wanted!r} is not a column of the data (columns: {ds.column_names})"
            )
        return wanted
    for g in guesses:
        if g in ds.column_names:
            return g
    raise HyperparameterError(
        f"cannot tell which column holds the {what}; set {hp_name} (columns: {ds.column_names})"
    )
