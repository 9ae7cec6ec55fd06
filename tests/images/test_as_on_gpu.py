"""Every template's Trainer is built "as on" each GPU family its instance types have (issue 34,
item 3), in its image's package set.

For each template and each GPU family among its allowed instance types (the family's
capabilities from ``jobmodel.instances.GPU_FAMILIES``), the platform renders the request on
that instance type, and ``as_on.py`` runs the training entrypoint's ``prepare_run`` with that
family's ``DeviceCaps``: precision, attention, compile and kernels resolve as on the GPU,
then ``TrainingArguments`` and the Trainer are built by the image's transformers, with the
stand-ins of its closed libraries. A precision or library conflict (SMP v1 with bf16 on an
A100: transformers 4.26 refuses it) fails here. All cases of one image run in one Python
process, so torch and transformers are imported once per image.

What a CPU cannot show, and this does not claim: the family's kernels running (flash-attn,
fused AdamW, fp16/bf16 autocast, torch.compile), memory, NCCL/EFA. The GPU check
(``bench/gpu_check.py``) covers those on a real device.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import jobmodel as jm
from ftl_constructs.job_template import resolve_template_image
from image_sets import for_uri
from jobmodel.instances import GPU_FAMILIES, INSTANCE_TYPES, gpu_family
from tests.images.matrix import ROWS, STAND_IN_DIRS
from tests.images.test_image_matrix import PLATFORM, REGION
from testsupport import image_envs

pytestmark = [pytest.mark.slow, pytest.mark.images]  # spread over workers, as the matrix

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
WORKER = HERE / "as_on.py"

# Step counts of the built Trainer (nothing trains; they only have to be valid).
STEPS = {"max_steps": 4, "logging_steps": 1, "save_steps": 2}
# The real model's attention-head count where tensor parallelism splits by heads: the tiny
# model keeps it, so the template's degree meets the real count (gpt2-large: 20).
REAL_HEADS = {"gpt2-large": 20, "gpt2-xl": 25}


def _decoded(encoded: dict[str, str]) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in encoded.items()}


def _launch_env(kind: str, hosts: int, per_host: int) -> dict[str, str]:
    """Rank 0's launcher variables, as the toolkit's launch for the distribution sets them."""
    world = str(hosts * per_host)
    if kind == "smddp":  # mpirun ... smddprun: Open MPI's variables and what smddprun adds
        return {
            "OMPI_COMM_WORLD_RANK": "0",
            "OMPI_COMM_WORLD_SIZE": world,
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_host),
            "RANK": "0",
            "WORLD_SIZE": world,
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": str(per_host),
            "SMDATAPARALLEL_LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }
    if kind == "smp":  # the SMP v1 stand-in is rank 0 alone (it reads the job from SM_*)
        return {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}
    if kind in ("torchrun", "smp-v2"):
        return {
            "RANK": "0",
            "WORLD_SIZE": world,
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": str(per_host),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        }
    return {}


def case(name: str, instance_type: str) -> dict[str, Any]:
    shipped = jm.shipped_catalog()[name]
    image = resolve_template_image(REGION, shipped.framework, shipped.default_instance_type)
    spec = shipped.with_image(image)
    inputs = {c.name: f"s3://{PLATFORM.data_bucket}/{c.name}/" for c in spec.inputs}
    payload = {"template": name, "inputs": inputs, "instance_type": instance_type}
    req = jm.validate_submit(payload, {name: spec}, PLATFORM)
    request = jm.render_create_training_job(req, spec, PLATFORM, job_name=f"{name}-as-on")
    hp = _decoded(request["HyperParameters"])
    hosts = int(request["ResourceConfig"]["InstanceCount"])
    per_host = INSTANCE_TYPES[instance_type].accelerators
    environment = dict(request.get("Environment", {}))
    environment.update(
        {
            "SM_HOSTS": json.dumps([f"algo-{i + 1}" for i in range(hosts)]),
            "SM_CURRENT_HOST": "algo-1",
            "SM_NUM_GPUS": str(per_host),
            "SM_FRAMEWORK_PARAMS": json.dumps(
                {k: v for k, v in hp.items() if k.startswith("sagemaker_")}
            ),
        }
    )
    if "mp_parameters" in hp:
        environment["SM_HP_MP_PARAMETERS"] = json.dumps(hp["mp_parameters"])
    environment.update(_launch_env(spec.distribution.kind, hosts, per_host))
    family = gpu_family(instance_type)
    assert family is not None
    hp.update(STEPS)
    if "eval_steps" in hp:
        hp["eval_steps"] = STEPS["save_steps"]
    return {
        "template": name,
        "instance_type": instance_type,
        "image_set": for_uri(image).name,
        "family": ROWS[name].family,
        "heads": REAL_HEADS.get(str(hp.get("model_name_or_path"))),
        "hyperparameters": hp,
        "channels": [c["ChannelName"] for c in request.get("InputDataConfig", [])],
        "environment": environment,
        "gpu": {
            "accelerator": family.accelerator,
            "name": family.name,
            "compute_capability": list(family.compute_capability),
            "bf16": family.bf16,
            "tf32": family.tf32,
        },
    }


def cases_by_image() -> dict[str, list[dict[str, Any]]]:
    """Per image set: one case per template and GPU family (its first instance type of it)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, spec in sorted(jm.shipped_catalog().items()):
        seen: set[str] = set()
        for instance_type in spec.instance_types:
            family = gpu_family(instance_type)
            if family is None or family.accelerator in seen:
                continue
            seen.add(family.accelerator)
            c = case(name, instance_type)
            out[c["image_set"]].append(c)
    return dict(out)


def run_image(image_name: str, cases: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    from image_sets import all_sets

    image_set = all_sets()[image_name]
    python = image_envs.ensure(image_set)
    work.mkdir(parents=True, exist_ok=True)
    ships_flash = any(
        k in image_set.packages and not image_set.packages[k].get("absent")
        for k in ("flash-attn", "flash_attn")
    )
    spec = {"work": str(work), "cases": cases, "ships_flash_attn": ships_flash}
    (work / "spec.json").write_text(json.dumps(spec, indent=2))
    stand_ins = [str(REPO / p) for lib, p in STAND_IN_DIRS.items() if image_set.ships(lib)]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SM_", "OMPI_", "PMI_", "ACCELERATE_", "FTL_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "PYTHONPATH")
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(stand_ins),
            "FTL_STANDIN_TRACE": str(work / "trace.jsonl"),
            "FTL_CACHE_DIR": str(work / "cache"),
            "HF_HOME": str(work / "hf"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    started = time.monotonic()
    done = subprocess.run(
        [str(python), str(WORKER), str(work / "spec.json"), str(work / "out.json")],
        env=env,
        cwd=str(work),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    report: dict[str, Any] = json.loads((work / "out.json").read_text())
    report["wall_seconds"] = round(time.monotonic() - started, 1)
    trace = work / "trace.jsonl"
    report["trace"] = (
        [json.loads(x) for x in trace.read_text().splitlines()] if trace.exists() else []
    )
    return report


CASES = cases_by_image()


def test_every_template_has_cases_for_each_of_its_gpu_families() -> None:
    names = {c["template"] for cs in CASES.values() for c in cs}
    assert names == set(jm.shipped_catalog())
    families = {c["gpu"]["accelerator"] for cs in CASES.values() for c in cs}
    assert families <= set(GPU_FAMILIES) and {"nvidia-a100", "nvidia-v100"} <= families


@pytest.mark.parametrize("image_name", sorted(CASES))
def test_trainer_builds_as_on_each_gpu_family(image_name: str, tmp_path: Path) -> None:
    report = run_image(image_name, CASES[image_name], tmp_path / "as-on")
    results = report["cases"]
    print(
        f"\nas-on {image_name}: {len(results)} cases, {report['wall_seconds']} s wall, "
        f"{report['import_seconds']} s imports"
    )
    failed = {k: v["error"] + "\n" + v["traceback"] for k, v in results.items() if not v["ok"]}
    assert not failed, "\n\n".join(f"{k}: {v}" for k, v in failed.items())
    for key, got in results.items():
        template, accelerator = key.split("@")
        family = GPU_FAMILIES[accelerator]
        resolved, trainer = got["resolved"], got["trainer"]
        assert trainer["device"].startswith("cuda"), (key, got)
        # The Trainer trains in the precision the entrypoint resolved (SMP v1 would replace
        # fp16 with its own configuration's, so they must agree), and never bf16 on a GPU
        # without it.
        assert (trainer["bf16"], trainer["fp16"]) == (resolved["bf16"], resolved["fp16"]), key
        assert not trainer["bf16"] or family.bf16, key
        if not family.flash_attention:
            assert resolved["attention"] != "flash_attention_2", key
        kind = jm.shipped_catalog()[template].distribution.kind
        if kind == "smp":
            assert (trainer["bf16"], trainer["fp16"]) == (False, True), key
        if template == "gpt-tp-sharded":  # item 5: the model really is split, 5 heads a rank
            assert [
                (s["degree"], s["heads"], s["heads_per_rank"]) for s in got["tensor_parallel"]
            ] == [(4, 20, 5)], got["tensor_parallel"]
