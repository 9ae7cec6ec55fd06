"""Supervised fine-tuning of a causal LM (``task=sft``): chat or prompt/completion data.

Data (JSON lines or any format ``data.py`` reads), one example per row:

* ``messages``: a list of ``{"role": ..., "content": ...}``; rendered with the tokenizer's
  chat template. With ``completion_only_loss`` (default) only the assistant turns carry
  labels; everything else (system, user, the template's own role headers) is -100.
* ``prompt`` and ``completion``: the prompt, then the completion and EOS. Labels only on
  the completion and EOS.

Each assistant turn ``i`` is located by rendering ``messages[:i]`` with the generation
prompt and ``messages[:i+1]``: the turn is what the second adds after the first (from where
they part when the prompt prefills text the turn does not render, as DeepSeek-R1's
``<think>``). Character spans map to tokens through the offsets; a token with any character
in a turn is labelled (a prompt's final space folded into the first answer token included).
A template that is not prefix-preserving, or whose generation prompt changes the messages
before it, is refused with the property named. The rules agree with TRL's SFT data path
(``completion_only_loss``), which ``tests/training/test_train_sft_labels.py`` checks.

Packing (``packing=true``, default) puts several examples into one row of exactly
``max_seq_length`` tokens (best-fit decreasing). Each example restarts its
``position_ids`` at 0 and the batch carries no ``attention_mask``: transformers then
builds a block-diagonal causal mask (SDPA, eager) or uses variable-length kernels
(FlashAttention-2), so no token attends to another example. The first label of every
example is -100 (it would otherwise be predicted from the previous example's last
token). Without packing, batches are padded dynamically and grouped by length.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Sequence
from typing import Any

import torch

from .hparams import HyperparameterError, Hyperparameters
from .preprocess import LENGTH_COLUMN, TaskData, cached_map, effective_max_length, tokenizer_key

logger = logging.getLogger("ftl_train")

IGNORE = -100


def detect_format(columns: Sequence[str], wanted: str = "auto") -> str:
    cols = set(columns)
    if wanted == "messages" or (wanted == "auto" and "messages" in cols):
        if "messages" not in cols:
            raise HyperparameterError(
                f"dataset_format=messages needs a `messages` column (columns: {sorted(cols)})"
            )
        return "messages"
    if {"prompt", "completion"} <= cols:
        return "prompt_completion"
    raise HyperparameterError(
        "task sft needs a `messages` column (chat) or `prompt` and `completion` columns "
        f"(dataset_format={wanted}; columns: {sorted(cols)})"
    )


def _render(tokenizer: Any, messages: list, generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt
    )


def _template_error(turn: int, prop: str) -> HyperparameterError:
    return HyperparameterError(
        f"completion_only_loss cannot label this chat template: {prop} (assistant turn at "
        f"message {turn} of a conversation). Set completion_only_loss=false to train on every "
        "token, or give the model a chat template without this property"
    )


def assistant_spans(tokenizer: Any, messages: list) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its assistant turns.

    For assistant turn ``i``: ``through`` is ``messages[:i+1]`` rendered, ``prompt`` is
    ``messages[:i]`` rendered with the generation prompt (what inference feeds the model).
    The turn's span ends where ``through`` ends; it starts where ``through`` stops being
    ``prompt``: after the whole generation prompt when the turn renders it, else (a prompt
    that prefills text the turn does not render, such as DeepSeek-R1's ``<think>``) where
    the two part. Refused, naming the property: a template that renders ``through`` other
    than as a prefix of the whole conversation (it rewrites earlier turns once later
    messages follow), or whose generation prompt does not extend ``messages[:i]``.
    """
    text = _render(tokenizer, messages)
    spans = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        through = _render(tokenizer, messages[: i + 1])
        if i:
            before = _render(tokenizer, messages[:i])
            prompt = _render(tokenizer, messages[:i], generation_prompt=True)
        else:  # a conversation that opens with the assistant
            before = prompt = ""
        if not text.startswith(through) or not through.startswith(before):
            raise _template_error(
                i,
                "it is not prefix-preserving: the conversation up to this turn does not render "
                "as a prefix of the whole conversation (the template rewrites earlier turns, "
                "e.g. drops their reasoning, once later messages follow)",
            )
        if not prompt.startswith(before):
            raise _template_error(
                i,
                "its generation prompt does not extend the conversation before it (rendering "
                "with add_generation_prompt=true changes the earlier messages)",
            )
        if through.startswith(prompt):
            start = len(prompt)
        else:
            start = len(os.path.commonprefix([prompt, through]))
        spans.append((start, len(through)))
    return text, spans


def _labels_from_spans(offsets: list, spans: list[tuple[int, int]], ids: list[int]) -> list[int]:
    """Label every token with a character inside an answer span.

    A token that starts before the span but reaches into it (a generation prompt's final
    space folded into the first answer token, ``Ġword`` or ``▁word``) is the answer's first
    token: the model is trained to produce it.
    """
    labels = [IGNORE] * len(ids)
    for k, (a, b) in enumerate(offsets):
        if b > a and any(a < e and b > s for s, e in spans):
            labels[k] = ids[k]
    return labels


def encode_messages(tokenizer: Any, messages: list, completion_only: bool) -> tuple[list, list]:
    if not getattr(tokenizer, "chat_template", None):
        raise HyperparameterError(
            "messages data needs a tokenizer with a chat template (tokenizer_config.json "
            "chat_template); use prompt/completion data for a base model without one"
        )
    if not completion_only:
        ids = list(tokenizer(_render(tokenizer, messages), add_special_tokens=False)["input_ids"])
        return ids, list(ids)
    text, spans = assistant_spans(tokenizer, messages)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    return ids, _labels_from_spans(enc["offset_mapping"], spans, ids)


def encode_prompt_completion(
    tokenizer: Any, prompt: str, completion: str, completion_only: bool
) -> tuple[list, list]:
    p = list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    c = list(tokenizer(completion, add_special_tokens=False)["input_ids"])
    if tokenizer.eos_token_id is not None:
        c.append(tokenizer.eos_token_id)
    ids = p + c
    labels = ([IGNORE] * len(p) if completion_only else list(p)) + list(c)
    return ids, labels


def tokenize_batch(
    tokenizer: Any, fmt: str, max_len: int, completion_only: bool, batch: dict
) -> dict[str, list]:
    """Rows -> input_ids/labels, cut to ``max_len``; rows left without a label are dropped."""
    out: dict[str, list] = {"input_ids": [], "labels": [], LENGTH_COLUMN: []}
    n = len(next(iter(batch.values())))
    for i in range(n):
        if fmt == "messages":
            ids, labels = encode_messages(tokenizer, batch["messages"][i], completion_only)
        else:
            ids, labels = encode_prompt_completion(
                tokenizer, str(batch["prompt"][i]), str(batch["completion"][i]), completion_only
            )
        ids, labels = ids[:max_len], labels[:max_len]
        if len(ids) < 2 or all(x == IGNORE for x in labels[1:]):
            continue
        out["input_ids"].append(ids)
        out["labels"].append(labels)
        out[LENGTH_COLUMN].append(len(ids))
    return out


def pack_bins(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing: indices grouped into bins whose lengths sum to <= capacity.

    Longest first (ties in input order); each goes into the bin with the least space that
    fits it, among equals the one that came to that space first (TRL's ``bfd`` order).
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    free: list[tuple[int, int, int]] = []  # (space left, arrival, bin number), sorted
    bins: list[list[int]] = []
    arrivals = 0
    for i in order:
        need = lengths[i]
        k = bisect.bisect_left(free, (need, -1, -1))
        if k < len(free):
            space, _arrival, b = free.pop(k)
        else:
            space, b = capacity, len(bins)
            bins.append([])
        bins[b].append(i)
        if space - need > 0:
            bisect.insort(free, (space - need, arrivals, b))
            arrivals += 1
    # Bins in the order of their first example, so the data order stays close to the input.
    return sorted(bins, key=min)


def pack_rows(ds: Any, capacity: int, pad_id: int) -> dict[str, list]:
    """Rows of exactly ``capacity`` tokens: examples back to back, then padding."""
    ids_col, labels_col = ds["input_ids"], ds["labels"]
    out: dict[str, list] = {"input_ids": [], "labels": [], "position_ids": [], "num_tokens": []}
    for members in pack_bins(list(ds[LENGTH_COLUMN]), capacity):
        ids: list[int] = []
        labels: list[int] = []
        pos: list[int] = []
        for i in members:
            ids += ids_col[i]
            labels += [IGNORE] + list(labels_col[i][1:])  # no label across the boundary
            pos += list(range(len(ids_col[i])))
        real = len(ids)
        pad = capacity - real
        out["input_ids"].append(ids + [pad_id] * pad)
        out["labels"].append(labels + [IGNORE] * pad)
        out["position_ids"].append(pos + list(range(pad)))
        out["num_tokens"].append(real)
    return out


class SftCollator:
    """Packed rows: stacked as they are (no attention mask). Unpacked: right-padded."""

    def __init__(self, pad_id: int, pad_to_multiple_of: int | None = None):
        self.pad_id = pad_id
        self.multiple = pad_to_multiple_of

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        if "position_ids" in features[0]:
            return {
                k: torch.tensor([f[k] for f in features], dtype=torch.long)
                for k in ("input_ids", "labels", "position_ids")
            }
        longest = max(len(f["input_ids"]) for f in features)
        if self.multiple:
            longest = -(-longest // self.multiple) * self.multiple
        batch: dict[str, list] = {"input_ids": [], "labels": [], "attention_mask": []}
        for f in features:
            pad = longest - len(f["input_ids"])
            batch["input_ids"].append(list(f["input_ids"]) + [self.pad_id] * pad)
            batch["labels"].append(list(f["labels"]) + [IGNORE] * pad)
            batch["attention_mask"].append([1] * len(f["input_ids"]) + [0] * pad)
        return {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}


def prepare_sft(
    hp: Hyperparameters,
    tokenizer: Any,
    config: Any,
    train_raw: Any,
    eval_raw: Any,
    pad_multiple: int | None,
) -> TaskData:
    ref = train_raw if train_raw is not None else eval_raw
    fmt = detect_format(ref.column_names, hp.dataset_format)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    max_len = effective_max_length(hp, tokenizer, config)
    only = hp.completion_only_loss
    key = ["sft", fmt, max_len, only, getattr(tokenizer, "chat_template", None)]
    key.append(tokenizer_key(tokenizer))

    def tokenized(raw: Any, split: str) -> Any:
        if raw is None:
            return None
        ds = cached_map(
            raw,
            lambda b: tokenize_batch(tokenizer, fmt, max_len, only, b),
            key=key + [split],
            remove_columns=raw.column_names,
            desc=f"sft {split}",
        )
        if hp.packing and split == "train" and len(ds):
            packed = pack_rows(ds, max_len, tokenizer.pad_token_id)
            import datasets

            ds = datasets.Dataset.from_dict(packed)
            fill = sum(packed["num_tokens"]) / max(1, len(packed["num_tokens"]) * max_len)
            logger.info(
                "packed into %d rows of %d tokens (%.0f%% filled)", len(ds), max_len, 100 * fill
            )
        return ds

    train, evald = tokenized(train_raw, "train"), tokenized(eval_raw, "eval")
    return TaskData(
        train=train,
        eval=evald,
        collator=SftCollator(tokenizer.pad_token_id, pad_multiple),
        compute_metrics=None,
        lengths_column=None if hp.packing else LENGTH_COLUMN,
        is_lm=True,
    )
