"""The closed SageMaker distribution libraries' test-only stand-ins (tests/images/standins/)
make the HF Trainer really take each library's path, in the environment of an image that
ships the library.

Each test starts the image environment's Python (``testsupport.image_envs``; built when
missing) on ``standins/check_trainer.py`` (a tiny BERT classifier from a config, generated
tensors, 4 steps on the CPU, a checkpoint every 2 steps, an evaluation), with the
environment variables SageMaker's toolkit sets for that distribution and the stand-in's
folder on ``PYTHONPATH``, as the image matrix puts it. Every stand-in call lands in a trace
file (``FTL_STANDIN_TRACE``), so the tests assert the path was taken, not only that training
ran. What the stand-ins do not prove is in each one's package docstring.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from image_sets import all_sets
from testsupport import image_envs

pytestmark = [pytest.mark.slow, pytest.mark.images, pytest.mark.xdist_group("images")]

HERE = Path(__file__).resolve().parent
STANDINS = HERE / "standins"
CHECK = STANDINS / "check_trainer.py"
SMDDP = STANDINS / "smdistributed-dataparallel"
SMP_V1 = STANDINS / "smdistributed-modelparallel"
SMP_V2 = STANDINS / "torch-sagemaker"

IMAGE_PT113 = "huggingface-pytorch-training__1.13.1-transformers4.26.0-gpu-py39-cu117-ubuntu20.04"
IMAGE_PT251 = "huggingface-pytorch-training__2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04"
IMAGE_SMP_V2 = "smdistributed-modelparallel__2.5.1-gpu-py311-cu124"

# What SageMaker's toolkit exports for each distribution (as SDK v2 renders it).
SMP_V1_ENV = {
    "SM_HP_MP_PARAMETERS": json.dumps(
        {"partitions": 4, "microbatches": 2, "pipeline": "interleaved", "ddp": True}
    ),
    "SM_FRAMEWORK_PARAMS": json.dumps(
        {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 8}
    ),
}
SMDDP_ENV = {
    "SM_FRAMEWORK_PARAMS": json.dumps(
        {
            "sagemaker_distributed_dataparallel_enabled": True,
            "sagemaker_instance_type": "ml.p4d.24xlarge",
            "sagemaker_distributed_dataparallel_custom_mpi_options": "",
        }
    ),
    # accelerate takes the device from here; with use_cpu it would skip smddp altogether.
    "ACCELERATE_TORCH_DEVICE": "cpu",
}
SMP_V2_ENV = {
    # Degree 1: the check model is BERT, which SMP v2's tensor parallelism does not support
    # (the stand-in refuses it with a degree above 1: test_standin_contracts.py).
    "SM_HP_MP_PARAMETERS": json.dumps(
        {
            "tensor_parallel_degree": 1,
            "hybrid_shard_degree": 0,
            "sm_activation_offloading": True,
            "activation_loading_horizon": 2,
        }
    ),
    "SM_FRAMEWORK_PARAMS": json.dumps(
        {
            "sagemaker_distributed_dataparallel_enabled": False,
            "sagemaker_instance_type": "ml.p4d.24xlarge",
            "sagemaker_torch_distributed_enabled": True,
        }
    ),
}


def _python(name: str) -> Path:
    image_set = all_sets()[name]
    return image_envs.ensure(image_set)


def _shipped(name: str, library: str) -> None:
    """The stand-in is only put where the image's package-set file says the library is."""
    assert all_sets()[name].ships(library), f"{name} does not ship {library}"


def _env(work: Path, stand_ins: list[Path], extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SM_", "SMDATAPARALLEL", "OMPI_", "PMI_", "ACCELERATE_"))
        and k
        not in (
            "PYTHONPATH",
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
            "LOCAL_WORLD_SIZE",
            "FTL_STANDIN_TRACE",
        )
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(str(p) for p in stand_ins),
            "FTL_STANDIN_TRACE": str(work / "trace.jsonl"),
            "CUDA_VISIBLE_DEVICES": "",
            "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(work / "hf"),
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    return env


def _run(python: Path, args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [str(python), *args], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done.stdout


def _train(python: Path, work: Path, mode: str, env: dict[str, str], *extra: str) -> dict:
    out = work / f"result-{len(list(work.glob('result-*')))}.json"
    _run(
        python,
        [str(CHECK), "--mode", mode, "--work", str(work), "--out", str(out), *extra],
        env,
        work,
    )
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["finite"] and len(result["losses"]) == 4, result
    assert all(math.isfinite(x) for x in result["losses"]), result
    assert result["global_step"] == 4
    assert math.isfinite(result["eval_loss"])
    return result


def _trace(work: Path) -> list[dict]:
    path = work / "trace.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return [json.loads(line) for line in lines]


def test_smp_v1_stand_in_runs_the_trainers_model_parallel_path_and_resumes(tmp_path: Path):
    """transformers 4.26's Trainer in the PyTorch 1.13 image takes its SMP path: smp.init at
    import, DistributedModel/DistributedOptimizer, every step through smp.step in 2
    microbatches, checkpoints through smp.save; a new process resumes through
    smp.resume_from_checkpoint and the post-step optimizer hook with smp.load, and its
    steps 3-4 give the uninterrupted run's losses."""
    _shipped(IMAGE_PT113, "smdistributed-modelparallel")
    python = _python(IMAGE_PT113)
    env = _env(tmp_path, [SMP_V1, SMDDP], SMP_V1_ENV)

    first = _train(python, tmp_path, "smp", env)
    assert first["transformers"] == "4.26.0"
    assert first["parallel_mode"] == "ParallelMode.SAGEMAKER_MODEL_PARALLEL"
    assert first["model_wrapped"] == "smdistributed.modelparallel.torch.model.DistributedModel"
    assert first["optimizer"].endswith("DistributedOptimizer[AdamW]")
    assert first["optimizer_is_torch"]
    calls = _trace(tmp_path)
    counts = Counter(c["call"] for c in calls)
    init = next(c for c in calls if c["call"] == "init")
    assert init["parameters"]["partitions"] == 4
    assert counts["DistributedModel"] == 1 and counts["DistributedOptimizer"] == 1
    steps = [c for c in calls if c["call"] == "step"]
    assert {c["function"] for c in steps} == {"smp_forward_backward", "smp_forward_only"}
    assert sum(c["function"] == "smp_forward_backward" for c in steps) == 4
    assert all(c["microbatches"] == 2 for c in steps)
    assert counts["allgather"] >= 1  # evaluation gathers through smp_gather
    saves = [c for c in calls if c["call"] == "save"]
    assert len(saves) == 2 and all(c["partial"] for c in saves)
    checkpoint = tmp_path / "out" / "checkpoint-2"
    assert (checkpoint / "user_content.pt").is_file()
    assert (checkpoint / "optimizer.pt_0_0").is_file()

    resumed = _train(python, tmp_path, "smp", env, "--resume-from", str(checkpoint))
    calls = _trace(tmp_path)
    counts = Counter(c["call"] for c in calls)
    resume = next(c for c in calls if c["call"] == "resume_from_checkpoint")
    assert resume["partial"] is False and resume["tag"] == "pytorch_model.bin"
    assert counts["post_step_hook"] == 1 and counts["load"] == 1
    assert counts["DistributedOptimizer.load_state_dict"] == 1
    assert sum(c["call"] == "step" and c["function"] == "smp_forward_backward" for c in calls) == 2
    assert resumed["losses"] == pytest.approx(first["losses"], abs=1e-3)


def test_smddp_stand_in_runs_the_trainers_data_parallel_path(tmp_path: Path):
    """transformers 4.49 / accelerate 1.4 in the PyTorch 2.5.1 image import torch_smddp,
    initialise the process group with backend smddp and wrap the model in DDP with
    ``device_ids=[SMDATAPARALLEL_LOCAL_RANK]`` (dropped for the CPU module by the stand-in)."""
    _shipped(IMAGE_PT251, "smdistributed-dataparallel")
    python = _python(IMAGE_PT251)
    env = _env(tmp_path, [SMDDP], SMDDP_ENV)

    result = _train(python, tmp_path, "smddp", env)
    assert result["transformers"] == "4.49.0"
    assert result["parallel_mode"] == "ParallelMode.SAGEMAKER_DATA_PARALLEL"
    assert result["dist_backend"] == "smddp"
    assert result["model_wrapped"] == "torch.nn.parallel.distributed.DistributedDataParallel"
    counts = Counter(c["call"] for c in _trace(tmp_path))
    assert counts["import torch_smddp"] == 1
    assert counts["backend.create"] == 1
    assert counts["ddp.cpu_module"] >= 1


SMDDP_LOW_LEVEL = textwrap.dedent(
    """
    import json, torch, torch.distributed as dist
    import smdistributed.dataparallel.torch.torch_smddp  # what transformers 4.26 imports
    import smdistributed.modelparallel.torch as smp  # the same namespace package, other folder
    import smdistributed.dataparallel.torch.distributed as legacy
    from smdistributed.dataparallel import exceptions
    from transformers.utils import is_sagemaker_dp_enabled
    dist.init_process_group(backend="smddp")
    t = torch.arange(3.0)
    dist.all_reduce(t)
    dist.barrier()
    print(json.dumps({
        "backend": str(dist.get_backend()),
        "sum": t.tolist(),
        "legacy": [legacy.get_rank(), legacy.get_world_size(), legacy.get_local_rank()],
        "dp_enabled": is_sagemaker_dp_enabled(),
        "smp": smp.__name__,
        "exceptions": sorted(n for n in dir(exceptions) if n.endswith("Error")),
    }))
    """
)


def test_smddp_backend_and_namespace_package_in_the_pytorch_1_13_image(tmp_path: Path):
    """torch 1.13's register_backend takes the stand-in's smddp backend; smddp and SMP v1 both
    import from their own folders (``smdistributed`` is a namespace package)."""
    _shipped(IMAGE_PT113, "smdistributed-dataparallel")
    python = _python(IMAGE_PT113)
    env = _env(tmp_path, [SMDDP, SMP_V1], {"SM_FRAMEWORK_PARAMS": SMDDP_ENV["SM_FRAMEWORK_PARAMS"]})
    out = _run(python, ["-c", SMDDP_LOW_LEVEL], env, tmp_path)
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen == {
        "backend": "smddp",
        "sum": [0.0, 1.0, 2.0],
        "legacy": [0, 1, 0],
        "dp_enabled": True,
        "smp": "smdistributed.modelparallel.torch",
        "exceptions": ["SMDDPError", "SMDDPInitError"],
    }
    assert not (SMDDP / "smdistributed" / "__init__.py").exists()
    assert not (SMP_V1 / "smdistributed" / "__init__.py").exists()


def test_smp_v2_stand_in_is_imported_as_torch_sagemaker_and_the_trainer_trains(tmp_path: Path):
    """In the SMP v2 image (torch 2.5.1, transformers 4.44.2) ``import torch.sagemaker`` finds
    the stand-in through its sitecustomize; init reads the job's parameters, transform runs on
    the model, and the Trainer trains the transformed model."""
    _shipped(IMAGE_SMP_V2, "torch-sagemaker")
    python = _python(IMAGE_SMP_V2)
    env = _env(tmp_path, [SMP_V2, SMDDP], SMP_V2_ENV)

    result = _train(python, tmp_path, "tsm", env)
    assert result["transformers"] == "4.44.2"
    assert result["tsm_transformed"] == ["BertForSequenceClassification"]
    calls = _trace(tmp_path)
    init = next(c for c in calls if c["call"] == "init")
    assert init["parameters"] == json.loads(SMP_V2_ENV["SM_HP_MP_PARAMETERS"])
    assert init["unknown_keys"] == []
    assert [c["call"] for c in calls] == ["init", "transform"]


def test_torch_sagemaker_comes_only_from_the_stand_in_and_keeps_another_sitecustomize(
    tmp_path: Path,
):
    """Without the folder on PYTHONPATH there is no torch.sagemaker (so a passing test above
    used the stand-in); with it, a sitecustomize later on the path still runs."""
    python = _python(IMAGE_SMP_V2)
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['FTL_OTHER_SITE'] = '1'\n")
    probe = (
        "import os, importlib.util, torch\n"
        "spec = importlib.util.find_spec('torch.sagemaker')\n"
        "print(spec is not None and spec.origin, os.environ.get('FTL_OTHER_SITE'))\n"
    )
    bare = _run(python, ["-c", probe], _env(tmp_path, [other], {}), tmp_path)
    assert bare.split() == ["False", "1"]
    both = _run(python, ["-c", probe], _env(tmp_path, [SMP_V2, other], {}), tmp_path)
    origin, marker = both.split()
    assert origin == str(SMP_V2 / "ftl_torch_sagemaker_standin" / "__init__.py")
    assert marker == "1"


@pytest.mark.parametrize(
    "params, message",
    [
        ({"hybrid_shard_degree": 4}, "hybrid_shard_degree must be between 0 and the world size"),
        ({"tensor_parallel_degree": 0}, "tensor_parallel_degree must be >= 1"),
    ],
)
def test_torch_sagemaker_stand_in_refuses_impossible_parameters(
    tmp_path: Path, params: dict, message: str
):
    python = _python(IMAGE_SMP_V2)
    env = _env(tmp_path, [SMP_V2], {"SM_HP_MP_PARAMETERS": json.dumps(params)})
    done = subprocess.run(
        [str(python), "-c", "import torch.sagemaker as t; t.init()"],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and message in done.stderr


def test_smp_v1_stand_in_refuses_what_one_process_cannot_do(tmp_path: Path):
    """More than one process, a batch the microbatches do not divide, and a model call outside
    smp.step all fail by name (the real library refuses the last two as well)."""
    python = _python(IMAGE_PT113)
    script = textwrap.dedent(
        """
        import os, torch
        import smdistributed.modelparallel.torch as smp
        from smdistributed.modelparallel.torch.exceptions import (
            SMPUnsupportedError, SMPValidationError, StepUsageError)
        os.environ["OMPI_COMM_WORLD_SIZE"] = "8"
        try:
            smp.init()
        except SMPUnsupportedError as e:
            print("world:", e)
        del os.environ["OMPI_COMM_WORLD_SIZE"]
        smp.init()
        model = smp.DistributedModel(torch.nn.Linear(2, 1))
        try:
            model(torch.ones(1, 2))
        except StepUsageError:
            print("outside-step: refused")

        @smp.step
        def train_step(model, x):
            loss = model(x).sum()
            model.backward(loss)
            return loss

        try:
            train_step(model, torch.ones(3, 2))
        except SMPValidationError as e:
            print("split:", e)
        out = train_step(model, torch.ones(4, 2))
        print("microbatches:", len(out.outputs), type(out).__name__)
        """
    )
    env = _env(
        tmp_path,
        [SMP_V1],
        {
            "SM_HP_MP_PARAMETERS": json.dumps({"partitions": 2, "microbatches": 2}),
            "SM_FRAMEWORK_PARAMS": json.dumps({"sagemaker_mpi_num_of_processes_per_host": 2}),
        },
    )
    out = _run(python, ["-c", script], env, tmp_path)
    assert "world: the SMP v1 stand-in runs one process; this launch has 8" in out
    assert "outside-step: refused" in out
    assert "split: batch size 3 (axis 0) is not divisible by microbatches 2" in out
    assert "microbatches: 2 StepOutput" in out


def test_smddprun_exports_each_ranks_environment_from_open_mpi(tmp_path: Path):
    """The toolkit's ``mpirun ... smddprun python ...``: the stand-in launcher gives each rank
    the variables accelerate and the Trainer read (LOCAL_RANK, SMDATAPARALLEL_LOCAL_RANK)."""
    env = _env(
        tmp_path,
        [],
        {
            "OMPI_COMM_WORLD_RANK": "3",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        },
    )
    done = subprocess.run(
        [
            str(SMDDP / "bin" / "smddprun"),
            "sh",
            "-c",
            "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $SMDATAPARALLEL_LOCAL_RANK",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "4", "1", "2", "1"]
