"""task=sft: chat templating, answer-only labels, leak-free packing, refusals, metric lines."""

import json

import pytest
import torch
from ftl_train_testlib import parse_lines, sm_environ, write_records
from llm_testlib import chat_records, chat_tokenizer, make_llama_dir, pc_records

from ftl_train import hparams, parallel, sft, throughput
from ftl_train.hparams import HyperparameterError
from ftl_train.run import main

IGNORE = -100


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_llama_dir(tmp_path_factory.mktemp("llama") / "model")


def _label_text(tok, labels):
    return tok.decode([t for t in labels if t != IGNORE])


def test_chat_template_labels_only_the_assistant_turns():
    tok = chat_tokenizer()
    msgs = [
        {"role": "system", "content": "w1 w2"},
        {"role": "user", "content": "w3 w4 w5"},
        {"role": "assistant", "content": "w6 w7"},
        {"role": "user", "content": "w8"},
        {"role": "assistant", "content": "w9"},
    ]
    ids, labels = sft.encode_messages(tok, msgs, completion_only=True)
    assert (
        ids
        == tok(tok.apply_chat_template(msgs, tokenize=False), add_special_tokens=False)["input_ids"]
    )
    assert tok.convert_ids_to_tokens(ids)[:2] == ["<s>", "<|system|>"]
    kept = [tok.convert_ids_to_tokens(t) for t in labels if t != IGNORE]
    assert kept == ["w6", "w7", "</s>", "w9", "</s>"]  # answers and their EOS, nothing else
    assert all(lab in (IGNORE, i) for lab, i in zip(labels, ids, strict=True))
    _ids, every = sft.encode_messages(tok, msgs, completion_only=False)
    assert every == ids


def test_prompt_completion_labels_only_the_completion():
    tok = chat_tokenizer()
    ids, labels = sft.encode_prompt_completion(tok, "w1 w2 w3", "w4 w5", completion_only=True)
    n_prompt = len(tok("w1 w2 w3")["input_ids"])
    assert labels[:n_prompt] == [IGNORE] * n_prompt
    assert tok.convert_ids_to_tokens(labels[n_prompt:]) == ["w4", "w5", "</s>"]
    assert sft.detect_format(["prompt", "completion"]) == "prompt_completion"
    with pytest.raises(HyperparameterError, match="messages"):
        sft.detect_format(["text"])


def test_packing_fills_rows_restarts_positions_and_drops_boundary_labels():
    import datasets

    rows = {"input_ids": [], "labels": [], "length": []}
    for n in (5, 3, 7, 2, 6, 4):
        rows["input_ids"].append(list(range(10, 10 + n)))
        rows["labels"].append(list(range(10, 10 + n)))
        rows["length"].append(n)
    packed = sft.pack_rows(datasets.Dataset.from_dict(rows), capacity=8, pad_id=0)
    assert all(len(r) == 8 for r in packed["input_ids"])
    assert sum(packed["num_tokens"]) == 27  # every token placed once
    for ids, labels, pos in zip(
        packed["input_ids"], packed["labels"], packed["position_ids"], strict=True
    ):
        assert len(ids) == len(labels) == len(pos) == 8
        starts = [k for k, p in enumerate(pos) if p == 0]
        for k in starts:
            assert labels[k] == IGNORE  # never predicted from another example's last token
    assert sorted(len(b) for b in sft.pack_bins([5, 3, 7, 2, 6, 4], 8)) == [1, 1, 2, 2]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_examples_do_not_attend_to_each_other(llama, attn):
    from ftl_train.defaults import resolve
    from ftl_train.env import DeviceCaps
    from ftl_train.modelling import load_model

    hp = hparams.parse(["--task", "sft", "--attn_implementation", attn])
    perf = resolve(hp, DeviceCaps(cuda=False, bf16=False, tf32=False, name="cpu"))
    model = load_model(hp, str(llama), perf, {})  # as the entrypoint loads it
    model.train()  # the training forward (dropout is 0 in this model)
    a, b = [2, 10, 11, 12, 13], [2, 20, 21, 22]
    with torch.no_grad():
        alone = model(input_ids=torch.tensor([b])).logits[0]
        row = torch.tensor([a + b])
        pos = torch.tensor([list(range(len(a))) + list(range(len(b)))])
        packed = model(input_ids=row, position_ids=pos).logits[0, len(a) :]
    torch.testing.assert_close(packed, alone, rtol=1e-4, atol=1e-5)


def _sft(tmp_path, channels, *extra, steps=4):
    argv = ["--task", "sft", "--max_steps", str(steps), "--per_device_train_batch_size", "4"]
    argv += ["--logging_steps", "1", "--save_steps", "2", "--learning_rate", "2e-3"]
    argv += ["--max_seq_length", "64", "--checkpoint_dir", str(tmp_path / "ckpt"), *extra]
    return main(argv, sm_environ(tmp_path, channels))


@pytest.mark.parametrize("fmt", ["messages", "prompt_completion"])
def test_sft_trains_and_prints_token_metrics(tmp_path, llama, capsys, fmt):
    records = chat_records(40) if fmt == "messages" else pc_records(40)
    channels = {"train": write_records(records, tmp_path / "train", "jsonl"), "model": llama}
    assert _sft(tmp_path, channels) == 0
    names = {n for n, _v, _s in parse_lines(capsys.readouterr().out)}
    assert {"train_loss", "train_tokens_per_second", "train_loss_mean"} <= names
    assert "train_mfu" not in names  # a CPU has no peak in the table: no guessed MFU
    assert (tmp_path / "model_out" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "output_data" / "results.json").read_text())["global_step"] == 4


def test_qlora_is_refused_on_a_cpu_before_reading_data(tmp_path, llama, capsys):
    channels = {"train": tmp_path / "missing", "model": llama}
    assert _sft(tmp_path, channels, "--peft", "qlora") == 2
    err = capsys.readouterr().err
    assert "peft=qlora needs a CUDA GPU" in err and "peft=lora" in err


def test_recipe_hyperparameters_are_checked():
    ok = hparams.parse(["--task", "sft", "--fsdp", "full_shard auto_wrap"])
    assert parallel.fsdp_training_args(ok.fsdp, None, True)["fsdp_config"] == {
        "state_dict_type": "SHARDED_STATE_DICT",
        "activation_checkpointing": True,
        "cpu_ram_efficient_loading": False,
        "version": 2,  # FSDP2, also where transformers' default is still FSDP1
    }
    smp_v2 = parallel.fsdp_training_args(ok.fsdp, None, True, smp_v2=True)["fsdp_config"]
    assert "version" not in smp_v2 and "sync_module_states" not in smp_v2  # FSDP1 on a GPU
    assert hparams.parse(["--task", "sft", "--fsdp", ""]).fsdp is None
    bad = [
        (["--fsdp", "full_shard zigzag"], "zigzag"),
        (["--peft", "lora", "--fsdp", "full_shard"], "with fsdp is not supported"),
        (["--peft", "dora"], "expected one of none, lora, qlora"),
        (["--attn_implementation", "fast"], "attn_implementation"),
        (["--lora_dropout", "1.5"], "lora_dropout"),
    ]
    for extra, message in bad:
        with pytest.raises(HyperparameterError, match=message):
            hparams.parse(["--task", "sft", *extra])
    with pytest.raises(HyperparameterError, match="applies to task sft or clm"):
        hparams.parse(["--task", "qa", "--peft", "lora"])


def test_smp_v2_is_told_from_v1_and_fails_clearly_without_the_library():
    v2 = {
        "SM_HP_MP_PARAMETERS": json.dumps({"tensor_parallel_degree": 2, "hybrid_shard_degree": 4})
    }
    v1 = {"SM_HP_MP_PARAMETERS": json.dumps({"partitions": 2, "tensor_parallel_degree": 2})}
    assert parallel.smp_v2_requested(v2) and not parallel.smp_v2_requested(v1)
    assert not parallel.smp_v2_requested({})
    assert parallel.smp_v2_init(v1) is None  # SMP v1 stays the HF Trainer's business
    with pytest.raises(HyperparameterError, match="torch.sagemaker is not installed"):
        parallel.smp_v2_init(v2)
    hp = hparams.parse(["--task", "sft"])
    assert parallel.smp_v2_fsdp_options(v2, hp) == "hybrid_shard auto_wrap"


def test_mfu_uses_the_peak_table_and_refuses_to_guess():
    assert throughput.peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert throughput.peak_flops("NVIDIA H100 PCIe") == 756e12
    assert throughput.peak_flops("Some Future GPU") is None
    assert throughput.mfu(6e9, 1000.0, None, 1) is None
    assert throughput.mfu(6e9, 1e4, 1e14, 2) == pytest.approx(0.3)
    lin = torch.nn.Linear(4, 4, bias=False)
    assert throughput.flops_per_token(lin) == 6 * 16
    lin.weight.requires_grad_(False)
    assert throughput.flops_per_token(lin) == 4 * 16


# The hyperparameters the llm-sft, llm-sft-fsdp, llm-lora and llm-smp-v2 templates pass.
RECIPE_NAMES = [
    "task", "model_name_or_path", "dataset_format", "max_seq_length", "packing",
    "completion_only_loss", "peft", "lora_r", "lora_alpha", "lora_dropout",
    "lora_target_modules", "merge_adapter", "fsdp", "fsdp_transformer_layer_cls_to_wrap",
    "gradient_checkpointing", "attn_implementation", "bf16", "optim",
]  # fmt: skip


def test_every_recipe_hyperparameter_is_supported_with_its_documented_default():
    assert set(RECIPE_NAMES) <= set(hparams.SPEC_BY_NAME)
    hp = hparams.parse(["--task", "sft"])
    assert (hp.dataset_format, hp.packing, hp.completion_only_loss, hp.peft) == (
        "auto",
        True,
        True,
        "none",
    )
    assert (hp.lora_target_modules, hp.merge_adapter, hp.fsdp) == ("all-linear", False, None)
    assert hp.attn_implementation == "auto"
    # toolkit-style string values, as the SageMaker SDK sends them
    hp = hparams.parse(["--task", "sft", "--packing", "False", "--peft", '"lora"', "--lora_r", "8"])
    assert (hp.packing, hp.peft, hp.lora_r) == (False, "lora", 8)
