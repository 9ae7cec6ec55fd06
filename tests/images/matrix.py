"""The image matrix's table: each shipped template, how it runs on a CPU, and what is overridden.

One row per template. Everything else comes from the platform: the template's image (resolved
as synth resolves it), its package set (``image_sets/``), and the rendered
``CreateTrainingJob`` request (hyperparameters, channels, environment, instance type).

Overrides (the only values changed from the rendered request, besides the path a container
on this machine needs: ``sagemaker_submit_directory`` to a local ``sourcedir.tar.gz`` of
``training/`` instead of the S3 asset; the run's folder is the container's ``/opt/ml``, so
the checkpoints go to ``/opt/ml/checkpoints`` as CheckpointConfig says):

* model size: a tiny model of the template's family built from a config in the image's own
  transformers (``model_name_or_path`` points at it, or it is the ``model`` channel);
* step counts: ``max_steps``, ``logging_steps`` (1, so SIGTERM lands after step 2),
  ``save_steps``, and ``eval_steps`` where the template sets one;
* SMP parameters a CPU run cannot keep (a row's ``mp_overrides``: fp16, and tensor-parallel
  degrees the tiny model's heads and the CPU's ranks divide).

Every template with a validation channel evaluates (``eval_steps`` is ``save_steps`` unless
the template sets it, and the override then sets it to the same value) and saves at steps 5
and 10 of the resumed run, so the best-model reload happens after a resume. The last step
(``max_steps``) is itself an evaluation and a save, the state in which transformers 5.x
recorded a best checkpoint on some ranks only and the FSDP job hung (issue 34).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Metrics a CPU run cannot print: MFU divides by the device's peak FLOP/s, which the entrypoint
# knows for GPUs only (ftl_train/throughput.py). Printed on a GPU (bench/RESULTS.md, the GPU run).
GPU_ONLY_METRICS = frozenset({"train_mfu"})

STEP_OVERRIDES: dict[str, Any] = {"max_steps": 10, "logging_steps": 1, "save_steps": 5}
# ``eval_steps`` is overridden only where the template sets it: a template that leaves it to
# the entrypoint's default (save_steps) trains with that default.
EVAL_STEPS_OVERRIDE = 5


@dataclass(frozen=True)
class Row:
    template: str
    family: str  # tiny model family: bert, roberta, distilbert, albert, gpt2, llama
    nproc: int = 1  # processes torchrun starts (FSDP on a CPU needs two gloo ranks)
    extra_overrides: dict[str, Any] = field(default_factory=dict)
    # Why the template cannot checkpoint and resume on a CPU, and what covers it instead; the
    # matrix then checks only the start: the toolkit's launch, the library's initialisation
    # and finite losses up to SIGTERM.
    cpu_limit: str = ""
    # Keys of the SMP parameters (mp_parameters) changed for a CPU run, and why (issue 34).
    mp_overrides: dict[str, Any] = field(default_factory=dict)


ROWS: dict[str, Row] = {
    r.template: r
    for r in (
        Row("bert-large-qa", "bert"),
        # A CPU has no float16: SMP v1's fp16 (on the GPU: tests/images/test_as_on_gpu.py).
        Row("roberta-large-mnli-mp", "roberta", mp_overrides={"fp16": False}),
        Row("distilbert-spot", "distilbert"),
        Row("distilbert-chain", "distilbert"),
        Row("distilbert-multilingual-sentiment", "distilbert"),
        Row("albert-mlm-pretrain", "albert"),
        # ...and the tiny GPT-2 has 2 heads: degree 2 splits it (gpt2-large's 20 at degree 4
        # is built as on an A100 in test_as_on_gpu.py).
        Row("gpt-tp-sharded", "gpt2", mp_overrides={"fp16": False, "tensor_parallel_degree": 2}),
        Row("llm-sft", "llama"),
        Row("llm-lora", "llama"),
        Row("llm-sft-fsdp", "llama", nproc=2),
        Row(
            "llm-smp-v2",
            "llama",
            nproc=2,
            # SMP v2 needs the degree to divide the world: 2 CPU ranks here, 16 GPUs on AWS
            mp_overrides={"tensor_parallel_degree": 2},
            cpu_limit=(
                "FSDP on CPU gloo ranks in the SMP v2 image's transformers 4.44.2 / accelerate "
                "1.5.2: accelerate wraps the model in DDP, so its FSDP checkpoint save fails "
                "('KeyError: None'); torch.sagemaker's init and transform run under the Trainer "
                "in tests/images/test_standins.py, and FSDP checkpoints and resume in the LLM "
                "image (llm-sft-fsdp)"
            ),
        ),
    )
}

# Folders under tests/images/standins/ put on PYTHONPATH when the image ships the library.
STAND_IN_DIRS = {
    "smdistributed-dataparallel": "tests/images/standins/smdistributed-dataparallel",
    "smdistributed-modelparallel": "tests/images/standins/smdistributed-modelparallel",
    "torch-sagemaker": "tests/images/standins/torch-sagemaker",
}
