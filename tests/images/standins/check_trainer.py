"""A tiny HF Trainer run in an image's environment, for the stand-ins' tests.

Run with an image environment's Python (not the project's): ``python check_trainer.py
--out result.json --mode smp|smddp|tsm [--resume-from DIR] [--max-steps N]``. The
distribution library's path is switched on by the environment the caller sets (the
variables SageMaker's toolkit sets); ``tsm`` also calls ``torch.sagemaker.init`` and
``transform`` the way the entrypoint does. A tiny BERT classifier from a config, generated
tensors, CPU only; checkpoints every 2 steps, evaluates at the end, and writes what it saw
(losses, parallel mode, wrapper classes) as JSON. Standard library, torch and transformers
only; runs on Python 3.9.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=("smp", "smddp", "tsm"), required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--resume-from", default=None)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    tsm = None
    if args.mode == "tsm":
        import torch.sagemaker as tsm  # the stand-in, through sitecustomize

        tsm.init(json.loads(os.environ["SM_HP_MP_PARAMETERS"]))
        model = tsm.transform(model)

    g = torch.Generator().manual_seed(1)
    rows = [
        {
            "input_ids": torch.randint(0, 64, (8,), generator=g),
            "attention_mask": torch.ones(8, dtype=torch.long),
            "labels": torch.tensor(i % 2),
        }
        for i in range(32)
    ]

    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    kw = {
        "output_dir": os.path.join(args.work, "out"),
        "max_steps": args.max_steps,
        "per_device_train_batch_size": args.batch_size,
        "per_device_eval_batch_size": args.batch_size,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_steps": 2,
        "save_strategy": "steps",
        "report_to": [],
        "seed": 0,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }
    if args.mode != "smddp":  # smddp on a CPU: ACCELERATE_TORCH_DEVICE=cpu, not use_cpu
        kw["use_cpu" if "use_cpu" in fields else "no_cuda"] = True
    targs = TrainingArguments(**kw)
    trainer = Trainer(model=model, args=targs, train_dataset=rows, eval_dataset=rows[:8])
    train = trainer.train(resume_from_checkpoint=args.resume_from)
    metrics = trainer.evaluate()

    import torch.distributed as dist

    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    wrapped = trainer.model_wrapped
    result = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "losses": losses,
        "finite": bool(losses) and all(math.isfinite(x) for x in losses),
        "train_loss": train.training_loss,
        "eval_loss": metrics.get("eval_loss"),
        "global_step": trainer.state.global_step,
        "parallel_mode": str(targs.parallel_mode),
        "world_size": targs.world_size,
        "device": str(targs.device),
        "model_wrapped": f"{type(wrapped).__module__}.{type(wrapped).__qualname__}",
        "optimizer": f"{type(trainer.optimizer).__module__}.{type(trainer.optimizer).__name__}",
        "optimizer_is_torch": isinstance(trainer.optimizer, torch.optim.Optimizer),
        "dist_backend": str(dist.get_backend()) if dist.is_initialized() else None,
        "checkpoints": sorted(os.listdir(kw["output_dir"])),
        "tsm_transformed": list(tsm.state.transformed) if tsm is not None else None,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
