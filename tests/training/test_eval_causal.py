"""The evaluation entrypoint (issue 36) on causal LMs: lm-evaluation-harness on a local task
file and a team's golden set (JSON Lines), for a full model, a LoRA adapter on its base
model, and a merged model with its adapter under adapter/; offline, on a CPU."""

from __future__ import annotations

import json

import pytest
from eval_testlib import eval_environ, metric_lines, result, tar_archive
from llm_testlib import make_llama_dir, pc_records

from ftl_eval.main import main

pytest.importorskip("lm_eval")

TASK = {
    "task": "pick",
    "dataset_path": "json",
    "dataset_kwargs": {"data_files": {"test": "pick.jsonl"}},  # relative to the task channel
    "test_split": "test",
    "output_type": "multiple_choice",
    "doc_to_text": "{{question}}",
    "doc_to_choice": "{{choices}}",
    "doc_to_target": "{{label}}",
    "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
}
HPS = {"task": "sft", "model_name_or_path": "base", "per_device_eval_batch_size": 1}


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_llama_dir(tmp_path_factory.mktemp("llama") / "base")


def _task_channel(root):
    root.mkdir(parents=True)
    (root / "pick.yaml").write_text(json.dumps(TASK))
    with open(root / "pick.jsonl", "w") as fh:
        for i in range(10):
            fh.write(json.dumps({"question": f"w{i} w{i + 1} ?", "choices": ["w1", "w2", "w3"],
                                 "label": i % 3}) + "\n")  # fmt: skip
    return root


def _greedy(model_dir_or_model, tokenizer_dir, prompts):
    """What lm-eval's generate_until yields per prompt: greedy, the prompt encoded as the
    tokenizer does by default, decoded without special tokens, cut at the first newline."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    model = model_dir_or_model
    if isinstance(model, (str, type(tokenizer_dir))):
        model = transformers.AutoModelForCausalLM.from_pretrained(model)
    model.eval()
    outs = []
    with torch.no_grad():
        for prompt in prompts:
            ids = tok(prompt, return_tensors="pt")
            gen = model.generate(**ids, max_new_tokens=64, do_sample=False)
            text = tok.decode(gen[0][ids["input_ids"].shape[1] :], skip_special_tokens=True)
            outs.append(text.split("\n")[0])
    return outs


def _golden(root, prompts, completions):
    root.mkdir(parents=True)
    with open(root / "set.jsonl", "w") as fh:
        for p, c in zip(prompts, completions, strict=True):
            fh.write(json.dumps({"prompt": p, "completion": c}) + "\n")
    return root


def test_a_full_model_runs_a_local_task_and_a_golden_set(tmp_path, llama, capsys):
    prompts = [r["prompt"] for r in pc_records(6, seed=1)]
    own = _greedy(str(llama), llama, prompts)
    # Half the golden answers are the model's own, half cannot be: exact match 0.5.
    golden = _golden(tmp_path / "golden", prompts, own[:3] + ["zz qq"] * 3)
    policy = {
        "lm_eval": {"tasks": ["pick"], "task_channel": "tasks", "limit": 6},
        "golden_sets": [{"name": "support", "prefix": "golden/support/"}],
    }
    channels = {
        "archive": tar_archive(llama, tmp_path / "archive"),
        "tasks": _task_channel(tmp_path / "tasks"),
        "golden_support": golden,
    }
    env = eval_environ(tmp_path, policy, HPS, channels)
    assert main([], env) == 0, capsys.readouterr().err
    lines = metric_lines(capsys.readouterr().out)
    assert set(lines) == {"lmeval_pick_acc", "golden_support_exact_match"}
    assert 0 <= lines["lmeval_pick_acc"] <= 1
    assert lines["golden_support_exact_match"] == pytest.approx(0.5)
    assert result(tmp_path)["metrics"] == lines


def _adapted(llama):
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = transformers.AutoModelForCausalLM.from_pretrained(llama)
    config = LoraConfig(r=4, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
    return get_peft_model(base, config)


def test_an_adapter_is_applied_to_its_base_model_and_a_merged_archive_read_whole(
    tmp_path, llama, capsys
):
    import transformers

    adapted = _adapted(llama)
    prompts = [r["prompt"] for r in pc_records(4, seed=2)]
    expected = _greedy(adapted, llama, prompts)
    assert expected != _greedy(str(llama), llama, prompts), "the adapter changes nothing"
    tok = transformers.AutoTokenizer.from_pretrained(llama)
    adapter_dir = tmp_path / "adapter-archive"
    adapted.save_pretrained(adapter_dir)
    tok.save_pretrained(adapter_dir)
    merged_dir = tmp_path / "merged-archive"
    adapted.save_pretrained(merged_dir / "adapter")
    adapted.merge_and_unload().save_pretrained(merged_dir)
    tok.save_pretrained(merged_dir)
    golden = _golden(tmp_path / "golden", prompts, expected)
    policy = {"golden_sets": [{"name": "own", "prefix": "golden/own/"}]}
    for merge, archive, extra in (
        (False, adapter_dir, {"base_model": llama}),
        (True, merged_dir, {}),
    ):
        hps = {**HPS, "peft": "lora", "merge_adapter": merge}
        run_dir = tmp_path / f"run-{merge}"
        channels = {"archive": tar_archive(archive, run_dir / "archive"), "golden_own": golden}
        env = eval_environ(run_dir, policy, hps, {**channels, **extra})
        assert main([], env) == 0, capsys.readouterr().err
        lines = metric_lines(capsys.readouterr().out)
        assert lines == {"golden_own_exact_match": 1.0}, (merge, lines)
        kind = result(run_dir)["archive_kind"]
        assert kind == ("merged-model" if merge else "lora-adapter")


def test_an_adapter_without_its_base_model_fails_and_says_so(tmp_path, llama, capsys):
    adapted = _adapted(llama)
    adapter_dir = tmp_path / "adapter"
    adapted.save_pretrained(adapter_dir)
    policy = {"golden_sets": [{"name": "g", "prefix": "g/"}]}
    channels = {
        "archive": tar_archive(adapter_dir, tmp_path / "archive"),
        "golden_g": _golden(tmp_path / "golden", ["w1"], ["w2"]),
    }
    env = eval_environ(tmp_path, policy, {**HPS, "peft": "lora"}, channels)
    assert main([], env) == 2
    assert "needs its base model" in capsys.readouterr().err
    assert result(tmp_path)["status"] == "Failed"
