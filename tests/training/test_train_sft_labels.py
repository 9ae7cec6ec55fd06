"""task=sft answer-only labels against TRL's SFT data path, template by template.

Reference: TRL 1.16.0 (pinned in requirements-train.txt), ``SFTTrainer._prepare_dataset``
with ``completion_only_loss=True`` on conversational prompt/completion rows. For assistant
turn ``i`` of a conversation, TRL renders ``messages[:i]`` with the generation prompt and
``messages[:i+1]``, tokenizes both, and labels the tokens of the second from where the two
token lists part. The reference labels of a whole conversation are those of its turns
together; they apply where the template is prefix-preserving (TRL's
``is_chat_template_prefix_preserving`` property: a conversation's prefix renders as a prefix
of the whole), and the entrypoint must refuse, naming that property, where it is not.

Each case prints how many generated conversations agree (run with ``-s`` to read them).
"""

from __future__ import annotations

import random
import types

import pytest
import torch
from chat_testlib import TEMPLATES, TOKENIZER_KINDS, chat_tokenizer, conversations
from ftl_train_testlib import parse_lines, sm_environ, write_records
from llm_testlib import make_llama_dir

from ftl_train import sft
from ftl_train.hparams import HyperparameterError
from ftl_train.run import main

IGNORE = -100
THINKING_REWRITERS = {"qwen3", "nemotron_3_nano"}  # drop earlier turns' reasoning / think tags


@pytest.fixture(scope="module")
def trl_args(tmp_path_factory):
    import datasets
    from trl import SFTConfig

    datasets.disable_progress_bars()
    return SFTConfig(
        output_dir=str(tmp_path_factory.mktemp("trl")),
        max_length=None,
        packing=False,
        completion_only_loss=True,
        report_to=[],
        use_cpu=True,
        bf16=False,
    )


def trl_prepare(tok, rows, args):
    """TRL's own dataset preparation (tokenize, completion mask, labels) on ``rows``."""
    import datasets
    from trl.trainer.sft_trainer import SFTTrainer

    trainer = types.SimpleNamespace(_tokenizer=tok, chat_template=None, completion_only_loss=True)
    return SFTTrainer._prepare_dataset(
        trainer, datasets.Dataset.from_list(rows), tok, args, False, None, "train"
    )


def _render(tok, msgs):
    return tok.apply_chat_template(msgs, tokenize=False)


def prefix_preserving(tok, msgs) -> bool:
    """Every assistant turn's conversation prefix renders as a prefix of the whole."""
    whole = _render(tok, msgs)
    return all(
        whole.startswith(_render(tok, msgs[: i + 1]))
        for i, m in enumerate(msgs)
        if m["role"] == "assistant"
    )


def reference(tok, convs, args):
    """Per conversation: (input_ids, labels) by TRL's rule, or None where not prefix-preserving."""
    rows, where = [], []
    for c, msgs in enumerate(convs):
        for i, m in enumerate(msgs):
            if m["role"] == "assistant":
                rows.append({"prompt": msgs[:i], "completion": [m]})
                where.append(c)
    prepared = trl_prepare(tok, rows, args)
    out: list = [None] * len(convs)
    ok = [prefix_preserving(tok, msgs) for msgs in convs]
    for c in range(len(convs)):
        if ok[c]:
            ids = tok(_render(tok, convs[c]), add_special_tokens=False)["input_ids"]
            out[c] = (ids, [IGNORE] * len(ids))
    for c, row in zip(where, prepared, strict=True):
        if out[c] is None:
            continue
        ids, labels = out[c]
        n = len(row["input_ids"])
        assert ids[:n] == row["input_ids"]  # the turn's prefix tokenizes as a prefix here
        for k, lab in enumerate(row["labels"]):
            if lab != IGNORE:
                labels[k] = lab
    return out


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
@pytest.mark.parametrize("template", TEMPLATES)
def test_answer_labels_agree_with_trl(template, kind, trl_args):
    tok = chat_tokenizer(template, kind)
    convs = conversations(template, 30, seed=len(template) * 7 + len(kind))
    ref = reference(tok, convs, trl_args)
    agree = refused = 0
    for msgs, expected in zip(convs, ref, strict=True):
        if expected is None:
            with pytest.raises(HyperparameterError, match="not prefix-preserving"):
                sft.encode_messages(tok, msgs, completion_only=True)
            refused += 1
            continue
        ids, labels = sft.encode_messages(tok, msgs, completion_only=True)
        assert (ids, labels) == expected, tok.decode(ids)
        agree += 1
    print(
        f"\nsft labels {template}/{kind}: {agree} agree with TRL, {refused} refused as TRL's rule"
    )
    assert agree >= 5
    if template not in THINKING_REWRITERS:
        assert refused == 0
    # single-turn conversations are always prefix-preserving, so every template trains on them
    single = conversations(template, 10, seed=5, multi_turn=False)
    for msgs, expected in zip(single, reference(tok, single, trl_args), strict=True):
        assert sft.encode_messages(tok, msgs, completion_only=True) == expected


def test_first_answer_token_keeps_its_label_after_a_prompt_ending_in_a_space():
    for kind, marker in (("byte_level", "Ġ"), ("metaspace", "▁")):
        tok = chat_tokenizer("space_prompt", kind)
        msgs = [
            {"role": "user", "content": "where is it"},
            {"role": "assistant", "content": "Paris"},
        ]
        assert tok.apply_chat_template(
            msgs[:1], tokenize=False, add_generation_prompt=True
        ).endswith("<|assistant|> ")
        ids, labels = sft.encode_messages(tok, msgs, completion_only=True)
        kept = [tok.convert_ids_to_tokens(t) for t in labels if t != IGNORE]
        assert kept[0].startswith(marker)  # the space is folded into the answer's first token
        assert tok.decode([t for t in labels if t != IGNORE]).strip() == "Paris</s>"


def test_templates_that_cannot_be_labelled_are_refused_with_their_property():
    tok = chat_tokenizer("qwen3", "byte_level")
    two_turns = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    with pytest.raises(HyperparameterError, match=r"not prefix-preserving.*message 1 of"):
        sft.encode_messages(tok, two_turns, completion_only=True)
    assert sft.encode_messages(tok, two_turns, completion_only=False)[0]  # all tokens: fine
    # a generation prompt that changes what comes before it
    tok.chat_template = (
        "{% if add_generation_prompt %}<|im_start|>system<|im_end|>{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>{% endif %}"
    )
    with pytest.raises(HyperparameterError, match="generation prompt does not extend"):
        sft.encode_messages(tok, two_turns[:2], completion_only=True)


# ---------------------------------------------------------------- through the entrypoint


LOSS_TEMPLATE = ("deepseek_r1_distill", "byte_level")  # prefill the turn omits + folded spaces


@pytest.fixture(scope="module")
def loss_case(tmp_path_factory, trl_args):
    """A tiny model, 12 conversations, and the reference mean cross-entropy over their
    answer tokens (TRL's labels, each conversation run alone through the model)."""
    tok = chat_tokenizer(*LOSS_TEMPLATE)
    root = tmp_path_factory.mktemp("sft_loss")
    model_dir = make_llama_dir(root / "model", tok=tok)
    convs = [c for c in conversations(LOSS_TEMPLATE[0], 12, seed=11)]
    ref = reference(tok, convs, trl_args)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for ids, labels in ref:
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
            target = torch.tensor(labels[1:])
            total += float(
                torch.nn.functional.cross_entropy(
                    logits, target, ignore_index=IGNORE, reduction="sum"
                )
            )
            count += int((target != IGNORE).sum())
    train = write_records([{"messages": c} for c in convs], root / "train", "jsonl")
    return {"model": model_dir, "train": train}, total / count


def _first_loss(out: str) -> float:
    return next(float(v) for n, v, s in parse_lines(out) if n == "train_loss" and s == 1)


def _argv(tmp_path, *extra):
    argv = ["--task", "sft", "--max_steps", "1", "--logging_steps", "1", "--seed", "3"]
    argv += ["--per_device_train_batch_size", "16", "--max_seq_length", "256"]
    return [*argv, "--save_steps", "1000", "--checkpoint_dir", str(tmp_path / "ckpt"), *extra]


@pytest.mark.parametrize("recipe", ["full", "lora"])
def test_first_step_loss_is_the_mean_over_the_reference_answer_tokens(
    recipe, loss_case, tmp_path, capsys
):
    channels, expected = loss_case
    extra = ("--peft", "lora", "--lora_r", "4") if recipe == "lora" else ()
    assert main(_argv(tmp_path, *extra), sm_environ(tmp_path, channels)) == 0
    got = _first_loss(capsys.readouterr().out)
    print(f"\nsft first-step loss {recipe}: {got} vs reference {expected}")
    assert got == pytest.approx(expected, abs=2e-4)  # the Trainer logs 4 decimals


def test_packing_matches_trl_best_fit_decreasing():
    import datasets
    from trl import pack_dataset

    cases = 0
    for seed in range(6):
        rng = random.Random(seed)
        capacity = rng.choice([32, 64, 128])
        lengths = [rng.randint(1, capacity) for _ in range(rng.randint(50, 300))]
        rows = {  # example k is k+1 repeated: a row's tokens tell which examples it holds
            "input_ids": [[k + 1] * n for k, n in enumerate(lengths)],
            "labels": [[k + 1] * n for k, n in enumerate(lengths)],
            "length": lengths,
        }
        ours = sft.pack_rows(datasets.Dataset.from_dict(rows), capacity=capacity, pad_id=0)
        theirs = pack_dataset(
            datasets.Dataset.from_dict({"input_ids": rows["input_ids"]}), capacity, strategy="bfd"
        )

        def bins(packed):
            return sorted(sorted({t for t in row if t}) for row in packed["input_ids"])

        assert bins(ours) == bins(theirs)
        for row, pos in zip(ours["input_ids"], ours["position_ids"], strict=True):
            real = [t for t in row if t]  # each example's positions restart at 0
            starts = [k for k, p in enumerate(pos[: len(real)]) if p == 0]
            assert [real[k] for k in starts] == list(dict.fromkeys(real))
        cases += len(lengths)
    print(f"\npacking: {cases} examples in 6 sets packed into the same rows as TRL bfd")


def test_the_job_stops_before_training_on_a_template_it_cannot_label(tmp_path, capsys):
    tok = chat_tokenizer("qwen3", "byte_level")
    model = make_llama_dir(tmp_path / "model", tok=tok)
    convs = conversations("qwen3", 6, seed=2)
    assert not all(prefix_preserving(tok, c) for c in convs)
    train = write_records([{"messages": c} for c in convs], tmp_path / "train", "jsonl")
    channels = {"model": model, "train": train}
    assert main(_argv(tmp_path), sm_environ(tmp_path, channels)) == 2
    err = capsys.readouterr().err
    assert "ftl_train: error: completion_only_loss cannot label this chat template" in err
    assert "not prefix-preserving" in err and "completion_only_loss=false" in err
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())
    # training on every token needs no answer spans
    argv = _argv(tmp_path / "all", "--completion_only_loss", "false")
    assert main(argv, sm_environ(tmp_path / "all", channels)) == 0


@pytest.mark.slow
def test_first_step_loss_under_fsdp_on_two_cpu_processes(loss_case, tmp_path):
    import socket
    import subprocess
    import sys

    from ftl_train_testlib import ENTRYPOINT, TRAINING_DIR

    channels, expected = loss_case
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_port", str(port), str(ENTRYPOINT)]
    cmd += _argv(tmp_path, "--fsdp", "full_shard auto_wrap", "--per_device_train_batch_size", "8")
    env = dict(sm_environ(tmp_path, channels), OMP_NUM_THREADS="1")
    res = subprocess.run(
        cmd, env=env, cwd=str(TRAINING_DIR), capture_output=True, text=True, timeout=240
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "FSDP on CPU processes" in res.stderr
    got = _first_loss(res.stdout)
    print(f"\nsft first-step loss fsdp: {got} vs reference {expected}")
    assert got == pytest.approx(expected, abs=2e-4)


@pytest.mark.parametrize("kind", TOKENIZER_KINDS)
def test_prompt_completion_labels_agree_with_trl(kind, trl_args):
    """Plain prompt/completion rows: TRL tokenizes prompt and prompt + completion + EOS and
    labels from where they part; the entrypoint tokenizes the two apart. With the
    completion starting on a word boundary both give the same tokens and labels."""
    tok = chat_tokenizer("space_prompt", kind)
    rng = random.Random(len(kind))
    rows = []
    for _ in range(40):
        msgs = conversations("space_prompt", 1, seed=rng.randint(0, 10**6), multi_turn=False)[0]
        rows.append({"prompt": msgs[-2]["content"], "completion": " " + msgs[-1]["content"]})
    ref = trl_prepare(tok, rows, trl_args)
    for row, expected in zip(rows, ref, strict=True):
        got = sft.encode_prompt_completion(tok, row["prompt"], row["completion"], True)
        assert got == (expected["input_ids"], expected["labels"])
    print(f"\nprompt/completion labels {kind}: {len(rows)} agree with TRL")
