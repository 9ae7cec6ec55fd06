"""Task definitions: preprocessing, model class, collator and metrics for each task.

* ``qa``: extractive question answering on SQuAD-style columns ``id``, ``question``,
  ``context``, ``answers`` (``{"text": [...], "answer_start": [...]}``). Long contexts
  are split into overlapping windows (``doc_stride``); predictions are mapped back to
  text through the offsets and scored with exact match and F1. Examples without an
  answer (SQuAD 2.0 style) are supported: the window's [CLS] position is the target.
* ``classification``: one text or a sentence pair (``text_pair_column``) with a label;
  accuracy and macro F1.
* ``mlm``: masked-LM pretraining (BERT/ALBERT style), texts concatenated and cut into
  blocks of ``max_seq_length``; eval loss and perplexity.
* ``clm``: causal LM, same blocks; eval loss and perplexity.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import metrics as M
from .hparams import HyperparameterError, Hyperparameters, parse_label_mapping

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


# ---------------------------------------------------------------- helpers


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


def _map(
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


def _map_splits(train_raw: Any, eval_raw: Any, fn: Callable, *, key: list, desc: str) -> list:
    """``_map`` over the train and eval splits (either may be absent); ``desc`` has a ``{}``
    for the split name."""
    return [
        None
        if raw is None
        else _map(
            raw, fn, key=key + [split], remove_columns=raw.column_names, desc=desc.format(split)
        )
        for raw, split in ((train_raw, "train"), (eval_raw, "eval"))
    ]


def _limit(ds: Any, n: int | None) -> Any:
    if ds is None or n is None or len(ds) <= n:
        return ds
    return ds.select(range(n))


def _tokenizer_key(tokenizer: Any) -> list:
    return [
        type(tokenizer).__name__,
        getattr(tokenizer, "name_or_path", ""),
        len(tokenizer),
        tokenizer.padding_side,
    ]


def _pick_column(
    ds: Any, wanted: str | None, guesses: tuple[str, ...], what: str, hp_name: str
) -> str:
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


# ---------------------------------------------------------------- question answering


QA_COLUMNS = ("question", "context", "answers")


def _answers_of(raw: Any) -> tuple[list[str], list[int]]:
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


def prepare_qa(
    hp: Hyperparameters,
    tokenizer: Any,
    config: Any,
    train_raw: Any,
    eval_raw: Any,
    pad_multiple: int | None,
) -> TaskData:
    from transformers import DataCollatorWithPadding, default_data_collator

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

    max_len = effective_max_length(hp, tokenizer, config)
    stride = min(hp.doc_stride, max_len // 2)
    pad_on_right = tokenizer.padding_side == "right"
    padding = "max_length" if hp.pad_to_max_length else False

    def tokenize(examples: Any, keep_offsets: bool) -> Any:
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
        offsets_all = enc["offset_mapping"]
        context_index = 1 if pad_on_right else 0
        starts, ends, example_ids, kept_offsets, lengths = [], [], [], [], []
        for i, offsets in enumerate(offsets_all):
            input_ids = enc["input_ids"][i]
            cls_index = (
                input_ids.index(tokenizer.cls_token_id)
                if tokenizer.cls_token_id in input_ids
                else 0
            )
            seq_ids = enc.sequence_ids(i)
            sample = sample_map[i]
            texts, answer_starts = _answers_of(examples["answers"][sample])
            if not texts:
                starts.append(cls_index)
                ends.append(cls_index)
            else:
                start_char = answer_starts[0]
                end_char = start_char + len(texts[0])
                tok_start = 0
                while seq_ids[tok_start] != context_index:
                    tok_start += 1
                tok_end = len(input_ids) - 1
                while seq_ids[tok_end] != context_index:
                    tok_end -= 1
                if not (offsets[tok_start][0] <= start_char and offsets[tok_end][1] >= end_char):
                    starts.append(cls_index)
                    ends.append(cls_index)
                else:
                    while (
                        tok_start < len(offsets)
                        and offsets[tok_start][0] <= start_char
                        and seq_ids[tok_start] == context_index
                    ):
                        tok_start += 1
                    starts.append(tok_start - 1)
                    while offsets[tok_end][1] >= end_char and seq_ids[tok_end] == context_index:
                        tok_end -= 1
                    ends.append(tok_end + 1)
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

    key = ["qa", max_len, stride, padding, _tokenizer_key(tokenizer)]
    train = None
    if train_raw is not None:
        train = _map(
            train_raw,
            lambda ex: tokenize(ex, False),
            key=key + ["train"],
            remove_columns=train_raw.column_names,
            desc="qa train features",
        )

    eval_features = compute_metrics = None
    if eval_raw is not None:
        if "id" not in eval_raw.column_names:
            eval_raw = eval_raw.add_column("id", [str(i) for i in range(len(eval_raw))])
        eval_with_offsets = _map(
            eval_raw,
            lambda ex: tokenize(ex, True),
            key=key + ["eval"],
            remove_columns=eval_raw.column_names,
            desc="qa eval features",
        )
        # What the model sees; offsets and ids stay with the post-processing.
        eval_features = eval_with_offsets.remove_columns(["example_id", "offset_mapping"])
        ids = [str(i) for i in eval_raw["id"]]
        references = {
            ex_id: _answers_of(ans)[0]
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
            return M.squad_metrics(texts, references)

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
    """Best answer text per example from the windows' start/end logits."""
    by_example: dict[str, list[int]] = collections.defaultdict(list)
    for i, ex_id in enumerate(feature_example_ids):
        by_example[ex_id].append(i)
    answers: dict[str, str] = {}
    for ex_id, feats in by_example.items():
        context = contexts[ex_id]
        best_score, best_text = -np.inf, ""
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
                    score = float(s_log[s] + e_log[e])
                    if score > best_score:
                        best_score = score
                        best_text = context[offsets[s][0] : offsets[e][1]]
        if allow_null and null_score > best_score:
            best_text = ""
        answers[ex_id] = best_text
    return answers


# ---------------------------------------------------------------- classification


def _label_space(
    hp: Hyperparameters, train_raw: Any, eval_raw: Any, label_col: str
) -> tuple[Callable[[Any], int], list[str]]:
    """Return (to_id function on raw label values, label names)."""
    if hp.label_mapping is not None:
        mapping, names = parse_label_mapping(hp.label_mapping)

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
    text_col = _pick_column(ref, hp.text_column, TEXT_COLUMN_GUESSES, "text", "text_column")
    pair_col = None
    if hp.text_pair_column is not None:
        pair_col = _pick_column(ref, hp.text_pair_column, (), "second text", "text_pair_column")
    elif text_col == "premise" and "hypothesis" in ref.column_names:
        pair_col = "hypothesis"
    elif text_col == "sentence1" and "sentence2" in ref.column_names:
        pair_col = "sentence2"
    label_col = _pick_column(ref, hp.label_column, LABEL_COLUMN_GUESSES, "label", "label_column")
    to_id, names = _label_space(hp, train_raw, eval_raw, label_col)
    num_labels = hp.num_labels or len(names)
    if num_labels < len(names):
        raise HyperparameterError(f"num_labels={num_labels} but the data has {len(names)} labels")
    if len(names) < num_labels:
        names = names + [str(i) for i in range(len(names), num_labels)]

    max_len = effective_max_length(hp, tokenizer, config)
    padding = "max_length" if hp.pad_to_max_length else False

    def labelled(v: Any) -> bool:
        # MNLI-style test splits mark missing labels with -1
        return v is not None and not (
            isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0
        )

    def tokenize(examples: Any) -> Any:
        # Unlabelled rows are dropped here (a batched map may return fewer rows).
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

    key = [
        "cls",
        text_col,
        pair_col,
        label_col,
        max_len,
        padding,
        hp.label_mapping,
        num_labels,
        _tokenizer_key(tokenizer),
    ]
    out = _map_splits(train_raw, eval_raw, tokenize, key=key, desc="classification {}")

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


# ---------------------------------------------------------------- language modelling


def prepare_lm(
    hp: Hyperparameters,
    tokenizer: Any,
    config: Any,
    train_raw: Any,
    eval_raw: Any,
    pad_multiple: int | None,
) -> TaskData:
    from transformers import DataCollatorForLanguageModeling

    ref = train_raw if train_raw is not None else eval_raw
    text_col = _pick_column(ref, hp.text_column, TEXT_COLUMN_GUESSES, "text", "text_column")
    block = effective_max_length(hp, tokenizer, config)
    mlm = hp.task == "mlm"
    if mlm and tokenizer.mask_token is None:
        raise HyperparameterError("task mlm needs a tokenizer with a mask token")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token

    def tokenize_and_group(examples: Any) -> dict:
        texts = [t for t in examples[text_col] if isinstance(t, str) and t.strip()]
        enc = tokenizer(texts, return_special_tokens_mask=mlm, add_special_tokens=True)
        if not mlm and tokenizer.eos_token_id is not None:
            enc["input_ids"] = [
                ids + [tokenizer.eos_token_id] if ids[-1:] != [tokenizer.eos_token_id] else ids
                for ids in enc["input_ids"]
            ]
            enc["attention_mask"] = [[1] * len(ids) for ids in enc["input_ids"]]
        wanted = (
            ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")
            if mlm
            else ("input_ids", "attention_mask")
        )
        keys = [k for k in enc.keys() if k in wanted]
        concat = {k: list(itertools.chain.from_iterable(enc[k])) for k in keys}
        total = len(concat["input_ids"])
        if total >= block:
            total = (total // block) * block
        result = {k: [v[i : i + block] for i in range(0, total, block)] for k, v in concat.items()}
        result[LENGTH_COLUMN] = [len(x) for x in result["input_ids"]]
        return result

    key = ["lm", hp.task, text_col, block, _tokenizer_key(tokenizer)]
    out = _map_splits(train_raw, eval_raw, tokenize_and_group, key=key, desc=hp.task + " {} blocks")

    collator = DataCollatorForLanguageModeling(
        tokenizer,
        mlm=mlm,
        mlm_probability=hp.mlm_probability if mlm else 0.15,
        pad_to_multiple_of=pad_multiple,
    )
    return TaskData(
        train=out[0],
        eval=out[1],
        collator=collator,
        compute_metrics=None,
        is_lm=True,
        lengths_column=None,
    )


def _prepare_sft(*args: Any) -> TaskData:
    from .sft import prepare_sft

    return prepare_sft(*args)


PREPARE = {
    "sft": _prepare_sft,
    "qa": prepare_qa,
    "classification": prepare_classification,
    "mlm": prepare_lm,
    "clm": prepare_lm,
}


def model_auto_class(task: str) -> Any:
    import transformers

    return {
        "qa": transformers.AutoModelForQuestionAnswering,
        "classification": transformers.AutoModelForSequenceClassification,
        "mlm": transformers.AutoModelForMaskedLM,
        "clm": transformers.AutoModelForCausalLM,
        "sft": transformers.AutoModelForCausalLM,
    }[task]


def limit_raw(ds: Any, n: int | None) -> Any:
    return _limit(ds, n)
