"""The evaluation entrypoint (issue 36) on encoder tasks: the template's task metrics on the
held-out channel, read from the archive SageMaker wrote, on a CPU with tiny models."""

from __future__ import annotations

import math

import numpy as np
import pytest
from eval_testlib import eval_environ, metric_lines, result, tar_archive
from ftl_train_testlib import cls_records, lm_records, qa_records, write_records

from ftl_eval import artifact
from ftl_eval.main import main
from ftl_train import lora


def _run(tmp_path, capsys, policy, hps, channels):
    env = eval_environ(tmp_path, policy, hps, channels)
    rc = main([], env)
    return rc, capsys.readouterr()


def test_qa_exact_match_and_f1_on_the_held_out_channel(tmp_path, model_dirs, capsys):
    archive = tar_archive(model_dirs("qa"), tmp_path / "archive")
    held = write_records(qa_records(24, seed=5), tmp_path / "validation", "jsonl")
    policy = {"task_metrics": {"channel": "validation"}}
    hps = {"task": "qa", "max_seq_length": 64, "doc_stride": 16}
    rc, out = _run(tmp_path, capsys, policy, hps, {"archive": archive, "validation": held})
    assert rc == 0, out.err
    lines = metric_lines(out.out)
    assert set(lines) >= {"eval_exact_match", "eval_f1", "eval_loss"}
    assert 0 <= lines["eval_exact_match"] <= lines["eval_f1"] <= 100
    body = result(tmp_path)
    assert body["status"] == "Completed" and body["archive_kind"] == "full-model"
    assert body["metrics"] == lines and body["training_job"] == "job-eval"


def _reference_accuracy(model_dir, records):
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    with torch.no_grad():
        enc = tok([r["text"] for r in records], padding=True, truncation=True, max_length=64,
                  return_tensors="pt")  # fmt: skip
        preds = model(**enc).logits.argmax(-1).numpy()
    return float(np.mean(preds == np.array([r["label"] for r in records])))


def test_classification_accuracy_matches_a_plain_forward_pass(tmp_path, model_dirs, capsys):
    records = cls_records(30, seed=3)
    archive = tar_archive(model_dirs("classification"), tmp_path / "archive")
    held = write_records(records, tmp_path / "heldout", "jsonl")
    policy = {"task_metrics": {"channel": "heldout"}}
    hps = {"task": "classification", "max_seq_length": 64, "num_labels": 3}
    rc, out = _run(tmp_path, capsys, policy, hps, {"archive": archive, "heldout": held})
    assert rc == 0, out.err
    lines = metric_lines(out.out)
    assert lines["eval_accuracy"] == pytest.approx(
        _reference_accuracy(model_dirs("classification"), records)
    )
    assert 0 <= lines["eval_f1"] <= 1


def test_mlm_perplexity_is_the_exponent_of_the_loss(tmp_path, model_dirs, capsys):
    archive = tar_archive(model_dirs("mlm", "albert"), tmp_path / "archive")
    held = write_records(lm_records(20, seed=2), tmp_path / "validation", "jsonl")
    policy = {"task_metrics": {"channel": "validation"}}
    hps = {"task": "mlm", "max_seq_length": 32}
    rc, out = _run(tmp_path, capsys, policy, hps, {"archive": archive, "validation": held})
    assert rc == 0, out.err
    lines = metric_lines(out.out)
    assert lines["eval_perplexity"] == pytest.approx(math.exp(lines["eval_loss"]), rel=1e-6)


def test_an_archive_that_is_not_what_the_platform_says_fails_clearly(tmp_path, model_dirs, capsys):
    archive = tar_archive(model_dirs("clm", "gpt2"), tmp_path / "archive")
    held = write_records(lm_records(8), tmp_path / "validation", "jsonl")
    policy = {"task_metrics": {"channel": "validation"}}
    hps = {"task": "clm", "peft": "lora"}  # says adapter; the archive is a whole model
    rc, out = _run(tmp_path, capsys, policy, hps, {"archive": archive, "validation": held})
    assert rc == 2
    assert "the archive holds full-model but the platform says lora-adapter" in out.err
    body = result(tmp_path)
    assert body["status"] == "Failed" and "lora-adapter" in body["reason"]
    assert "ftl_metric" not in out.out


def test_a_missing_held_out_channel_is_named(tmp_path, model_dirs, capsys):
    archive = tar_archive(model_dirs("classification"), tmp_path / "archive")
    policy = {"task_metrics": {"channel": "validation"}}
    rc, out = _run(tmp_path, capsys, policy, {"task": "classification"}, {"archive": archive})
    assert rc == 2 and "no validation channel" in out.err


def test_the_entrypoint_and_the_job_model_name_the_same_kinds_and_channels():
    from ftl_eval import arguments
    from jobmodel.after_training import archive as jm_archive
    from jobmodel.evaluation import arguments as jm_args

    assert artifact.KINDS == jm_archive.KINDS
    assert artifact.ADAPTER_SUBDIR == jm_archive.ADAPTER_SUBDIR == lora.ADAPTER_SUBDIR
    assert (artifact.ARCHIVE_CHANNEL, artifact.BASE_CHANNEL) == (
        jm_args.ARCHIVE_CHANNEL,
        jm_args.BASE_CHANNEL,
    )
    assert tuple(arguments.PREFIX + k for k in arguments.KEYS) == jm_args.EVAL_KEYS
