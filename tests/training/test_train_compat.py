"""ftl_train/compat.py: each version difference, both branches.

The newest branch runs against the project's own pins; the older API is faked with
monkeypatch and stand-in objects shaped like the older release's (named in each test).
The image environments run the older branches for real (the image matrix, tests/images).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import sys
import tarfile
import types
from pathlib import Path

import pytest
import torch
import transformers

from ftl_train import compat


def _patch_transformers(monkeypatch, name: str, value: object) -> None:
    """Replace ``transformers.<name>`` for ``from transformers import <name>``. The first
    access of a lazy attribute can put another module object into ``sys.modules`` (seen
    with Trainer on transformers 5.23), so the attribute is resolved first and the module
    that ``import`` will find is patched."""
    getattr(sys.modules["transformers"], name)
    monkeypatch.setattr(sys.modules["transformers"], name, value)


@pytest.fixture(autouse=True)
def _fresh_caches():
    compat._dtype_keyword.cache_clear()
    compat._selectable_attention.cache_clear()
    yield
    compat._dtype_keyword.cache_clear()
    compat._selectable_attention.cache_clear()


# ---------------------------------------------------------------------------- tar filters


def _tar(path: Path, members: dict[str, bytes], link: tuple[str, str] | None = None) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type = tarfile.SYMTYPE
            info.linkname = link[1]
            tar.addfile(info)
    return path


@pytest.mark.parametrize("filters", [True, False], ids=["py3.12-filters", "py3.9-no-filters"])
def test_safe_extract_unpacks_a_model_and_refuses_escapes(tmp_path, monkeypatch, filters):
    if not filters:  # an interpreter before 3.9.17 / 3.10.12 / 3.11.4
        monkeypatch.delattr(tarfile, "data_filter")
        calls = []
        real = tarfile.TarFile.extractall

        def extractall(self, path=".", members=None, *, numeric_owner=False, **kw):
            assert "filter" not in kw  # the old signature has none
            calls.append(path)
            return real(self, path, members, numeric_owner=numeric_owner, filter="fully_trusted")

        monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)
    good = _tar(tmp_path / "good.tar", {"model/config.json": b"{}"})
    with tarfile.open(good) as tar:
        compat.safe_extract(tar, str(tmp_path / "out"))
    assert (tmp_path / "out" / "model" / "config.json").read_bytes() == b"{}"
    if not filters:
        assert calls == [str(tmp_path / "out")]

    for bad in (
        _tar(tmp_path / "up.tar", {"../evil.txt": b"x"}),
        _tar(tmp_path / "link.tar", {}, link=("model/weights", "/etc/passwd")),
    ):
        with tarfile.open(bad) as tar, pytest.raises((tarfile.TarError, ValueError)):
            compat.safe_extract(tar, str(tmp_path / "out2"))
    assert not (tmp_path / "evil.txt").exists()


def test_a_model_archive_that_escapes_is_a_data_error(tmp_path, monkeypatch):
    from ftl_train import inputs, preprocess
    from ftl_train.data import DataError

    preprocess.configure_cache(str(tmp_path / "cache"))
    bad = _tar(tmp_path / "model.tar.gz", {"../evil.txt": b"x"})
    with pytest.raises(DataError, match="model archive"):
        inputs._extract_model_tarball(str(bad))


# ---------------------------------------------------------------------------- torch


def test_compiler_disable_wraps_on_torch2_and_is_identity_on_torch_1_13(monkeypatch):
    def f(x):
        return x + 1

    wrapped = compat.compiler_disable(f)
    assert wrapped is not f and wrapped(1) == 2  # torch.compiler.disable's wrapper

    monkeypatch.delattr(torch, "compiler")  # torch 1.13 has no torch.compiler
    assert compat.compiler_disable(f) is f


def test_autocast_dtype_new_api():
    assert compat.autocast_dtype("cpu") is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert compat.autocast_dtype("cpu") == torch.bfloat16


def test_autocast_dtype_per_device_functions_of_torch_before_2_4(monkeypatch):
    # torch < 2.4: no get_autocast_dtype(device); is_autocast_enabled() takes no argument
    # and means CUDA; the CPU has its own pair.
    monkeypatch.delattr(torch, "get_autocast_dtype")
    state = {"cpu": False, "cuda": True}
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda: state["cuda"])
    monkeypatch.setattr(torch, "get_autocast_gpu_dtype", lambda: torch.float16, raising=False)
    monkeypatch.setattr(torch, "is_autocast_cpu_enabled", lambda: state["cpu"], raising=False)
    monkeypatch.setattr(torch, "get_autocast_cpu_dtype", lambda: torch.bfloat16, raising=False)
    assert compat.autocast_dtype("cuda") == torch.float16
    assert compat.autocast_dtype("cpu") is None
    state.update(cpu=True, cuda=False)
    assert compat.autocast_dtype("cpu") == torch.bfloat16
    assert compat.autocast_dtype("cuda") is None


def test_fused_adamw_needs_torch_fused_and_the_trainer_choice(monkeypatch):
    assert compat.fused_adamw_available()

    class AdamW113(torch.optim.Optimizer):  # torch 1.13: no fused=
        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
            pass

    monkeypatch.setattr(torch.optim, "AdamW", AdamW113)
    assert not compat.fused_adamw_available()
    monkeypatch.undo()

    import enum

    from transformers import training_args

    Old = enum.Enum("OptimizerNames", {"ADAMW_HF": "adamw_hf", "ADAMW_TORCH": "adamw_torch"})
    monkeypatch.setattr(training_args, "OptimizerNames", Old)  # transformers 4.26's choices
    assert not compat.fused_adamw_available()


# ---------------------------------------------------------------------------- model loading


class _Config455:
    """PretrainedConfig of transformers <= 4.55: ``torch_dtype``, no selectable attention."""

    def to_dict(self) -> dict:
        return {"torch_dtype": None, "architectures": None}


def test_dtype_keyword_is_dtype_on_new_transformers_and_loads_that_dtype(tmp_path):
    assert compat.dtype_kwargs(torch.float16) == {"dtype": torch.float16}
    cfg = transformers.BertConfig(
        vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=8,
    )  # fmt: skip
    transformers.BertModel(cfg).save_pretrained(tmp_path)
    model = transformers.BertModel.from_pretrained(tmp_path, **compat.dtype_kwargs(torch.float16))
    assert next(model.parameters()).dtype == torch.float16


def test_dtype_keyword_is_torch_dtype_before_4_56(monkeypatch):
    _patch_transformers(monkeypatch, "PretrainedConfig", _Config455)
    assert compat.dtype_kwargs(torch.bfloat16) == {"torch_dtype": torch.bfloat16}
    assert compat.dtype_kwargs("auto") == {"torch_dtype": "auto"}


def test_attention_is_selected_where_transformers_can(monkeypatch, caplog):
    assert compat.attention_kwargs("sdpa") == {"attn_implementation": "sdpa"}

    _patch_transformers(monkeypatch, "PretrainedConfig", _Config455)  # 4.26: no choice
    compat._selectable_attention.cache_clear()
    with caplog.at_level(logging.WARNING, logger="ftl_train"):
        assert compat.attention_kwargs("sdpa") == {}
        assert not caplog.records
        assert compat.attention_kwargs("flash_attention_2") == {}
    assert "no attention choice" in caplog.text


def test_load_model_passes_the_keywords_this_transformers_takes(tmp_path, monkeypatch):
    from ftl_train import modelling
    from ftl_train.defaults import resolve
    from ftl_train.env import DeviceCaps
    from ftl_train.hparams import parse

    seen = {}

    class Auto:
        @staticmethod
        def from_pretrained(path, **kw):
            seen.update(kw)
            return types.SimpleNamespace(config=types.SimpleNamespace())

    monkeypatch.setattr(modelling, "model_auto_class", lambda task: Auto)
    hp = parse(["--task", "classification", "--model_name_or_path", "x"], {})
    perf = resolve(hp, DeviceCaps(cuda=False, bf16=False, tf32=False, name="cpu"))
    modelling.load_model(hp, "x", perf, {"num_labels": 3})
    assert seen == {"dtype": torch.float32, "attn_implementation": "sdpa", "num_labels": 3}

    seen.clear()
    _patch_transformers(monkeypatch, "PretrainedConfig", _Config455)
    compat._dtype_keyword.cache_clear()
    compat._selectable_attention.cache_clear()
    modelling.load_model(hp, "x", perf, {"num_labels": 3})
    assert seen == {"torch_dtype": torch.float32, "num_labels": 3}


# ---------------------------------------------------------------------------- Trainer


class _Trainer426:
    """transformers 4.26's Trainer surface: ``tokenizer=``, no accelerator, no
    ``optimizer_cls_and_kwargs``, no ``is_fsdp_enabled``."""

    def __init__(self, model=None, args=None, data_collator=None, tokenizer=None, callbacks=None):
        self.model = model
        self.args = args
        self.tokenizer = tokenizer
        self.fsdp = None


def test_trainer_tokenizer_keyword(monkeypatch):
    tok = object()
    assert compat.trainer_tokenizer_kwargs(tok) == {"processing_class": tok}
    assert compat.trainer_takes_optimizer_cls()
    _patch_transformers(monkeypatch, "Trainer", _Trainer426)
    assert compat.trainer_tokenizer_kwargs(tok) == {"tokenizer": tok}
    assert not compat.trainer_takes_optimizer_cls()


def test_trainer_tokenizer_attribute():
    tok = object()
    assert compat.trainer_tokenizer(types.SimpleNamespace(processing_class=tok)) is tok
    assert compat.trainer_tokenizer(_Trainer426(tokenizer=tok)) is tok


def test_fsdp_enabled_from_accelerate_or_the_trainers_own_list():
    assert compat.trainer_fsdp_enabled(types.SimpleNamespace(is_fsdp_enabled=True))
    assert not compat.trainer_fsdp_enabled(types.SimpleNamespace(is_fsdp_enabled=False))
    old = _Trainer426()
    assert not compat.trainer_fsdp_enabled(old)
    old.fsdp = ["full_shard"]
    assert compat.trainer_fsdp_enabled(old)


def test_unwrap_model_through_the_accelerator_or_module_chain():
    inner = torch.nn.Linear(2, 2)
    ddp_like = types.SimpleNamespace(module=types.SimpleNamespace(module=inner))

    class Acc:
        def unwrap_model(self, model):
            return ("unwrapped", model)

    assert compat.unwrap_model(types.SimpleNamespace(model=ddp_like, accelerator=Acc())) == (
        "unwrapped",
        ddp_like,
    )
    assert compat.unwrap_model(_Trainer426(model=ddp_like)) is inner
    assert compat.unwrap_model(_Trainer426(model=inner)) is inner


def test_barrier_accelerator_torch_distributed_or_smp_v1(monkeypatch):
    waits = []

    class Acc:
        def wait_for_everyone(self):
            waits.append("acc")

    compat.barrier(types.SimpleNamespace(accelerator=Acc()))
    assert waits == ["acc"]

    # transformers 4.26 (no accelerator): one process needs no barrier ...
    single = _Trainer426(args=types.SimpleNamespace(world_size=1))
    compat.barrier(single)
    # ... several wait on torch.distributed, or on SMP v1's own barrier when it runs the job
    import torch.distributed as dist

    multi = _Trainer426(args=types.SimpleNamespace(world_size=2))
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "barrier", lambda: waits.append("dist"))
    compat.barrier(multi)
    assert waits == ["acc", "dist"]

    smp = types.ModuleType("smdistributed.modelparallel.torch")
    smp.barrier = lambda: waits.append("smp")  # type: ignore[attr-defined]
    for name in ("smdistributed", "smdistributed.modelparallel"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "smdistributed.modelparallel.torch", smp)
    sys.modules["smdistributed.modelparallel"].torch = smp  # type: ignore[attr-defined]
    sys.modules["smdistributed"].modelparallel = sys.modules["smdistributed.modelparallel"]  # type: ignore[attr-defined]
    import transformers.utils

    monkeypatch.setattr(transformers.utils, "is_sagemaker_mp_enabled", lambda: True)
    compat.barrier(multi)
    assert waits == ["acc", "dist", "smp"]


# ---------------------------------------------------------------------------- TrainingArguments

NEW = {
    "eval_strategy": "steps",
    "activation_checkpointing": True,
    "activation_checkpointing_kwargs": {"use_reentrant": False},
    "use_cpu": True,
    "warmup_ratio": 0.1,
    "save_safetensors": True,
    "logging_dir": "/opt/ml/output/tensorboard",
    "ddp_backend": "nccl",
    "learning_rate": 1e-4,
}


def test_training_arguments_with_the_newest_names(caplog):
    fields = compat.training_fields()
    with caplog.at_level(logging.INFO, logger="ftl_train"):
        kw = compat.training_arguments_kwargs(NEW, fields)
    # transformers 5: warmup_ratio is warmup_steps (a float < 1 is a ratio); no logging_dir
    # or save_safetensors (always safetensors)
    want = dict(NEW)
    want["warmup_steps"] = want.pop("warmup_ratio")
    for gone in ("logging_dir", "save_safetensors"):
        want.pop(gone)
    assert kw == want
    assert "no TrainingArguments.save_safetensors" in caplog.text
    kw.pop("ddp_backend")  # nccl would set up a process group
    transformers.TrainingArguments(output_dir="/tmp/x", **kw)


def test_training_arguments_under_older_names(caplog):
    fields_426 = {
        "evaluation_strategy",
        "gradient_checkpointing",
        "no_cuda",
        "warmup_ratio",
        "warmup_steps",
        "logging_dir",
        "learning_rate",
        "xpu_backend",
    }
    with caplog.at_level(logging.INFO, logger="ftl_train"):
        kw = compat.training_arguments_kwargs(NEW, fields_426)
    assert kw == {
        "evaluation_strategy": "steps",
        "gradient_checkpointing": True,
        "no_cuda": True,
        "warmup_ratio": 0.1,
        "logging_dir": "/opt/ml/output/tensorboard",
        "learning_rate": 1e-4,
        "xpu_backend": "nccl",
    }
    for gone in ("save_safetensors", "activation_checkpointing_kwargs"):
        assert f"no TrainingArguments.{gone}" in caplog.text

    fields_449 = fields_426 | {"eval_strategy", "use_cpu", "gradient_checkpointing_kwargs"}
    kw = compat.training_arguments_kwargs(NEW, fields_449 - {"evaluation_strategy", "no_cuda"})
    assert kw["eval_strategy"] == "steps" and kw["use_cpu"] is True
    assert kw["gradient_checkpointing_kwargs"] == {"use_reentrant": False}


@pytest.mark.parametrize("field", ["ddp_backend", "learning_rate", "use_liger_kernel"])
def test_an_unknown_missing_field_stops_the_run_naming_it(field):
    # Issue 34: a setting this transformers lacks, which compat neither renames nor knows as
    # version-dependent, is an error (the image matrix runs every image), not an INFO line.
    fields = compat.training_fields() - {field, compat._RENAMED_FIELDS.get(field)}
    with pytest.raises(compat.CompatError, match=rf"TrainingArguments\.{field}: transformers"):
        compat.training_arguments_kwargs({**NEW, field: True}, fields)


def test_version_dependent_fields_are_left_out_only_where_a_release_lacks_them(caplog):
    fields = compat.training_fields() | set(compat.VERSION_DEPENDENT_FIELDS)
    with caplog.at_level(logging.INFO, logger="ftl_train"):
        kw = compat.training_arguments_kwargs(
            dict.fromkeys(compat.VERSION_DEPENDENT_FIELDS), fields
        )
    assert set(kw) == set(compat.VERSION_DEPENDENT_FIELDS) and "left out" not in caplog.text
    kw = compat.training_arguments_kwargs(
        dict.fromkeys(compat.VERSION_DEPENDENT_FIELDS), {"learning_rate"}
    )
    assert kw == {}


def test_the_real_training_arguments_have_every_name_compat_maps_to():
    fields = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    assert compat.training_fields() == fields
    for new, _old in compat._RENAMED_FIELDS.items():
        assert new in fields, f"{new} is no longer the newest name"


def test_no_version_try_except_outside_compat():
    """Version differences live in compat.py: the other modules catch no TypeError or
    AttributeError (what an older API raises) and compare no version strings."""
    root = Path(compat.__file__).parent
    for path in sorted(root.glob("*.py")):
        if path.name == "compat.py":
            continue
        text = path.read_text(encoding="utf-8")
        for bad in ("except TypeError", "except AttributeError", "__version__"):
            assert bad not in text, f"{path.name}: {bad}"
    assert os.path.basename(compat.__file__) == "compat.py"


# ---------------------------------------------------------------------------- FSDP


@dataclasses.dataclass
class _Plugin15:
    """accelerate 1.5's FullyShardedDataParallelPlugin: FSDP1 only, settings from FSDP_* env."""

    sharding_strategy: object = None
    state_dict_type: object = None
    limit_all_gathers: bool = True
    activation_checkpointing: bool = False


def _patch_plugin(monkeypatch, cls):
    import accelerate.utils

    monkeypatch.setattr(accelerate.utils, "FullyShardedDataParallelPlugin", cls)


def test_fsdp2_where_accelerate_has_it_fsdp1_without_a_device_sync_elsewhere(monkeypatch):
    assert compat.fsdp_version_config(smp_v2=False, cuda=False) == {"version": 2}
    assert compat.fsdp_version_config(smp_v2=False, cuda=True) == {"version": 2}
    # SMP v2 shards through FSDP1: no version; on a GPU transformers' own sync stays
    assert compat.fsdp_version_config(smp_v2=True, cuda=True) == {}
    assert compat.fsdp_version_config(smp_v2=True, cuda=False) == {"sync_module_states": False}
    _patch_plugin(monkeypatch, _Plugin15)  # accelerate < 1.6
    assert compat.fsdp_version_config(smp_v2=False, cuda=True) == {}
    assert compat.fsdp_version_config(smp_v2=False, cuda=False) == {"sync_module_states": False}


def test_fsdp_plugin_from_plugin_args_or_from_the_environment(monkeypatch):
    seen = {}

    class Plugin(_Plugin15):
        def __init__(self, **kw):
            seen.update(kw)
            super().__init__()

    _patch_plugin(monkeypatch, Plugin)
    new = types.SimpleNamespace(fsdp_plugin_args={"fsdp_version": 2, "state_dict_type": "X"})
    compat.fsdp_plugin(new)
    assert seen == {"fsdp_version": 2, "state_dict_type": "X"}

    seen.clear()  # transformers 4.44/4.49: no fsdp_plugin_args; fsdp_config copied over
    old = types.SimpleNamespace(fsdp_config={"activation_checkpointing": True, "xla": False})
    plugin = compat.fsdp_plugin(old)
    assert seen == {} and plugin.activation_checkpointing is True


def test_fsdp_environment_carries_the_state_dict_type_for_older_transformers():
    config = {"state_dict_type": "SHARDED_STATE_DICT"}
    env: dict[str, str] = {}
    new = types.SimpleNamespace(fsdp=["full_shard"], fsdp_config=config, fsdp_plugin_args={})
    assert compat.fsdp_environment(new, env) == {} and env == {}
    old = types.SimpleNamespace(fsdp=["full_shard"], fsdp_config=config)
    assert compat.fsdp_environment(old, env) == {"FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT"}
    assert env == {"FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT"}
    env.clear()
    assert compat.fsdp_environment(types.SimpleNamespace(fsdp=[], fsdp_config=config), env) == {}
