"""global_batch_size: the split over the devices a host set has (ftl_train/batching.py)."""

import json
from types import SimpleNamespace

import pytest

from ftl_train import checkpoints
from ftl_train.batching import apply_global_batch, plan_batch
from ftl_train.hparams import HyperparameterError, parse


@pytest.mark.parametrize(
    "global_batch, devices, cap, per_device, accumulation",
    [
        (64, 8, 16, 8, 1),  # fits under the cap
        (64, 4, 8, 8, 2),  # half the GPUs: twice the accumulation
        (64, 1, 16, 16, 4),
        (48, 8, 4, 3, 2),  # 6 per device: largest divisor of 6 at most 4 is 3
        (14, 2, 4, 1, 7),  # 7 per device is prime: micro-batches of 1
        (8, 8, 16, 1, 1),
    ],
)
def test_largest_micro_batch_under_the_cap_that_divides_evenly(
    global_batch, devices, cap, per_device, accumulation
):
    plan = plan_batch(global_batch, devices, cap)
    assert (plan.per_device, plan.accumulation) == (per_device, accumulation)
    assert plan.per_device * plan.accumulation * plan.devices == global_batch
    assert plan.per_device <= cap


@pytest.mark.parametrize("global_batch, devices", [(64, 3), (4, 8), (1, 2)])
def test_a_global_batch_the_devices_do_not_divide_is_refused_by_name(global_batch, devices):
    with pytest.raises(HyperparameterError) as err:
        plan_batch(global_batch, devices, 16)
    assert f"global_batch_size={global_batch}" in str(err.value)
    assert f"multiple of {devices}" in str(err.value)


def test_apply_counts_processes_times_gpus_per_process():
    hp = parse(["--task", "qa", "--global_batch_size", "32", "--per_device_train_batch_size", "4"])
    # one process driving 4 GPUs (the Trainer's DataParallel): 4 devices
    args = SimpleNamespace(
        world_size=1, n_gpu=4, per_device_train_batch_size=4, gradient_accumulation_steps=1
    )
    plan = apply_global_batch(hp, args)
    assert plan is not None and plan.devices == 4
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 2)
    # 2 processes on a CPU (n_gpu 0): 2 devices
    args = SimpleNamespace(
        world_size=2, n_gpu=0, per_device_train_batch_size=4, gradient_accumulation_steps=1
    )
    assert apply_global_batch(hp, args).as_dict() == {
        "global_batch_size": 32,
        "devices": 2,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 4,
    }
    # unset: the hyperparameters' own values stay
    args = SimpleNamespace(
        world_size=2, n_gpu=0, per_device_train_batch_size=4, gradient_accumulation_steps=3
    )
    assert apply_global_batch(parse(["--task", "qa"]), args) is None
    assert args.gradient_accumulation_steps == 3


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--global_batch_size", "0"], "global_batch_size=0 is out of range"),
        (
            ["--global_batch_size", "64", "--gradient_accumulation_steps", "2"],
            "gradient_accumulation_steps cannot be set with global_batch_size",
        ),
    ],
)
def test_bad_global_batch_hyperparameters(argv, fragment):
    with pytest.raises(HyperparameterError) as err:
        parse(["--task", "qa", *argv])
    assert fragment in str(err.value)


def _sharded_checkpoint(root, saved_world):
    path = root / "checkpoint-4"
    for folder in ("pytorch_model_fsdp_0", "optimizer_0"):
        (path / folder).mkdir(parents=True)
        (path / folder / ".metadata").write_bytes(b"m")
        for rank in range(saved_world):
            (path / folder / f"__{rank}_0.distcp").write_bytes(b"s")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    checkpoints.mark_complete(str(path), {"world_size": saved_world})
    return path


def test_a_sharded_checkpoint_is_complete_whatever_the_world_size_now(tmp_path, monkeypatch):
    path = _sharded_checkpoint(tmp_path, 2)
    for world in ("1", "3", "16"):
        monkeypatch.setenv("WORLD_SIZE", world)
        assert checkpoints.newest_complete(str(tmp_path)) == str(path)
    # one rank's shard missing (its node never uploaded): not complete
    (path / "optimizer_0" / "__1_0.distcp").unlink()
    assert checkpoints.newest_complete(str(tmp_path)) is None


def test_a_sharded_checkpoint_without_fsdp_is_refused_by_name(tmp_path):
    path = _sharded_checkpoint(tmp_path, 2)
    checkpoints.check_resumable(str(path), fsdp_enabled=True)  # any process count reshards
    checkpoints.check_resumable(None, fsdp_enabled=False)
    with pytest.raises(checkpoints.CheckpointError) as err:
        checkpoints.check_resumable(str(path), fsdp_enabled=False)
    assert "optimizer_0, pytorch_model_fsdp_0" in str(err.value)
    assert "saved by 2 processes" in str(err.value) and "fsdp" in str(err.value)
