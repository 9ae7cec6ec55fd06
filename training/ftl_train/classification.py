"""Task ``classification``: one text or a sentence pair (``text_pair_column``) with a label;
accuracy and macro F1. Labels may be ints, strings or a ``ClassLabel``; ``label_mapping``
maps raw labels (``stars3`` or a JSON object)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import metrics as M
from .hparams import HyperparameterError, Hyperparameters, parse_label_mapping
from .preprocess import (
    LABEL_COLUMN_GUESSES,
    LENGTH_COLUMN,
    TEXT_COLUMN_GUESSES,
    TaskData,
    effective_max_length,
    map_splits,
    pick_column,
    tokenizer_key,
)


def _mapped_label_space(text: str) -> tuple[Callable[[Any], int], list[str]]:
    mapping, names = parse_label_mapping(text)

    def to_id(v: Any) -> int:
        key = str(v).strip()
        if key not in mapping:
            # 4.0 -> "4" for float-typed star ratings
            try:
                f = float(key)
                if f == int(f) and str(int(f)) in mapping:
                    return mapping[str(int(f))]
            except ValueError:
                pass
            raise ValueError(f"label {v!r} is not in label_mapping ({sorted(mapping)})")
        return mapping[key]

    return to_id, names


def label_space(
    hp: Hyperparameters, train_raw: Any, eval_raw: Any, label_col: str
) -> tuple[Callable[[Any], int], list[str]]:
    """Return (to_id function on raw label values, label names)."""
    if hp.label_mapping is not None:
        return _mapped_label_space(hp.label_mapping)

    feature = train_raw.features.get(label_col) if train_raw is not None else None
    names = getattr(feature, "names", None)
    if names:
        return (lambda v: int(v)), list(names)

    values = list(train_raw.unique(label_col)) if train_raw is not None else []
    if eval_raw is not None:
        values += [v for v in eval_raw.unique(label_col) if v not in values]
    values = [v for v in values if v is not None and not (isinstance(v, (int, float)) and v < 0)]
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        n = hp.num_labels or (max(values) + 1 if values else 2)
        return (lambda v: int(v)), [str(i) for i in range(n)]
    # strings (or mixed): sorted for a stable id assignment across restarts and nodes
    labels = sorted({str(v) for v in values})
    index = {v: i for i, v in enumerate(labels)}
    return (lambda v: index[str(v)]), labels


def _columns(hp: Hyperparameters, ref: Any) -> tuple[str, str | None, str]:
    """The text, pair (or None) and label columns: named by hyperparameters, else guessed."""
    text_col = pick_column(ref, hp.text_column, TEXT_COLUMN_GUESSES, "text", "text_column")
    pair_col = None
    if hp.text_pair_column is not None:
        pair_col = pick_column(ref, hp.text_pair_column, (), "second text", "text_pair_column")
    elif text_col == "premise" and "hypothesis" in ref.column_names:
        pair_col = "hypothesis"
    elif text_col == "sentence1" and "sentence2" in ref.column_names:
        pair_col = "sentence2"
    label_col = pick_column(ref, hp.label_column, LABEL_COLUMN_GUESSES, "label", "label_column")
    return text_col, pair_col, label_col


def labelled(v: Any) -> bool:
    """Whether a row carries a label (MNLI-style test splits mark missing labels with -1)."""
    return v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0)


def classification_features(
    tokenizer: Any,
    examples: Any,
    *,
    text_col: str,
    pair_col: str | None,
    label_col: str,
    to_id: Callable[[Any], int],
    num_labels: int,
    max_len: int,
    padding: Any,
) -> Any:
    """A batch tokenized with label ids; unlabelled rows are dropped (a batched map may
    return fewer rows)."""
    rows = [i for i, v in enumerate(examples[label_col]) if labelled(v)]
    column = examples[text_col]
    texts = [str(column[i]) if column[i] is not None else "" for i in rows]
    pairs = None
    if pair_col:
        column = examples[pair_col]
        pairs = [str(column[i]) if column[i] is not None else "" for i in rows]
    enc = tokenizer(texts, pairs, truncation=True, max_length=max_len, padding=padding)
    raw_labels = examples[label_col]
    labels = [to_id(raw_labels[i]) for i in rows]
    bad = [lab for lab in labels if not 0 <= lab < num_labels]
    if bad:
        raise ValueError(f"label id {bad[0]} is outside 0..{num_labels - 1}")
    enc["labels"] = labels
    enc[LENGTH_COLUMN] = [int(sum(m)) for m in enc["attention_mask"]]
    return enc


def prepare_classification(
    hp: Hyperparameters,
    tokenizer: Any,
    config: Any,
    train_raw: Any,
    eval_raw: Any,
    pad_multiple: int | None,
) -> TaskData:
    from transformers import DataCollatorWithPadding, default_data_collator

    ref = train_raw if train_raw is not None else eval_raw
    text_col, pair_col, label_col = _columns(hp, ref)
    to_id, names = label_space(hp, train_raw, eval_raw, label_col)
    num_labels = hp.num_labels or len(names)
    if num_labels < len(names):
        raise HyperparameterError(f"num_labels={num_labels} but the data has {len(names)} labels")
    if len(names) < num_labels:
        names = names + [str(i) for i in range(len(names), num_labels)]

    max_len = effective_max_length(hp, tokenizer, config)
    padding = "max_length" if hp.pad_to_max_length else False
    tokenize = functools.partial(
        classification_features,
        tokenizer,
        text_col=text_col,
        pair_col=pair_col,
        label_col=label_col,
        to_id=to_id,
        num_labels=num_labels,
        max_len=max_len,
        padding=padding,
    )
    key = [
        "cls",
        text_col,
        pair_col,
        label_col,
        max_len,
        padding,
        hp.label_mapping,
        num_labels,
        tokenizer_key(tokenizer),
    ]
    out = map_splits(train_raw, eval_raw, tokenize, key=key, desc="classification {}")

    collator = (
        default_data_collator
        if hp.pad_to_max_length
        else DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_multiple)
    )
    id2label = {i: n for i, n in enumerate(names)}
    return TaskData(
        train=out[0],
        eval=out[1],
        collator=collator,
        compute_metrics=lambda p: M.classification_metrics(p.predictions, p.label_ids),
        model_kwargs={
            "num_labels": num_labels,
            "id2label": id2label,
            "label2id": {n: i for i, n in id2label.items()},
            # A checkpoint fine-tuned on another label set gets a fresh head instead of an error.
            "ignore_mismatched_sizes": True,
        },
        lengths_column=LENGTH_COLUMN,
    )
