"""The entrypoint's hyperparameter table: every name, its kind, default and help text.

``hparams.py`` parses and checks values against it; ``python train.py --help`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TASKS = ("qa", "classification", "mlm", "clm", "sft")
ATTN_CHOICES = ("auto", "sdpa", "flash_attention_2", "eager", "flex_attention", "varlen")
LOSS_KERNELS = ("auto", "plain", "chunked")
STATE_DTYPES = ("float32", "bfloat16")
PEFT_CHOICES = ("none", "lora", "qlora")
FSDP_OPTIONS = frozenset(
    {
        "full_shard",
        "shard_grad_op",
        "hybrid_shard",
        "hybrid_shard_zero2",
        "no_shard",
        "offload",
        "auto_wrap",
    }
)


@dataclass(frozen=True)
class Spec:
    name: str
    kind: str  # str | int | float | bool | tristate (bool or None meaning "auto")
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    nullable: bool = False


SPECS: tuple[Spec, ...] = (
    Spec("task", "str", None, " | ".join(TASKS), choices=TASKS, nullable=True),
    Spec(
        "model_name_or_path",
        "str",
        None,
        "model folder or hub id; the `model` channel wins when present",
        nullable=True,
    ),
    Spec(
        "max_seq_length",
        "int",
        None,
        "tokens per sequence; default per task (qa 384, classification 256, mlm/clm 512, "
        "sft 2048), "
        "capped by the model",
        nullable=True,
    ),
    Spec("doc_stride", "int", 128, "qa: overlap between the windows of a long context"),
    Spec(
        "pad_to_max_length",
        "bool",
        False,
        "pad every sequence to max_seq_length (default: dynamic padding per batch)",
    ),
    Spec("learning_rate", "float", 3e-5, "peak learning rate"),
    Spec("num_train_epochs", "float", 2.0, "epochs (ignored when max_steps > 0)"),
    Spec("max_steps", "int", -1, "optimizer steps; > 0 overrides num_train_epochs"),
    Spec("per_device_train_batch_size", "int", 16, "training batch per device"),
    Spec("per_device_eval_batch_size", "int", 32, "evaluation batch per device"),
    Spec("gradient_accumulation_steps", "int", 1, "micro-batches per optimizer step"),
    Spec(
        "global_batch_size",
        "int",
        None,
        "training examples per optimizer step over all devices; when set, the per-device "
        "batch (at most per_device_train_batch_size) and gradient_accumulation_steps are "
        "derived on the host from the devices the job got",
        nullable=True,
    ),
    Spec("fp16", "tristate", None, "float16 mixed precision (auto: only on CUDA without bf16)"),
    Spec("bf16", "tristate", None, "bfloat16 mixed precision (auto: on CUDA GPUs that support it)"),
    Spec("seed", "int", 42, "random seed"),
    Spec("warmup_ratio", "float", 0.0, "fraction of the steps used for linear warm-up"),
    Spec("weight_decay", "float", 0.01, "AdamW weight decay"),
    Spec(
        "eval_steps",
        "int",
        None,
        "evaluate every N steps (0: only at the end; default: save_steps)",
    ),
    Spec("save_steps", "int", 500, "checkpoint every N steps"),
    Spec(
        "save_total_limit", "int", 2, "complete checkpoints kept (the best one is always kept too)"
    ),
    Spec("logging_steps", "int", 50, "log (and print metric lines) every N steps"),
    Spec(
        "metric_for_best_model",
        "str",
        None,
        "metric for best-model selection (default: f1 for qa/classification, loss for mlm/clm)",
        nullable=True,
    ),
    Spec(
        "load_best_model_at_end",
        "tristate",
        None,
        "reload the best checkpoint at the end (auto: when there is validation data)",
    ),
    Spec(
        "text_column",
        "str",
        None,
        "classification/mlm/clm: text column (auto-detected when unset)",
        nullable=True,
    ),
    Spec(
        "text_pair_column",
        "str",
        None,
        "classification: second text column of sentence pairs",
        nullable=True,
    ),
    Spec(
        "label_column",
        "str",
        None,
        "classification: label column (auto-detected when unset)",
        nullable=True,
    ),
    Spec(
        "num_labels",
        "int",
        None,
        "classification: number of labels (inferred when unset)",
        nullable=True,
    ),
    Spec(
        "label_mapping",
        "str",
        None,
        "classification: 'stars3' or a JSON object mapping raw labels to labels",
        nullable=True,
    ),
    Spec("mlm_probability", "float", 0.15, "mlm: share of tokens masked"),
    Spec(
        "checkpoint_dir",
        "str",
        None,
        "checkpoint folder (default /opt/ml/checkpoints)",
        nullable=True,
    ),
    Spec(
        "attn_implementation",
        "str",
        "auto",
        "attention kernel: auto (flash_attention_2 when installed on CUDA in 16-bit; for packed "
        "sft varlen; else sdpa) | sdpa | flash_attention_2 | eager | flex_attention | varlen "
        "(packed rows without a dense mask; causal LMs); falls back to eager when unsupported",
        choices=ATTN_CHOICES,
    ),
    Spec(
        "loss_kernel",
        "str",
        "auto",
        "clm/sft: auto (chunked where the model supports it) | plain (logits, then "
        "cross-entropy) | chunked (linear + cross-entropy in chunks, no full logits; exact)",
        choices=LOSS_KERNELS,
    ),
    Spec("loss_chunk_tokens", "int", 1024, "loss_kernel=chunked: labelled tokens per chunk"),
    Spec(
        "liger_kernel",
        "bool",
        False,
        "clm/sft: liger-kernel's fused RMSNorm, RoPE, SwiGLU and linear cross-entropy "
        "(CUDA; the package must be installed)",
    ),
    Spec(
        "optim_state_dtype",
        "str",
        "float32",
        "AdamW moment dtype: float32 | bfloat16 (half the optimizer memory; not exact)",
        choices=STATE_DTYPES,
    ),
    Spec("tf32", "tristate", None, "TF32 matmuls (auto: on Ampere or newer GPUs)"),
    Spec(
        "optim",
        "str",
        None,
        "optimizer name as the HF Trainer knows it "
        "(auto: adamw_torch_fused on CUDA, else adamw_torch)",
        nullable=True,
    ),
    Spec(
        "group_by_length",
        "bool",
        True,
        "batch sequences of similar length together (with dynamic padding)",
    ),
    Spec(
        "dataloader_num_workers",
        "int",
        None,
        "data loader worker processes (auto: 2 on CUDA, 0 on CPU)",
        nullable=True,
    ),
    Spec(
        "torch_compile",
        "tristate",
        None,
        "compile the model with torch.compile (auto: on for single-GPU-node full SFT on CUDA)",
    ),
    # Extras beyond the launcher's list; all optional.
    Spec("lr_scheduler_type", "str", "linear", "learning-rate schedule (HF Trainer names)"),
    Spec("max_grad_norm", "float", 1.0, "gradient clipping norm (0 disables)"),
    Spec(
        "gradient_checkpointing",
        "tristate",
        None,
        "recompute activations to save memory (auto: on with fsdp, else off)",
    ),
    # Causal-LM recipes (task sft; peft also for clm).
    Spec(
        "dataset_format",
        "str",
        "auto",
        "sft: auto | messages (chat, the tokenizer's chat template) | prompt_completion",
        choices=("auto", "messages", "prompt_completion"),
    ),
    Spec(
        "packing", "bool", True, "sft: pack examples into max_seq_length rows (no cross-attention)"
    ),
    Spec("completion_only_loss", "bool", True, "sft: loss on the answer tokens only"),
    Spec(
        "peft",
        "str",
        "none",
        "sft/clm: none | lora | qlora (4-bit base, CUDA)",
        choices=PEFT_CHOICES,
    ),
    Spec("lora_r", "int", 16, "LoRA rank"),
    Spec("lora_alpha", "int", 32, "LoRA alpha (scale = alpha / r)"),
    Spec("lora_dropout", "float", 0.05, "LoRA dropout"),
    Spec(
        "lora_target_modules", "str", "all-linear", "'all-linear' or a comma list of module names"
    ),
    Spec("merge_adapter", "bool", False, "also save the base model with the adapter merged in"),
    Spec(
        "fsdp",
        "str",
        None,
        "FSDP options, e.g. 'full_shard auto_wrap' (empty: no FSDP); torchrun launches",
        nullable=True,
    ),
    Spec(
        "fsdp_transformer_layer_cls_to_wrap",
        "str",
        None,
        "FSDP: decoder layer class(es) to wrap, comma list (default: the model's own)",
        nullable=True,
    ),
    Spec(
        "max_train_samples",
        "int",
        None,
        "use at most N training examples (smoke tests)",
        nullable=True,
    ),
    Spec(
        "max_eval_samples",
        "int",
        None,
        "use at most N validation examples (smoke tests)",
        nullable=True,
    ),
    Spec("max_answer_length", "int", 30, "qa: longest answer span in tokens"),
    Spec("n_best_size", "int", 20, "qa: start/end candidates considered per feature"),
)

SPEC_BY_NAME: dict[str, Spec] = {s.name: s for s in SPECS}


def describe() -> str:
    """The table as ``python train.py --help`` prints it."""
    return "\n".join(f"  {s.name:<30} {s.kind:<8} default={s.default!r}  {s.help}" for s in SPECS)
