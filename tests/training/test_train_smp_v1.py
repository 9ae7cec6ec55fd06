"""SMP v1 precision and tensor parallelism in the entrypoint, and attention by device (issue 34).

The Hugging Face Trainer of the SMP v1 image (transformers 4.26) refuses bf16 under SMP v1 and
trains with the SMP configuration's fp16; the entrypoint resolves precision from that
configuration (``parallel.smp_v1_precision``) and creates the model inside
``smp.tensor_parallelism()`` when a tensor-parallel degree is asked for. The image-side proof
(the Trainer built as on an A100 and a V100, and the split) is
tests/images/test_as_on_gpu.py.
"""

from __future__ import annotations

import json
import sys
import types

import pytest

from ftl_train import attention, defaults, hparams, parallel
from ftl_train.defaults import resolve
from ftl_train.env import DeviceCaps
from ftl_train.hparams import HyperparameterError

A100 = DeviceCaps(cuda=True, bf16=True, tf32=True, name="A100")
V100 = DeviceCaps(cuda=True, bf16=False, tf32=False, name="Tesla V100")
CPU = DeviceCaps(cuda=False, bf16=False, tf32=False, name="cpu")
MPI = json.dumps({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 8})


def _env(params: dict, framework: str = MPI) -> dict[str, str]:
    return {"SM_HP_MP_PARAMETERS": json.dumps(params), "SM_FRAMEWORK_PARAMS": framework}


def test_smp_v1_is_on_exactly_when_the_trainer_takes_its_path() -> None:
    assert parallel.smp_v1_parameters(_env({"partitions": 2})) == {"partitions": 2}
    assert parallel.smp_v1_parameters(_env({"partitions": 2}, "{}")) is None  # no MPI
    assert parallel.smp_v1_parameters(_env({"tensor_parallel_degree": 2})) is None  # SMP v2
    assert parallel.smp_v1_parameters({}) is None


@pytest.mark.parametrize("caps", [A100, V100])
def test_precision_under_smp_v1_is_smps_fp16_never_bf16(caps: DeviceCaps) -> None:
    hp = hparams.parse(["--task", "classification"])
    perf = resolve(hp, caps, {"partitions": 4, "fp16": True})
    assert (perf.bf16, perf.fp16) == (False, True)  # bf16 would be picked on an A100 otherwise
    perf = resolve(hp, caps, {"partitions": 4})
    assert (perf.bf16, perf.fp16) == (False, False)  # SMP trains fp32 without its fp16
    assert resolve(hp, A100).bf16 is True  # without SMP v1 an A100 gets bf16


@pytest.mark.parametrize(
    "argv, params, caps, words",
    [
        (["--bf16", "true"], {"partitions": 1, "fp16": True}, A100, "bf16"),
        ([], {"partitions": 1, "bf16": True}, A100, "bf16"),
        (["--fp16", "true"], {"partitions": 1}, A100, "contradicts mp_parameters fp16=false"),
        (["--fp16", "false"], {"partitions": 1, "fp16": True}, A100, "contradicts"),
        ([], {"partitions": 1, "fp16": True}, CPU, "needs a CUDA GPU"),
    ],
)
def test_smp_v1_precision_conflicts_name_the_setting(
    argv: list[str], params: dict, caps: DeviceCaps, words: str
) -> None:
    hp = hparams.parse(["--task", "clm", *argv])
    with pytest.raises(HyperparameterError, match=words):
        resolve(hp, caps, params)


def test_model_is_created_inside_tensor_parallelism_when_a_degree_is_asked(monkeypatch) -> None:
    entered: list[str] = []

    class Ctx:
        def __enter__(self) -> None:
            entered.append("in")

        def __exit__(self, *exc: object) -> None:
            entered.append("out")

    root = types.ModuleType("smdistributed")
    mp = types.ModuleType("smdistributed.modelparallel")
    smp = types.ModuleType("smdistributed.modelparallel.torch")
    smp.tensor_parallelism = Ctx  # type: ignore[attr-defined]
    root.modelparallel, mp.torch = mp, smp  # type: ignore[attr-defined]
    for name, module in (("smdistributed", root), (mp.__name__, mp), (smp.__name__, smp)):
        monkeypatch.setitem(sys.modules, name, module)
    with parallel.smp_v1_model_creation(_env({"partitions": 1, "tensor_parallel_degree": 4})):
        entered.append("create")
    assert entered == ["in", "create", "out"]
    entered.clear()
    with parallel.smp_v1_model_creation(_env({"partitions": 2})):  # no TP: nothing to enter
        entered.append("create")
    assert entered == ["create"]


def test_tensor_parallel_degree_must_divide_the_heads() -> None:
    parallel.check_tensor_parallel_heads(types.SimpleNamespace(n_head=20), 4)
    parallel.check_tensor_parallel_heads(types.SimpleNamespace(n_head=25), 1)
    with pytest.raises(HyperparameterError, match="does not divide the model's 25 attention"):
        parallel.check_tensor_parallel_heads(types.SimpleNamespace(n_head=25, model_type="gpt2"), 8)


def test_attention_by_device_and_library(monkeypatch) -> None:
    """FlashAttention-2 only on compute capability 8.0+ (tf32 in DeviceCaps); the varlen
    kernel only where transformers can register it (not the SMP v2 image's 4.44)."""
    half = hparams.parse(["--task", "sft", "--bf16", "false", "--fp16", "true"])
    monkeypatch.setattr(defaults, "flash_attention_available", lambda: True)
    assert resolve(half, A100).attn_implementation == "flash_attention_2"
    assert resolve(half, V100).attn_implementation != "flash_attention_2"
    monkeypatch.setattr(defaults, "flash_attention_available", lambda: False)
    assert resolve(half, A100).attn_implementation == attention.NAME
    monkeypatch.setattr(attention, "available", lambda: False)
    assert resolve(half, A100).attn_implementation == "sdpa"
    with pytest.raises(HyperparameterError, match="attn_implementation=varlen needs"):
        attention.register()
