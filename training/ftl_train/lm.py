"""Tasks ``mlm`` and ``clm``: masked-LM pretraining (BERT/ALBERT style) and causal LM. Texts
are concatenated and cut into blocks of ``max_seq_length``; eval loss and perplexity."""

from __future__ import annotations

import itertools
from typing import Any

from .hparams import HyperparameterError, Hyperparameters
from .preprocess import (
    LENGTH_COLUMN,
    TEXT_COLUMN_GUESSES,
    TaskData,
    effective_max_length,
    map_splits,
    pick_column,
    tokenizer_key,
)


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
    text_col = pick_column(ref, hp.text_column, TEXT_COLUMN_GUESSES, "text", "text_column")
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
        result: dict[str, list[Any]] = {
            k: [v[i : i + block] for i in range(0, total, block)] for k, v in concat.items()
        }
        result[LENGTH_COLUMN] = [len(x) for x in result["input_ids"]]
        return result

    key = ["lm", hp.task, text_col, block, tokenizer_key(tokenizer)]
    out = map_splits(train_raw, eval_raw, tokenize_and_group, key=key, desc=hp.task + " {} blocks")

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
