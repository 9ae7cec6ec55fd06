"""Task ``qa``: extractive question answering on SQuAD-style columns.

Columns ``id``, ``question``, ``context``, ``answers`` (``{"text": [...], "answer_start":
[...]}``). Long contexts are split into overlapping windows (``doc_stride``); predictions
are mapped back to text through the offsets and scored with exact match and F1. Examples
without an answer (SQuAD 2.0 style) are supported: the window's [CLS] position is the target.
"""

from __future__ import annotations

import collections
import functools
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from . import metrics as M
from .hparams import HyperparameterError, Hyperparameters
from .preprocess import LENGTH_COLUMN, TaskData, cached_map, effective_max_length, tokenizer_key

QA_COLUMNS = ("question", "context", "answers")


def answers_of(raw: Any) -> tuple[list[str], list[int]]:
    """An ``answers`` cell (dict, list of dicts or their JSON) as (texts, start characters)."""
    if isinstance(raw, str):
        raw = json.loads(raw)
    if raw is None:
        return [], []
    if isinstance(raw, dict):
        texts = raw.get("text") or []
        starts = raw.get("answer_start") or []
        if isinstance(texts, str):
            texts, starts = [texts], [starts]
        return list(texts), [int(s) for s in starts]
    if isinstance(raw, list):  # [{"text": ..., "answer_start": ...}, ...]
        return [a["text"] for a in raw], [int(a["answer_start"]) for a in raw]
    raise ValueError(f"cannot read answers {raw!r}")


def _check_columns(tokenizer: Any, train_raw: Any, eval_raw: Any) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise HyperparameterError("task qa needs a fast tokenizer (offset mapping)")
    for ds, name in ((train_raw, "train"), (eval_raw, "validation")):
        if ds is not None:
            missing = [c for c in QA_COLUMNS if c not in ds.column_names]
            if missing:
                raise HyperparameterError(
                    f"task qa: the {name} data lacks column(s) {missing}; "
                    f"columns: {ds.column_names}"
                )


def _answer_tokens(
    offsets: list, seq_ids: list, context_index: int, answers: Any, cls_index: int
) -> tuple[int, int]:
    """The window's start and end token of the first answer; [CLS] when the window lacks it."""
    texts, answer_starts = answers_of(answers)
    if not texts:
        return cls_index, cls_index
    start_char = answer_starts[0]
    end_char = start_char + len(texts[0])
    tok_start = 0
    while seq_ids[tok_start] != context_index:
        tok_start += 1
    tok_end = len(offsets) - 1
    while seq_ids[tok_end] != context_index:
        tok_end -= 1
    if not (offsets[tok_start][0] <= start_char and offsets[tok_end][1] >= end_char):
        return cls_index, cls_index
    while (
        tok_start < len(offsets)
        and offsets[tok_start][0] <= start_char
        and seq_ids[tok_start] == context_index
    ):
        tok_start += 1
    while offsets[tok_end][1] >= end_char and seq_ids[tok_end] == context_index:
        tok_end -= 1
    return tok_start - 1, tok_end + 1


def qa_features(
    tokenizer: Any,
    examples: Any,
    *,
    max_len: int,
    stride: int,
    padding: Any,
    keep_offsets: bool,
) -> Any:
    """A batch of examples as model windows with answer positions (and, for evaluation,
    each window's example id and context offsets)."""
    pad_on_right = tokenizer.padding_side == "right"
    questions = [q.lstrip() for q in examples["question"]]
    contexts = examples["context"]
    enc = tokenizer(
        questions if pad_on_right else contexts,
        contexts if pad_on_right else questions,
        truncation="only_second" if pad_on_right else "only_first",
        max_length=max_len,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=padding,
    )
    sample_map = enc.pop("overflow_to_sample_mapping")
    context_index = 1 if pad_on_right else 0
    starts, ends, example_ids, kept_offsets, lengths = [], [], [], [], []
    for i, offsets in enumerate(enc["offset_mapping"]):
        input_ids = enc["input_ids"][i]
        cls_index = (
            input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
        )
        seq_ids = enc.sequence_ids(i)
        sample = sample_map[i]
        start, end = _answer_tokens(
            offsets, seq_ids, context_index, examples["answers"][sample], cls_index
        )
        starts.append(start)
        ends.append(end)
        lengths.append(int(sum(enc["attention_mask"][i])))
        if keep_offsets:
            example_ids.append(str(examples["id"][sample]) if "id" in examples else str(sample))
            kept_offsets.append(
                [o if seq_ids[k] == context_index else None for k, o in enumerate(offsets)]
            )
    enc["start_positions"] = starts
    enc["end_positions"] = ends
    enc[LENGTH_COLUMN] = lengths
    if keep_offsets:
        enc["example_id"] = example_ids
        enc["offset_mapping"] = kept_offsets
    else:
        enc.pop("offset_mapping")
    return enc


def _evaluation(
    hp: Hyperparameters, eval_raw: Any, features: Callable, key: list
) -> tuple[Any, Callable[[Any], dict[str, float]]]:
    """The eval windows the model sees, and the metrics function that maps its predictions
    back to answer text (offsets and ids stay with the post-processing)."""
    if "id" not in eval_raw.column_names:
        eval_raw = eval_raw.add_column("id", [str(i) for i in range(len(eval_raw))])
    eval_with_offsets = cached_map(
        eval_raw,
        functools.partial(features, keep_offsets=True),
        key=key + ["eval"],
        remove_columns=eval_raw.column_names,
        desc="qa eval features",
    )
    eval_features = eval_with_offsets.remove_columns(["example_id", "offset_mapping"])
    ids = [str(i) for i in eval_raw["id"]]
    references = {
        ex_id: answers_of(ans)[0]
        for ex_id, ans in zip(ids, list(eval_raw["answers"]))  # noqa: B905 (py39 images)
    }
    contexts = dict(zip(ids, list(eval_raw["context"])))  # noqa: B905 (py39 images)
    feature_ids = list(eval_with_offsets["example_id"])
    feature_offsets = list(eval_with_offsets["offset_mapping"])
    with_null = any(len(v) == 0 for v in references.values())

    def compute_metrics(eval_pred: Any) -> dict[str, float]:
        preds = eval_pred.predictions
        start_logits, end_logits = preds[0], preds[1]
        texts = postprocess_qa(
            start_logits,
            end_logits,
            feature_ids,
            feature_offsets,
            contexts,
            n_best=hp.n_best_size,
            max_answer_length=hp.max_answer_length,
            allow_null=with_null,
        )
        return M.squad_metrics(texts, references, version_2=with_null)

    return eval_features, compute_metrics


def prepare_qa(
    hp: Hyperparameters,
    tokenizer: Any,
    config: Any,
    train_raw: Any,
    eval_raw: Any,
    pad_multiple: int | None,
) -> TaskData:
    from transformers import DataCollatorWithPadding, default_data_collator

    _check_columns(tokenizer, train_raw, eval_raw)
    max_len = effective_max_length(hp, tokenizer, config)
    stride = min(hp.doc_stride, max_len // 2)
    padding = "max_length" if hp.pad_to_max_length else False
    features = functools.partial(
        qa_features, tokenizer, max_len=max_len, stride=stride, padding=padding
    )
    key = ["qa", max_len, stride, padding, tokenizer_key(tokenizer)]
    train = None
    if train_raw is not None:
        train = cached_map(
            train_raw,
            functools.partial(features, keep_offsets=False),
            key=key + ["train"],
            remove_columns=train_raw.column_names,
            desc="qa train features",
        )
    eval_features = compute_metrics = None
    if eval_raw is not None:
        eval_features, compute_metrics = _evaluation(hp, eval_raw, features, key)
    collator = (
        default_data_collator
        if hp.pad_to_max_length
        else DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_multiple)
    )
    return TaskData(
        train=train,
        eval=eval_features,
        collator=collator,
        compute_metrics=compute_metrics,
        label_names=["start_positions", "end_positions"],
        lengths_column=LENGTH_COLUMN,
    )


def postprocess_qa(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    feature_example_ids: list[str],
    feature_offsets: list[list],
    contexts: dict[str, str],
    n_best: int = 20,
    max_answer_length: int = 30,
    allow_null: bool = False,
) -> dict[str, str]:
    """Best answer text per example from the windows' start/end logits.

    Candidates: the ``n_best`` highest start and end logits of every window, pairs inside
    the context with end >= start and at most ``max_answer_length`` tokens; the ``n_best``
    best scores (start + end logit) are kept. Without ``allow_null`` the best one is the
    answer. With it (SQuAD 2.0) the null answer (the lowest [CLS] score over the windows)
    competes among them; the answer is the best candidate whose text is not empty (a span
    of zero-width offsets, such as a bare-space token, has none), unless the null score is
    higher, then it is "". The rules of Hugging Face's ``postprocess_qa_predictions``.
    """
    by_example: dict[str, list[int]] = collections.defaultdict(list)
    for i, ex_id in enumerate(feature_example_ids):
        by_example[ex_id].append(i)
    answers: dict[str, str] = {}
    for ex_id, feats in by_example.items():
        context = contexts[ex_id]
        candidates: list[tuple[float, str]] = []
        null_score = np.inf
        for fi in feats:
            offsets = feature_offsets[fi]
            n = len(offsets)
            s_log = np.asarray(start_logits[fi][:n], dtype=np.float64)
            e_log = np.asarray(end_logits[fi][:n], dtype=np.float64)
            null_score = min(null_score, float(s_log[0] + e_log[0]))
            s_idx = np.argsort(s_log)[::-1][:n_best]
            e_idx = np.argsort(e_log)[::-1][:n_best]
            for s in s_idx:
                if offsets[s] is None:
                    continue
                for e in e_idx:
                    if offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                        continue
                    text = context[offsets[s][0] : offsets[e][1]]
                    candidates.append((float(s_log[s] + e_log[e]), text))
        if allow_null:
            candidates.append((null_score, ""))
        candidates.sort(key=lambda c: c[0], reverse=True)  # stable: ties keep their order
        kept = candidates[:n_best]
        if not allow_null:
            answers[ex_id] = kept[0][1] if kept else ""
            continue
        best = next((c for c in kept if c[1]), None)
        answers[ex_id] = "" if best is None or null_score > best[0] else best[1]
    return answers
