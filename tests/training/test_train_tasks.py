"""Each task trains a few steps on CPU with a tiny model and prints parseable metric lines."""

import json
import math
import os

import pytest
from ftl_train_testlib import (
    LINE_RE,
    cls_records,
    lm_records,
    make_tokenizer,
    metric_regex,
    metric_values,
    parse_lines,
    qa_records,
    sm_environ,
    write_records,
)

from ftl_train import hparams
from ftl_train.callbacks import MetricLineCallback, format_metric, metric_lines
from ftl_train.run import main

COMMON = [
    "--max_steps",
    "6",
    "--per_device_train_batch_size",
    "8",
    "--logging_steps",
    "2",
    "--eval_steps",
    "3",
    "--save_steps",
    "3",
    "--learning_rate",
    "1e-3",
    "--max_seq_length",
    "64",
]


def _run(tmp_path, task, channels, extra=(), capsys=None):
    env = sm_environ(tmp_path, channels)
    rc = main(["--task", task, *COMMON, "--checkpoint_dir", str(tmp_path / "ckpt"), *extra], env)
    out = capsys.readouterr().out if capsys else ""
    return rc, out


def _assert_lines_well_formed(out):
    lines = [line for line in out.splitlines() if line.startswith("ftl_metric ")]
    assert lines, "no metric lines printed"
    for line in lines:
        m = LINE_RE.match(line)
        assert m, line
        float(m.group(2))  # the value is a Python float repr


def test_qa_trains_evaluates_and_saves(tmp_path, model_dirs, capsys):
    train = write_records(qa_records(40, seed=0), tmp_path / "train", "jsonl")
    val = write_records(qa_records(12, seed=1), tmp_path / "validation", "jsonl")
    rc, out = _run(
        tmp_path,
        "qa",
        {"train": train, "validation": val, "model": model_dirs("qa")},
        ["--doc_stride", "16"],
        capsys,
    )
    assert rc == 0
    _assert_lines_well_formed(out)
    for name in ("train_loss", "learning_rate", "eval_loss", "eval_exact_match", "eval_f1"):
        assert metric_values(out, name), name
    f1 = metric_values(out, "eval_f1")[-1]
    em = metric_values(out, "eval_exact_match")[-1]
    assert 0.0 <= em <= f1 <= 100.0
    model_out = tmp_path / "model_out"
    assert (model_out / "config.json").exists() and (model_out / "model.safetensors").exists()
    assert (model_out / "tokenizer_config.json").exists()
    results = json.loads((tmp_path / "output_data" / "results.json").read_text())
    assert results["global_step"] == 6 and "eval_f1" in results
    # step-based checkpoints with the completion marker, at most save_total_limit (2) kept
    ckpts = sorted(os.listdir(tmp_path / "ckpt"))
    assert ckpts == ["checkpoint-3", "checkpoint-6"]
    assert all((tmp_path / "ckpt" / c / "ftl_checkpoint_complete.json").exists() for c in ckpts)


def test_qa_long_contexts_are_windowed_and_labels_point_at_the_answer(
    tmp_path, model_dirs, monkeypatch
):
    import datasets
    from transformers import AutoConfig

    from ftl_train.qa import prepare_qa

    raw = datasets.Dataset.from_list(qa_records(30, seed=3, lo=60, hi=120))
    tok = make_tokenizer()
    cfg = AutoConfig.from_pretrained(model_dirs("qa"))
    monkeypatch.setenv("FTL_CACHE_DIR", str(tmp_path / "cache"))
    hp = hparams.parse(["--task", "qa", "--max_seq_length", "48", "--doc_stride", "12"])
    data = prepare_qa(hp, tok, cfg, raw, raw, None)
    assert len(data.train) > len(raw)  # long contexts became several windows
    # every window that contains the answer labels exactly the answer's tokens
    enc_all = tok(
        [q.lstrip() for q in raw["question"]],
        list(raw["context"]),
        truncation="only_second",
        max_length=48,
        stride=12,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    hits = 0
    for i, (s, e) in enumerate(
        zip(list(data.train["start_positions"]), list(data.train["end_positions"]), strict=True)
    ):
        sample = enc_all["overflow_to_sample_mapping"][i]
        answer = raw[sample]["answers"]["text"][0]
        if s == 0 and e == 0:
            continue
        offsets = enc_all["offset_mapping"][i]
        assert raw[sample]["context"][offsets[s][0] : offsets[e][1]] == answer
        hits += 1
    assert hits >= len(raw)  # each answer found in at least one window
    assert all(len(ids) <= 48 for ids in data.train["input_ids"])


def test_classification_single_text(tmp_path, model_dirs, capsys):
    train = write_records(cls_records(48, seed=0), tmp_path / "train", "jsonl")
    val = write_records(cls_records(16, seed=1), tmp_path / "validation", "jsonl")
    rc, out = _run(
        tmp_path,
        "classification",
        {"train": train, "validation": val, "model": model_dirs("classification")},
        capsys=capsys,
    )
    assert rc == 0
    _assert_lines_well_formed(out)
    acc = metric_values(out, "eval_accuracy")
    f1 = metric_values(out, "eval_f1")
    assert acc and f1 and all(0 <= v <= 1 for v in acc + f1)


def test_sentence_pairs_with_string_labels(tmp_path, model_dirs, capsys):
    train = write_records(
        cls_records(32, seed=0, pair=True, string_labels=True), tmp_path / "train", "jsonl"
    )
    val = write_records(
        cls_records(8, seed=1, pair=True, string_labels=True), tmp_path / "validation", "jsonl"
    )
    rc, out = _run(
        tmp_path,
        "classification",
        {"train": train, "validation": val, "model": model_dirs("classification")},
        ["--text_column", "premise", "--text_pair_column", "hypothesis"],
        capsys,
    )
    assert rc == 0 and metric_values(out, "eval_accuracy")
    cfg = json.loads((tmp_path / "model_out" / "config.json").read_text())
    assert sorted(cfg["id2label"].values()) == ["contradiction", "entailment", "neutral"]


def test_stars3_label_mapping(tmp_path, model_dirs, capsys, monkeypatch):
    import datasets
    from transformers import AutoConfig

    from ftl_train.classification import prepare_classification

    recs = cls_records(40, seed=0, stars=True)
    raw = datasets.Dataset.from_list(recs)
    monkeypatch.setenv("FTL_CACHE_DIR", str(tmp_path / "cache"))
    hp = hparams.parse(
        [
            "--task",
            "classification",
            "--text_column",
            "review_body",
            "--label_column",
            "stars",
            "--label_mapping",
            "stars3",
        ]
    )
    data = prepare_classification(
        hp,
        make_tokenizer(),
        AutoConfig.from_pretrained(model_dirs("classification")),
        raw,
        None,
        None,
    )
    expected = [{1: 0, 2: 0, 3: 1, 4: 2, 5: 2}[r["stars"]] for r in recs]
    assert list(data.train["labels"]) == expected

    # unlabelled rows (label -1, as in MNLI's test split) are dropped
    unlabelled = datasets.Dataset.from_list(
        [{"text": "w1 w2", "label": -1}, {"text": "w3", "label": 1}]
    )
    hp2 = hparams.parse(["--task", "classification", "--num_labels", "2"])
    data2 = prepare_classification(
        hp2,
        make_tokenizer(),
        AutoConfig.from_pretrained(model_dirs("classification")),
        unlabelled,
        None,
        None,
    )
    assert list(data2.train["labels"]) == [1]
    assert data.model_kwargs["num_labels"] == 3
    assert data.model_kwargs["id2label"] == {0: "negative", 1: "neutral", 2: "positive"}

    train = write_records(recs, tmp_path / "train", "parquet")
    val = write_records(cls_records(10, seed=1, stars=True), tmp_path / "validation", "parquet")
    rc, out = _run(
        tmp_path,
        "classification",
        {"train": train, "validation": val, "model": model_dirs("classification")},
        [
            "--text_column",
            "review_body",
            "--label_column",
            "stars",
            "--label_mapping",
            "stars3",
            "--metric_for_best_model",
            "f1",
        ],
        capsys,
    )
    assert rc == 0 and metric_values(out, "eval_f1")
    cfg = json.loads((tmp_path / "model_out" / "config.json").read_text())
    assert cfg["id2label"] == {"0": "negative", "1": "neutral", "2": "positive"}


@pytest.mark.parametrize("task, arch", [("mlm", "albert"), ("mlm", "bert"), ("clm", "gpt2")])
def test_language_modelling(tmp_path, model_dirs, capsys, task, arch):
    train = write_records(lm_records(60, seed=0), tmp_path / "train", "jsonl")
    val = write_records(lm_records(12, seed=1), tmp_path / "validation", "jsonl")
    rc, out = _run(
        tmp_path,
        task,
        {"train": train, "validation": val, "model": model_dirs(task, arch)},
        ["--mlm_probability", "0.2"] if task == "mlm" else [],
        capsys,
    )
    assert rc == 0
    _assert_lines_well_formed(out)
    losses = metric_values(out, "eval_loss")
    ppl = metric_values(out, "eval_perplexity")
    assert losses and len(ppl) == len(losses)
    assert ppl[-1] == pytest.approx(math.exp(losses[-1]), rel=1e-6)


def test_seed_profile_bf16_and_accumulation_run_on_cpu(tmp_path, model_dirs, capsys):
    """The seed's settings (fp16, padding to max length, eager attention) and bf16 +
    gradient accumulation all run; fp16 falls back to float32 on a CPU."""
    train = write_records(cls_records(32, seed=0), tmp_path / "train", "jsonl")
    ch = {"train": train, "model": model_dirs("classification")}
    rc, out = _run(
        tmp_path / "a",
        "classification",
        ch,
        [
            "--fp16",
            "true",
            "--pad_to_max_length",
            "true",
            "--attn_implementation",
            "eager",
            "--optim",
            "adamw_torch",
            "--group_by_length",
            "false",
        ],
        capsys,
    )
    assert rc == 0 and metric_values(out, "train_loss")
    rc, out = _run(
        tmp_path / "b",
        "classification",
        ch,
        [
            "--bf16",
            "true",
            "--gradient_accumulation_steps",
            "2",
            "--per_device_train_batch_size",
            "4",
        ],
        capsys,
    )
    assert rc == 0 and metric_values(out, "train_loss")
    assert (tmp_path / "b" / "ckpt" / "checkpoint-6").exists()


def test_model_from_model_name_or_path_and_from_model_tarball(tmp_path, model_dirs, capsys):
    import tarfile

    train = write_records(cls_records(16, seed=0), tmp_path / "train", "csv")
    rc, _ = _run(
        tmp_path / "a",
        "classification",
        {"train": train},
        ["--model_name_or_path", str(model_dirs("classification")), "--max_steps", "2"],
        capsys,
    )
    assert rc == 0
    channel = tmp_path / "model_channel"
    channel.mkdir()
    with tarfile.open(channel / "model.tar.gz", "w:gz") as tar:
        for f in model_dirs("classification").iterdir():
            tar.add(f, arcname=f.name)
    rc, _ = _run(
        tmp_path / "b",
        "classification",
        {"train": train, "model": channel},
        ["--max_steps", "2"],
        capsys,
    )
    assert rc == 0


def test_clear_errors_exit_2(tmp_path, model_dirs, capsys):
    train = write_records(cls_records(8), tmp_path / "train", "jsonl")
    env = sm_environ(tmp_path, {"train": train, "model": model_dirs("classification")})
    assert main(["--task", "classification", "--not_a_thing", "1"], env) == 2
    assert "unknown hyperparameter(s): not_a_thing" in capsys.readouterr().err
    assert (
        main(
            [
                "--task",
                "classification",
                "--text_column",
                "nope",
                "--checkpoint_dir",
                str(tmp_path / "c"),
            ],
            env,
        )
        == 2
    )
    assert "text_column='nope'" in capsys.readouterr().err
    env2 = sm_environ(tmp_path, {"model": model_dirs("classification")})
    assert main(["--task", "classification", "--checkpoint_dir", str(tmp_path / "c")], env2) == 2
    assert "no training data" in capsys.readouterr().err


def test_metric_line_format_and_main_process_only():
    assert format_metric("eval_f1", 87.5, 100) == "ftl_metric name=eval_f1 value=87.5 step=100"
    assert format_metric("Eval F1", 1e-5, 3) == "ftl_metric name=eval_f1 value=1e-05 step=3"
    import re

    assert (
        re.search(metric_regex("learning_rate"), format_metric("learning_rate", 3e-05, 1)).group(1)
        == "3e-05"
    )
    lines = metric_lines(
        {"loss": 1.5, "learning_rate": 2e-5, "epoch": 0.5, "note": "x", "flag": True}, 10
    )
    assert lines == [
        "ftl_metric name=train_loss value=1.5 step=10",
        "ftl_metric name=learning_rate value=2e-05 step=10",
        "ftl_metric name=epoch value=0.5 step=10",
    ]
    summary = metric_lines(
        {
            "train_runtime": 3.0,
            "train_loss": 0.7,
            "train_samples_per_second": 9.0,
            "total_flos": 1e9,
        },
        6,
    )
    assert "ftl_metric name=train_loss_mean value=0.7 step=6" in summary and not any(
        "total_flos" in s for s in summary
    )

    import io

    class State:
        is_world_process_zero = False
        global_step = 5

    buf = io.StringIO()
    MetricLineCallback(buf).on_log(None, State(), None, logs={"loss": 1.0})
    assert buf.getvalue() == ""
    State.is_world_process_zero = True
    MetricLineCallback(buf).on_log(None, State(), None, logs={"loss": 1.0})
    assert parse_lines(buf.getvalue()) == [("train_loss", "1.0", 5)]
