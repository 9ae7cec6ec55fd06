"""Chat templates, tokenizers and generated conversations for the SFT label checks (offline).

Templates: the originals TRL ships in ``trl/chat_templates`` (Llama-3, Qwen2.5, Qwen3, Gemma,
DeepSeek-R1-Distill, Nemotron-3-Nano: byte-identical to the models' own), read from the
installed package, plus two written here: a Mistral-Instruct-style ``[INST]`` template and
the project's test template, whose generation prompt ends in a space.

Tokenizers: a byte-level BPE (GPT-2/Llama-3/Qwen style, ``Ġword``) and a SentencePiece-style
BPE (Metaspace, ``▁word``), each trained in-process with the tokenizers library on a
generated corpus; every template's role markers are added tokens, as in the real models.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

from llm_testlib import CHAT_TEMPLATE as SPACE_PROMPT_TEMPLATE

TRL_TEMPLATES = ("llama3", "qwen2_5", "qwen3", "gemma", "deepseek_r1_distill", "nemotron_3_nano")

MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
    "{% elif m['role'] == 'assistant' %}{{ m['content'] + eos_token }}"
    "{% else %}{{ raise_exception('roles must be user or assistant') }}{% endif %}"
    "{% endfor %}"
)

# Per template: bos, eos, the added tokens, whether it renders reasoning, whether a system
# message is allowed.
SPECS = {
    "llama3": (
        "<|begin_of_text|>",
        "<|eot_id|>",
        ["<|start_header_id|>", "<|end_header_id|>"],
        False,
        True,
    ),
    "qwen2_5": (None, "<|im_end|>", ["<|im_start|>", "<|endoftext|>"], False, True),
    "qwen3": (
        None,
        "<|im_end|>",
        ["<|im_start|>", "<|endoftext|>", "<think>", "</think>"],
        True,
        True,
    ),
    "gemma": ("<bos>", "<eos>", ["<start_of_turn>", "<end_of_turn>"], False, False),
    "deepseek_r1_distill": (
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"],
        True,
        True,
    ),
    "nemotron_3_nano": (None, "<|im_end|>", ["<|im_start|>", "<think>", "</think>"], True, True),
    "mistral": ("<s>", "</s>", ["[INST]", "[/INST]"], False, False),
    "space_prompt": ("<s>", "</s>", ["<|system|>", "<|user|>", "<|assistant|>"], False, True),
}
TEMPLATES = tuple(SPECS)
TOKENIZER_KINDS = ("byte_level", "metaspace")

WORDS = (
    "the a an north river city is was of to and in on at by for with from what where when who "
    "why how many much year old new big small red blue green first last answer question model "
    "data train test loss label token space word think reason because therefore so yes no "
    "Paris London Tokyo Nile Amazon 1984 42 3.14 don't it's e.g. U.S."
).split()
PUNCT = [".", ",", "?", "!", ":", ";", "(", ")", "-", '"']


def template_text(name: str) -> str:
    if name == "mistral":
        return MISTRAL_TEMPLATE
    if name == "space_prompt":
        return SPACE_PROMPT_TEMPLATE
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text("utf-8")


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    out = []
    for _ in range(rng.randint(lo, hi)):
        w = rng.choice(WORDS)
        if rng.random() < 0.15:
            w += rng.choice(PUNCT)
        out.append(w)
    text = " ".join(out)
    if rng.random() < 0.1:
        text = text.replace(" ", "\n", 1)
    return text


def _corpus() -> list[str]:
    rng = random.Random(1)
    return [_sentence(rng, 3, 20) for _ in range(400)]


@functools.cache
def _backend(kind: str) -> str:
    """The trained tokenizer, serialised (each use deserialises its own copy)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if kind == "byte_level":
        tk = Tokenizer(models.BPE())
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=False))
        tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tk.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
        alphabet = sorted({c for s in _corpus() for c in s} | set("▁\n"))
    trainer = trainers.BpeTrainer(
        vocab_size=700, initial_alphabet=alphabet, special_tokens=["<unk>"], show_progress=False
    )
    tk.train_from_iterator(_corpus(), trainer=trainer)
    added = sorted({t for spec in SPECS.values() for t in [spec[0], spec[1], *spec[2]] if t})
    tk.add_special_tokens([t for t in added if t not in ("<think>", "</think>")])
    tk.add_tokens(["<think>", "</think>"])
    return tk.to_str()


def chat_tokenizer(template: str, kind: str):
    """A fast tokenizer of ``kind`` carrying ``template`` as its chat template."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    bos, eos, _added, _think, _system = SPECS[template]
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_backend(kind)),
        bos_token=bos,
        eos_token=eos,
        unk_token="<unk>",
        model_max_length=4096,
    )
    tok.pad_token = tok.eos_token
    tok.chat_template = template_text(template)
    return tok


def conversations(template: str, n: int, seed: int, multi_turn: bool = True) -> list[list[dict]]:
    """Generated conversations the template accepts: optional system message, 1-3 user /
    assistant exchanges; for reasoning templates some answers carry a ``<think>`` block."""
    _bos, _eos, _added, think, system = SPECS[template]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        msgs = []
        if system and rng.random() < 0.4:
            msgs.append({"role": "system", "content": _sentence(rng, 2, 8)})
        for _turn in range(rng.randint(1, 3) if multi_turn else 1):
            msgs.append({"role": "user", "content": _sentence(rng, 2, 14)})
            answer = _sentence(rng, 1, 12)
            if think and rng.random() < 0.5:
                answer = f"<think>\n{_sentence(rng, 2, 10)}\n</think>\n\n{answer}"
            if rng.random() < 0.1:
                answer = " " + answer  # a leading space the template may keep or trim
            msgs.append({"role": "assistant", "content": answer})
        out.append(msgs)
    return out
