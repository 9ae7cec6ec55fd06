"""Tiny Llama-style causal LMs with a chat-template tokenizer, and generated SFT data (offline)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ftl_train_testlib import VOCAB, WORDS, wordpiece_tokenizer

CHAT_SPECIAL = ["<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
LLM_VOCAB = VOCAB + CHAT_SPECIAL
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def chat_tokenizer():
    tok = wordpiece_tokenizer(LLM_VOCAB, model_max_length=256)
    tok.add_special_tokens(
        {"bos_token": "<s>", "eos_token": "</s>", "additional_special_tokens": CHAT_SPECIAL[2:]}
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def make_llama_dir(path: Path, dropout: float = 0.0, layers: int = 2, tok: Any = None) -> Path:
    """A tiny Llama saved with its tokenizer: the chat tokenizer over ``LLM_VOCAB`` unless
    ``tok`` is given (its vocabulary then sizes the embeddings)."""
    import transformers

    path.mkdir(parents=True, exist_ok=True)
    vocab_size = len(LLM_VOCAB) if tok is None else len(tok)
    tok = tok if tok is not None else chat_tokenizer()
    cfg = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        attention_dropout=dropout,
        tie_word_embeddings=False,
    )
    transformers.set_seed(0)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def chat_records(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        msgs = [{"role": "system", "content": _words(rng, 2, 5)}] if rng.random() < 0.5 else []
        for _turn in range(rng.randint(1, 2)):
            q = _words(rng, 3, 12)
            msgs.append({"role": "user", "content": q})
            # the answer echoes the question's first words: learnable
            msgs.append({"role": "assistant", "content": " ".join(q.split()[:3])})
        out.append({"messages": msgs})
    return out


def pc_records(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = _words(rng, 3, 15)
        out.append({"prompt": p, "completion": " ".join(p.split()[:2])})
    return out
