"""Build each template's Trainer "as on" a GPU family, in one image's package set (issue 34).

Run by ``test_as_on_gpu.py`` with the image environment's Python (3.9 and up; standard
library, the image's packages, ``training/`` and ``tests/training``'s builders):

    <env>/bin/python tests/images/as_on.py SPEC.json OUT.json

SPEC lists the cases of one image: per template and GPU family, the rendered
hyperparameters (decoded, with the tiny model and small step counts), the environment the
training toolkit gives rank 0 of the job (``SM_*``, the launcher's rank variables) and the
family's capabilities from ``jobmodel.instances.GPU_FAMILIES``. For each case the training
entrypoint's own ``prepare_run`` runs with ``DeviceCaps`` of that family: it resolves
precision, attention, compile and kernels, builds ``TrainingArguments`` and the Trainer,
with the stand-ins of the image's closed libraries on the path. Nothing trains: a CPU cannot
run the family's kernels, so the run stops once the Trainer is built. What each case
resolved and what the Trainer ended with (the SMP v1 Trainer replaces ``fp16``), or the
error that stopped it, goes to OUT.

CUDA is faked only where the libraries ask the device (``emulate``):

- ``torch.cuda``: available, one device of the family's compute capability, name and bf16
  support; ``set_device``/``synchronize`` do nothing (nothing is placed on it);
- transformers' and accelerate's ``is_torch_bf16_gpu_available``/``is_torch_tf32_available``
  answer for the family (they also look at ``torch.version.cuda``, None in a CPU build);
- ``Trainer._move_model_to_device`` leaves the model on the CPU;
- ``torch.distributed.init_process_group``: the job's world (rank 0 of ``WORLD_SIZE``) on
  torch's single-process ``fake`` backend (torch >= 2.1) instead of NCCL; the backend asked
  for is recorded, and smddp's stand-in still checks it is ``smddp``;
- ``defaults.flash_attention_available`` says whether the image's package set ships
  flash-attn (it is a CUDA build, not installed in the CPU environment), so attention
  resolves as in the image; loading then falls back to eager on the CPU, which is reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "training"))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402  (tiny models and generated records, shared with the matrix)


class _Patches:
    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        self._undo.append((obj, name, getattr(obj, name, None)))
        setattr(obj, name, value)

    def undo(self) -> None:
        for obj, name, old in reversed(self._undo):
            setattr(obj, name, old)
        self._undo.clear()


def _fake_init_process_group(original: Any, record: list) -> Any:
    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        record.append(str(backend))
        try:
            from torch.testing._internal.distributed.fake_pg import FakeStore
        except ImportError:  # torch < 2.1: no fake backend; a real gloo group of one
            return original("gloo", *args, **kwargs)
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
        kwargs.pop("init_method", None)
        for key in ("rank", "world_size", "store"):
            kwargs.pop(key, None)
        return original("fake", store=FakeStore(), rank=rank, world_size=world, **kwargs)

    return init_process_group


@contextlib.contextmanager
def emulate(gpu: dict, ships_flash_attn: bool, backends: list) -> Iterator[None]:
    import torch
    import torch.distributed as dist
    import transformers

    p = _Patches()
    cc = tuple(gpu["compute_capability"])
    props = SimpleNamespace(
        name=gpu["name"],
        major=cc[0],
        minor=cc[1],
        total_memory=80 << 30,
        multi_processor_count=108,
    )
    cuda = torch.cuda
    p.set(cuda, "is_available", lambda: True)
    p.set(cuda, "device_count", lambda: 1)
    p.set(cuda, "current_device", lambda: 0)
    p.set(cuda, "get_device_capability", lambda device=None: cc)
    p.set(cuda, "get_device_name", lambda device=None: gpu["name"])
    p.set(cuda, "get_device_properties", lambda device=None: props)
    p.set(cuda, "is_bf16_supported", lambda *a, **k: bool(gpu["bf16"]))
    for name in ("set_device", "synchronize", "empty_cache"):
        p.set(cuda, name, lambda *a, **k: None)
    answers = {
        "is_torch_bf16_gpu_available": bool(gpu["bf16"]),
        "is_torch_tf32_available": bool(gpu["tf32"]),
        "is_torch_cuda_available": True,
        "is_cuda_available": True,
        "is_bf16_available": bool(gpu["bf16"]),
    }
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not mod_name.startswith(("transformers", "accelerate")):
            continue
        for attr, value in answers.items():
            if callable(getattr(mod, attr, None)):
                p.set(mod, attr, (lambda v: lambda *a, **k: v)(value))
    p.set(transformers.Trainer, "_move_model_to_device", lambda self, model, device: None)
    if dist.is_available():
        p.set(
            dist, "init_process_group", _fake_init_process_group(dist.init_process_group, backends)
        )
        smddp = sys.modules.get("smdistributed.dataparallel.torch.torch_smddp")
        if smddp is not None:  # imported by an earlier case: its backend check goes on top again
            smddp._patch_init_process_group()
    from ftl_train import defaults

    p.set(defaults, "flash_attention_available", lambda: ships_flash_attn)
    try:
        yield
    finally:
        p.undo()


def _reset_distributed() -> None:
    """Between cases: no process group, no accelerate state, no SMP v1 state."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    try:
        from accelerate.state import AcceleratorState, PartialState

        AcceleratorState._reset_state(True)
        PartialState._reset_state()
    except (ImportError, AttributeError, TypeError):
        pass
    smp = sys.modules.get("smdistributed.modelparallel.torch")
    if smp is not None:
        smp.reset()
        smp.init()  # as transformers' training_args does at import, for this case's job


def _tiny_model(path: Path, family: str, task: str, num_labels: int, heads: int | None) -> Path:
    """The template's tiny model; ``heads``: the real model's head count (tensor parallelism
    splits by heads, so the degree must meet the real count)."""
    if not heads:
        return harness.make_model(path, family, task, num_labels)
    import transformers

    cfg = harness._encoder_config(family, len(harness.tl.VOCAB))
    if family != "gpt2":
        raise ValueError(f"head count override for {family} is not implemented")
    cfg.n_head, cfg.n_embd = heads, 2 * heads
    path.mkdir(parents=True, exist_ok=True)
    transformers.set_seed(0)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(str(path))
    harness.tl.make_tokenizer().save_pretrained(str(path))
    return path


def _lay_out(case: dict, work: Path) -> dict[str, str]:
    """Channels and model under ``work``; returns the channel variables."""
    hp = case["hyperparameters"]
    task = hp["task"]
    env = {}
    for name in case["channels"]:
        folder = work / "data" / name
        if name == "model":
            _tiny_model(folder, case["family"], task, int(hp.get("num_labels", 3)), None)
        else:
            recs = harness.records(task, hp, 16 if name == "train" else 8, 1)
            harness.tl.write_records(recs, folder, "jsonl")
        env["SM_CHANNEL_" + name.upper()] = str(folder)
    if "model" not in case["channels"]:
        model = _tiny_model(
            work / "model-in",
            case["family"],
            task,
            int(hp.get("num_labels", 3)),
            case.get("heads"),
        )
        hp["model_name_or_path"] = str(model)
    hp["checkpoint_dir"] = str(work / "checkpoints")
    env.update(
        {
            "SM_MODEL_DIR": str(work / "model"),
            "SM_OUTPUT_DATA_DIR": str(work / "output"),
            "SM_HPS": json.dumps(hp),
        }
    )
    return env


def _summary(run: Any, backends: list) -> dict:
    args, perf, trainer = run.args, run.perf, run.trainer
    model = trainer.model
    config = getattr(model, "config", None)
    return {
        "resolved": {
            "bf16": perf.bf16,
            "fp16": perf.fp16,
            "tf32": perf.tf32,
            "attention": perf.attn_implementation,
            "torch_compile": perf.torch_compile,
            "loss_kernel": perf.loss_kernel,
            "optim": perf.optim,
            "gradient_checkpointing": perf.gradient_checkpointing,
        },
        # what the Trainer holds after its own checks (SMP v1 replaces fp16)
        "trainer": {
            "bf16": bool(args.bf16),
            "fp16": bool(args.fp16),
            "device": str(args.device),
            "world_size": int(args.world_size),
            "parallel_mode": str(args.parallel_mode),
            "attention_loaded": str(getattr(config, "_attn_implementation", None)),
            "class": type(trainer).__name__,
        },
        "backends": list(backends),
    }


def _smp_v1_wrap(trainer: Any) -> list:
    """Under SMP v1 the model is split when the Trainer wraps it in ``smp.DistributedModel``
    (the first thing ``train()`` does): wrapped here too, so the split is checked."""
    from transformers.utils import is_sagemaker_mp_enabled

    if not is_sagemaker_mp_enabled():
        return []
    smp = sys.modules["smdistributed.modelparallel.torch"]
    trainer._wrap_model(trainer.model)
    return list(smp.state.tp_split)


def run_case(case: dict, root: Path, ships_flash_attn: bool) -> dict:
    from ftl_train.env import DeviceCaps
    from ftl_train.run import prepare_run

    work = root / f"{case['template']}--{case['gpu']['accelerator']}"
    saved = dict(os.environ)
    started = time.monotonic()
    backends: list = []
    try:
        os.environ.update(case["environment"])
        os.environ.update(_lay_out(case, work))
        gpu = case["gpu"]
        caps = DeviceCaps(cuda=True, bf16=gpu["bf16"], tf32=gpu["tf32"], name=gpu["name"])
        with emulate(gpu, ships_flash_attn, backends):
            _reset_distributed()
            run = prepare_run([], os.environ, caps=caps)
            result = {"ok": True, **_summary(run, backends)}
            result["tensor_parallel"] = _smp_v1_wrap(run.trainer)
            run.sigterm.uninstall()
    except BaseException as exc:  # noqa: BLE001 - every failure is this case's result
        result = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-3000:],
            "backends": backends,
        }
    finally:
        os.environ.clear()
        os.environ.update(saved)
        with contextlib.suppress(Exception):
            _reset_distributed()
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    root = Path(spec["work"])
    started = time.monotonic()
    smp_v1 = [
        c for c in spec["cases"] if "partitions" in c["environment"].get("SM_HP_MP_PARAMETERS", "")
    ]
    if smp_v1:  # transformers imports SMP v1 at its own import only when the job asks for it
        os.environ.update(
            {k: v for k, v in smp_v1[0]["environment"].items() if k.startswith("SM_")}
        )
    import transformers.trainer  # noqa: F401

    from ftl_train.run import setup_logging

    setup_logging(True)
    for key in list(os.environ):
        if key.startswith(("SM_HP_", "SM_FRAMEWORK", "SM_HOSTS")):
            del os.environ[key]
    imported = time.monotonic()
    results = {}
    for case in spec["cases"]:
        key = f"{case['template']}@{case['gpu']['accelerator']}"
        results[key] = run_case(case, root, spec["ships_flash_attn"])
    report = {
        "import_seconds": round(imported - started, 2),
        "seconds": round(time.monotonic() - started, 2),
        "cases": results,
    }
    Path(out_path).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
