"""SageMaker environment and process-group backend selection."""

import json

from ftl_train import env as E


def test_reads_sagemaker_variables(tmp_path):
    train = tmp_path / "train"
    train.mkdir()
    (train / "a.jsonl").write_text("{}\n")
    environ = {
        "SM_MODEL_DIR": "/x/model",
        "SM_OUTPUT_DATA_DIR": "/x/out",
        "SM_CHANNEL_TRAIN": str(train),
        "SM_CHANNEL_VALIDATION": str(tmp_path / "missing"),
        "SM_NUM_GPUS": "8",
        "SM_HOSTS": json.dumps(["algo-1", "algo-2"]),
        "SM_CURRENT_HOST": "algo-2",
    }
    sm = E.read_env(environ)
    assert sm.model_dir == "/x/model" and sm.output_data_dir == "/x/out"
    assert sm.num_gpus == 8 and sm.num_hosts == 2 and sm.current_host == "algo-2"
    assert sm.channel("train") == str(train)
    assert sm.channel("validation") is None  # announced but absent
    assert sm.default_checkpoint_dir == "/opt/ml/checkpoints"


def test_local_defaults_without_sagemaker(monkeypatch):
    monkeypatch.setattr(E, "_on_sagemaker", lambda env: False)
    sm = E.read_env({})
    assert sm.model_dir == "ftl_output/model"
    assert sm.default_checkpoint_dir == "ftl_output/checkpoints"
    assert sm.channels == {} or all(isinstance(v, str) for v in sm.channels.values())


def test_backend_single_process():
    assert E.select_backend({}, cuda=True) is None


def test_backend_torchrun_cpu_and_gpu():
    assert E.select_backend({"WORLD_SIZE": "4"}, cuda=False) == "gloo"
    assert E.select_backend({"WORLD_SIZE": "4"}, cuda=True) == "nccl"
    assert E.select_backend({"OMPI_COMM_WORLD_SIZE": "16"}, cuda=True) == "nccl"


def test_backend_smddp_only_when_installed(monkeypatch):
    env = {
        "SM_FRAMEWORK_PARAMS": json.dumps({"sagemaker_distributed_dataparallel_enabled": True}),
        "OMPI_COMM_WORLD_SIZE": "16",
    }
    monkeypatch.setattr(E, "smddp_available", lambda: False)
    assert E.select_backend(env, cuda=True) == "nccl"
    monkeypatch.setattr(E, "smddp_available", lambda: True)
    assert E.select_backend(env, cuda=True) == "smddp"
    assert E.select_backend({"SMDATAPARALLEL": "1"}, cuda=True) == "smddp"
    # smddp is switched on by the Trainer itself; an explicit backend would conflict
    assert E.trainer_ddp_backend("smddp") is None
    assert E.trainer_ddp_backend("nccl") == "nccl"
