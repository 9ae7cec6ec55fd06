"""Channel data in every supported format, loaded and trained on."""

import json

import pytest
from ftl_train_testlib import cls_records, metric_values, sm_environ, write_records

from ftl_train.data import DataError, detect_format, load_split
from ftl_train.run import main

FORMATS = ["save_to_disk", "jsonl", "csv", "parquet"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_loads(tmp_path, fmt):
    recs = cls_records(12, seed=1)
    folder = write_records(recs, tmp_path / "train", fmt)
    ds = load_split(str(folder))
    assert len(ds) == 12
    assert set(ds.column_names) >= {"text", "label"}
    assert ds[0]["text"] == recs[0]["text"] and int(ds[0]["label"]) == recs[0]["label"]


def test_detect_format_and_errors(tmp_path):
    import datasets

    dsd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(cls_records(6)),
            "validation": datasets.Dataset.from_list(cls_records(3, seed=2)),
        }
    )
    dsd.save_to_disk(str(tmp_path / "dd"))
    assert detect_format(str(tmp_path / "dd")) == "save_to_disk_dict"
    assert len(load_split(str(tmp_path / "dd"), ("validation",))) == 3
    assert len(load_split(str(tmp_path / "dd"), ("train",))) == 6

    nested = tmp_path / "nested"
    datasets.Dataset.from_list(cls_records(4)).save_to_disk(str(nested / "train"))
    assert detect_format(str(nested)) == "save_to_disk_nested"
    assert len(load_split(str(nested))) == 4

    tsv = tmp_path / "tsv"
    tsv.mkdir()
    (tsv / "a.tsv").write_text("text\tlabel\nw1 w2\t0\nw3\t1\n")
    assert len(load_split(str(tsv))) == 2

    gz = tmp_path / "gz"
    gz.mkdir()
    import gzip

    with gzip.open(gz / "a.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"text": "w1", "label": 0}) + "\n")
    assert detect_format(str(gz)) == "json" and len(load_split(str(gz))) == 1

    mixed = tmp_path / "mixed"
    write_records(cls_records(2), mixed, "jsonl")
    write_records(cls_records(2), mixed, "csv")
    with pytest.raises(DataError, match="mixes"):
        detect_format(str(mixed))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README").write_text("nothing")
    with pytest.raises(DataError, match="no dataset"):
        detect_format(str(empty))


@pytest.mark.parametrize("fmt", FORMATS)
def test_trains_from_each_format(tmp_path, fmt, model_dirs, capsys):
    train = write_records(cls_records(24, seed=0), tmp_path / "train", fmt)
    val = write_records(cls_records(8, seed=1), tmp_path / "validation", fmt)
    env = sm_environ(
        tmp_path, {"train": train, "validation": val, "model": model_dirs("classification")}
    )
    rc = main(
        [
            "--task",
            "classification",
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "8",
            "--logging_steps",
            "1",
            "--eval_steps",
            "2",
            "--save_steps",
            "2",
            "--checkpoint_dir",
            str(tmp_path / "ckpt"),
        ],
        env,
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert metric_values(out, "eval_accuracy") and metric_values(out, "train_loss")


def test_validation_split_inside_the_train_channel(tmp_path, model_dirs, capsys):
    import datasets

    dsd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(cls_records(16)),
            "validation": datasets.Dataset.from_list(cls_records(6, seed=2)),
        }
    )
    dsd.save_to_disk(str(tmp_path / "train"))
    env = sm_environ(tmp_path, {"train": tmp_path / "train", "model": model_dirs("classification")})
    rc = main(
        [
            "--task",
            "classification",
            "--max_steps",
            "2",
            "--eval_steps",
            "1",
            "--save_steps",
            "2",
            "--checkpoint_dir",
            str(tmp_path / "ckpt"),
        ],
        env,
    )
    assert rc == 0
    assert metric_values(capsys.readouterr().out, "eval_accuracy")


def test_the_tokenized_data_cache_tells_tokenizers_with_other_vocabularies_apart(tmp_path):
    """Same class, path, size and padding side, other vocabulary: the cache must not answer
    for the second tokenizer with the first one's features (reference: the tokenizer itself)."""
    import random
    import types

    import datasets
    from ftl_train_testlib import VOCAB, wordpiece_tokenizer

    from ftl_train import hparams, preprocess, tasks

    words = VOCAB[5:]
    shuffled = words[:]
    random.Random(0).shuffle(shuffled)
    tok_a = wordpiece_tokenizer(VOCAB)
    tok_b = wordpiece_tokenizer(VOCAB[:5] + shuffled)
    assert (type(tok_a), tok_a.name_or_path, len(tok_a)) == (
        type(tok_b),
        tok_b.name_or_path,
        len(tok_b),
    )
    raw = datasets.Dataset.from_list(cls_records(8, seed=3))
    hp = hparams.parse(["--task", "classification", "--max_seq_length", "32"])
    config = types.SimpleNamespace(max_position_embeddings=64)
    preprocess.configure_cache(str(tmp_path / "cache"))
    try:
        for tok in (tok_a, tok_b, tok_a):
            task = tasks.PREPARE["classification"](hp, tok, config, raw, None, None)
            expected = [tok(t, truncation=True, max_length=32)["input_ids"] for t in raw["text"]]
            assert task.train["input_ids"] == expected
    finally:
        preprocess.configure_cache(None)
    assert tok_a("w1 w2")["input_ids"] != tok_b("w1 w2")["input_ids"]
