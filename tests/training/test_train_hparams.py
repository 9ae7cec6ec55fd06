"""Hyperparameter parsing: CLI as the SageMaker toolkit passes it, SM_HPS, JSON-encoded values."""

import json

import pytest

from ftl_train import hparams
from ftl_train.hparams import HyperparameterError, parse, parse_label_mapping, split_cli

LAUNCHER_NAMES = [
    "task",
    "model_name_or_path",
    "max_seq_length",
    "doc_stride",
    "pad_to_max_length",
    "learning_rate",
    "num_train_epochs",
    "max_steps",
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "gradient_accumulation_steps",
    "fp16",
    "bf16",
    "seed",
    "warmup_ratio",
    "weight_decay",
    "eval_steps",
    "save_steps",
    "save_total_limit",
    "logging_steps",
    "metric_for_best_model",
    "load_best_model_at_end",
    "text_column",
    "text_pair_column",
    "label_column",
    "num_labels",
    "label_mapping",
    "mlm_probability",
    "checkpoint_dir",
    "attn_implementation",
    "tf32",
    "optim",
    "group_by_length",
    "dataloader_num_workers",
    "torch_compile",
]


def test_every_launcher_name_is_supported():
    assert set(LAUNCHER_NAMES) <= set(hparams.SPEC_BY_NAME)


def test_toolkit_style_cli_is_typed():
    hp = parse(
        [
            "--task",
            "qa",
            "--learning_rate",
            "3e-05",
            "--max_steps",
            "100",
            "--fp16",
            "True",
            "--pad_to_max_length",
            "false",
            "--num_train_epochs",
            "2",
            "--model_name_or_path",
            "bert-large",
        ]
    )
    assert hp.task == "qa"
    assert hp.learning_rate == pytest.approx(3e-5)
    assert hp.max_steps == 100 and isinstance(hp.max_steps, int)
    assert hp.fp16 is True and hp.pad_to_max_length is False
    assert hp.num_train_epochs == 2.0
    assert hp.given >= {"task", "learning_rate", "max_steps"}


def test_json_encoded_values_are_decoded():
    # What a launcher that JSON-encodes every value (as the SageMaker SDK does) sends when
    # nothing decodes it on the way.
    raw = {
        "task": "classification",
        "learning_rate": 2e-5,
        "bf16": True,
        "text_column": "review_body",
        "label_mapping": "stars3",
        "per_device_train_batch_size": 32,
        "seed": 7,
    }
    argv = []
    for k, v in raw.items():
        argv += [f"--{k}", json.dumps(v)]
    hp = parse(argv)
    assert hp.task == "classification"
    assert hp.learning_rate == pytest.approx(2e-5)
    assert hp.bf16 is True
    assert hp.text_column == "review_body"
    assert hp.label_mapping == "stars3"
    assert hp.per_device_train_batch_size == 32
    # a number sent as a JSON string
    assert parse(["--task", "qa", "--learning_rate", '"5e-05"']).learning_rate == pytest.approx(
        5e-5
    )
    assert parse(["--task", "qa", "--max_steps", "10.0"]).max_steps == 10


def test_without_sm_hps_the_cli_is_read_strictly():
    hp = parse(["--task", "mlm", "--seed", "5"], {})
    assert hp.task == "mlm" and hp.seed == 5
    with pytest.raises(HyperparameterError, match="auto_wrap"):
        parse(["--task", "sft", "--fsdp", "full_shard", "auto_wrap"], {})


def test_under_the_toolkit_sm_hps_wins_over_the_shell_split_command_line():
    """The toolkit runs ``/bin/sh -c "<command joined with spaces>"`` (issue 34): a value with
    a space arrives as two words and an empty value vanishes. SM_HPS has them exactly."""
    hps = {"task": "sft", "fsdp": "full_shard auto_wrap", "seed": 3, "text_pair_column": ""}
    argv = "--text_pair_column --fsdp full_shard auto_wrap --seed 3 --task sft".split()
    hp = parse([*argv, "--local_rank", "1"], {"SM_HPS": json.dumps(hps)})
    assert hp.fsdp == "full_shard auto_wrap" and hp.seed == 3 and hp.task == "sft"
    assert hp.text_pair_column is None  # empty, as SM_HPS says: not the bare flag's "true"
    assert split_cli(argv, split_by_shell=True)["fsdp"] == "full_shard auto_wrap"
    # a name only the command line has (a launcher's) still comes from it
    hp = parse(["--seed", "5"], {"SM_HPS": json.dumps({"task": "mlm"})})
    assert hp.task == "mlm" and hp.seed == 5


def test_equals_form_and_bare_flag():
    assert split_cli(["--a=1", "--b", "--c", "x"]) == {"a": "1", "b": "true", "c": "x"}
    assert split_cli(["--max_steps", "-1"]) == {"max_steps": "-1"}
    hp = parse(["--task=qa", "--torch_compile"])
    assert hp.torch_compile is True


def test_platform_hyperparameters_are_ignored():
    hp = parse(
        [
            "--task",
            "qa",
            "--sagemaker_program",
            "train.py",
            "--sagemaker_submit_directory",
            "s3://b/k/sourcedir.tar.gz",
            "--sagemaker_distributed_dataparallel_enabled",
            "true",
            "--mp_parameters",
            json.dumps({"partitions": 4}),
            "--local_rank",
            "0",
        ]
    )
    assert "sagemaker_program" in hp.ignored and "mp_parameters" in hp.ignored


def test_unknown_hyperparameter_is_rejected_by_name():
    with pytest.raises(HyperparameterError) as err:
        parse(["--task", "qa", "--learning_rat", "1e-5"])
    assert "learning_rat" in str(err.value) and "unknown" in str(err.value)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        ([], "task is required"),
        (["--task", "summarize"], "expected one of"),
        (["--task", "qa", "--max_steps", "ten"], "integer"),
        (["--task", "qa", "--max_steps", "1.5"], "integer"),
        (["--task", "qa", "--learning_rate", "fast"], "number"),
        (["--task", "qa", "--fp16", "maybe"], "true or false"),
        (["--task", "qa", "--fp16", "true", "--bf16", "true"], "cannot both"),
        (["--task", "qa", "--per_device_train_batch_size", "0"], "out of range"),
        (["--task", "qa", "--max_seq_length", "64", "--doc_stride", "64"], "doc_stride"),
        (["--task", "classification", "--label_mapping", "stars9"], "label_mapping"),
        (["--task", "qa", "--warmup_ratio", "1.5"], "out of range"),
        (["qa"], "unexpected command-line argument"),
    ],
)
def test_bad_values_are_clear_errors(argv, fragment):
    with pytest.raises(HyperparameterError) as err:
        parse(argv)
    assert fragment in str(err.value)


def test_tristate_auto_and_null():
    hp = parse(["--task", "qa", "--bf16", "auto", "--tf32", "null", "--max_seq_length", "None"])
    assert hp.bf16 is None and hp.tf32 is None and hp.max_seq_length is None


def test_label_mappings():
    mapping, names = parse_label_mapping("stars3")
    assert names == ["negative", "neutral", "positive"]
    assert [mapping[str(s)] for s in range(1, 6)] == [0, 0, 1, 2, 2]
    mapping, names = parse_label_mapping(json.dumps({"bad": "neg", "good": "pos", "ok": "neg"}))
    assert names == ["neg", "pos"] and mapping == {"bad": 0, "good": 1, "ok": 0}
    mapping, names = parse_label_mapping(json.dumps({"1": 0, "5": 1}))
    assert names == ["0", "1"] and mapping == {"1": 0, "5": 1}
    with pytest.raises(HyperparameterError):
        parse_label_mapping(json.dumps({"a": 1, "b": "x"}))


def test_a_tuner_trials_objective_hyperparameter_is_ignored():
    """SageMaker's tuner adds ``_tuning_objective_metric`` to a sweep's trials (issue 37): the
    toolkit passes it as an argument and in ``SM_HPS``; a trial must not fail on it."""
    hps = {"task": "qa", "learning_rate": 3e-5, "_tuning_objective_metric": "eval_f1"}
    hp = parse(
        ["--task", "qa", "--_tuning_objective_metric", "eval_f1"],
        environ={"SM_HPS": json.dumps(hps)},
    )
    assert hp.ignored == ("_tuning_objective_metric",) and hp.learning_rate == 3e-5
