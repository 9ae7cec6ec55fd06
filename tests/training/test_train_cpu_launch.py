"""How the entrypoint sets up a launcher-started CPU run (the image matrix's smddp and SMP v1
templates run under mpirun's environment with one rank; on a GPU nothing here changes)."""

from __future__ import annotations

from types import SimpleNamespace

import ftl_train_testlib  # noqa: F401  (puts training/ on sys.path)
import pytest

from ftl_train import arguments, compat

CPU = SimpleNamespace(cuda=False)
GPU = SimpleNamespace(cuda=True)
MPI_ONE_RANK = {"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}
SMDDP = {
    **MPI_ONE_RANK,
    "SM_FRAMEWORK_PARAMS": '{"sagemaker_distributed_dataparallel_enabled": true}',
}


def test_a_cpu_run_started_by_mpirun_names_gloo_even_for_one_rank():
    """transformers 4.26 sets up a CPU process group whenever a launcher's local rank is set,
    and refuses to without a backend ('CPU distributed training backend is not properly set')."""
    assert arguments.ddp_backend(CPU, MPI_ONE_RANK) == "gloo"
    assert arguments.ddp_backend(CPU, {}) is None  # plain python train.py
    assert arguments.ddp_backend(GPU, MPI_ONE_RANK) is None  # a GPU keeps its own choice


def test_smddp_keeps_the_trainers_own_backend_and_names_the_cpu_to_accelerate(monkeypatch):
    monkeypatch.delenv("ACCELERATE_TORCH_DEVICE", raising=False)
    monkeypatch.setattr(
        "ftl_train.env.smddp_available", lambda: True, raising=True
    )  # the stand-in or the real library
    assert arguments.ddp_backend(CPU, SMDDP) is None
    hp = SimpleNamespace(warmup_ratio=0.0, liger_kernel=False)
    perf = SimpleNamespace(cuda=False, liger_kernel=False)
    kw = arguments._optional(hp, perf, SimpleNamespace(), "none", SMDDP)
    assert "use_cpu" not in kw  # with use_cpu accelerate never sets smddp's group up
    import os

    assert os.environ["ACCELERATE_TORCH_DEVICE"] == "cpu"
    monkeypatch.delenv("ACCELERATE_TORCH_DEVICE")
    assert arguments._optional(hp, perf, SimpleNamespace(), "none", MPI_ONE_RANK)["use_cpu"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [({"ddp_backend"}, {"ddp_backend": "gloo"}), ({"xpu_backend"}, {"xpu_backend": "gloo"})],
)
def test_ddp_backend_is_xpu_backend_before_transformers_4_27(fields, expected):
    assert compat.training_arguments_kwargs({"ddp_backend": "gloo"}, fields) == expected


def test_eval_steps_defaults_to_save_steps_so_validation_data_never_refuses_a_template():
    """The LLM and DistilBERT templates save every 200 steps; with a validation channel the
    best-model reload is on, and a fixed eval_steps default of 500 refused them ('needs
    save_steps (200) to be a multiple of eval_steps (500)')."""
    from ftl_train import hparams
    from ftl_train.hparams import HyperparameterError

    hp = hparams.parse(["--task", "sft", "--save_steps", "200"], {})
    kw = arguments._evaluation(hp, has_eval=True)
    assert kw["eval_steps"] == 200 and kw["load_best_model_at_end"] is True
    assert "eval_steps" not in arguments._evaluation(hp, has_eval=False)
    given = hparams.parse(["--task", "sft", "--save_steps", "200", "--eval_steps", "500"], {})
    with pytest.raises(HyperparameterError, match="multiple of eval_steps"):
        arguments._evaluation(given, has_eval=True)  # an explicit choice is still checked
    with pytest.raises(HyperparameterError, match="eval_steps"):
        hparams.parse(["--task", "sft", "--eval_steps", "-1"], {})
