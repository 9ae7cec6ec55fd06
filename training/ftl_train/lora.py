"""LoRA and QLoRA with PEFT: wrap the model, save the adapter, optionally a merged model.

* ``peft=lora``: the base model in the job's precision, low-rank adapters on
  ``lora_target_modules`` (``all-linear``: every linear layer but the output head).
* ``peft=qlora``: the base model quantised to 4-bit NF4 (bitsandbytes, double
  quantisation, bf16 compute) with the adapters in full precision. Needs a CUDA GPU and
  ``bitsandbytes``; anything else is refused before any data is read.

Checkpoints hold the adapter (``adapter_model.safetensors``, ``adapter_config.json``) with
the optimizer, scheduler and RNG states, and resume like every other task. At the end
``SM_MODEL_DIR`` holds the adapter and the tokenizer; with ``merge_adapter=true`` it holds
the merged model instead (loadable with ``AutoModelForCausalLM``), the adapter in
``SM_MODEL_DIR/adapter``. Merging reloads the base model unquantised in its saved dtype on
the CPU (a 4-bit base cannot be merged into losslessly), applies the adapter and saves.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from typing import Any

from . import compat
from .hparams import HyperparameterError, Hyperparameters

logger = logging.getLogger("ftl_train")

ADAPTER_SUBDIR = "adapter"


def check_peft(hp: Hyperparameters, cuda: bool) -> None:
    """Refuse what cannot run here, before data or model are read."""
    if hp.peft == "none":
        return
    if importlib.util.find_spec("peft") is None:
        raise HyperparameterError(
            f"peft={hp.peft} needs the `peft` package; add it to the image or requirements.txt"
        )
    if hp.peft == "qlora":
        if not cuda:
            raise HyperparameterError(
                "peft=qlora needs a CUDA GPU (bitsandbytes 4-bit kernels); this machine has "
                "none. Use peft=lora on a CPU, or a GPU instance type"
            )
        if importlib.util.find_spec("bitsandbytes") is None:
            raise HyperparameterError(
                "peft=qlora needs the `bitsandbytes` package; add it to requirements.txt"
            )


def quantization_kwargs(hp: Hyperparameters) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for a 4-bit base (qlora), else {}."""
    if hp.peft != "qlora":
        return {}
    import torch
    from transformers import BitsAndBytesConfig

    return {
        "quantization_config": BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
            bnb_4bit_quant_storage=torch.bfloat16,
        ),
        **compat.dtype_kwargs(torch.bfloat16),
    }


def target_modules(value: str) -> str | list[str]:
    value = value.strip()
    if value == "all-linear":
        return value
    return [m.strip() for m in value.split(",") if m.strip()]


def wrap(hp: Hyperparameters, model: Any, gradient_checkpointing: bool) -> Any:
    """The model with LoRA adapters (trainable) on a frozen base."""
    if hp.peft == "none":
        return model
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if hp.peft == "qlora":
        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=gradient_checkpointing
        )
    elif gradient_checkpointing:
        model.enable_input_require_grads()  # frozen embeddings: checkpointed blocks need a grad
    config = LoraConfig(
        r=hp.lora_r,
        lora_alpha=hp.lora_alpha,
        lora_dropout=hp.lora_dropout,
        target_modules=target_modules(hp.lora_target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    logger.info(
        "LoRA: %d trainable of %d parameters (%.2f%%)", trainable, total, 100 * trainable / total
    )
    return model


def save_final(trainer: Any, tokenizer: Any, model_dir: str, base_path: str, merge: bool) -> None:
    """Adapter (and tokenizer) into ``model_dir``; with ``merge``, the merged model there."""
    if not merge:
        trainer.save_model(model_dir)
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(model_dir)
        return
    adapter_dir = os.path.join(model_dir, ADAPTER_SUBDIR)
    trainer.save_model(adapter_dir)
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(adapter_dir)
        merge_adapter(base_path, adapter_dir, model_dir)
        tokenizer.save_pretrained(model_dir)


def merge_adapter(base_path: str, adapter_dir: str, out_dir: str) -> None:
    """Base model (unquantised, its saved dtype, on the CPU) + adapter -> a plain model."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(
        base_path, device_map=None, **compat.dtype_kwargs("auto")
    )
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    tmp = out_dir.rstrip("/") + ".merging"
    shutil.rmtree(tmp, ignore_errors=True)
    merged.save_pretrained(tmp)
    for name in os.listdir(tmp):
        os.replace(os.path.join(tmp, name), os.path.join(out_dir, name))
    shutil.rmtree(tmp, ignore_errors=True)
    logger.info("merged the adapter into the base model: %s", out_dir)
