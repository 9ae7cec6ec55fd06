"""The HF Trainer with the few behaviours the platform needs on top."""

from __future__ import annotations

import json
import logging
import math
import os
import re
from typing import Any

import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_pt_utils import LengthGroupedSampler

from . import checkpoints, compat
from .throughput import TokenMeter, cuda_device_name, mfu, peak_flops

logger = logging.getLogger("ftl_train")


class SeededLengthGroupedSampler(LengthGroupedSampler):
    """Length-grouped order that depends only on (seed, epoch).

    The stock sampler draws from the global RNG, so a run resumed in a later epoch
    would see a different order than the uninterrupted run, and ranks could disagree.
    """

    def __init__(self, batch_size: int, lengths: list[int], seed: int):
        super().__init__(batch_size=batch_size, lengths=lengths)
        self.seed = int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        from transformers.trainer_pt_utils import get_length_grouped_indices

        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return iter(get_length_grouped_indices(self.lengths, self.batch_size, generator=generator))


_LEGACY_SUFFIX = re.compile(r"\.(gamma|beta)$")


def restore_renamed_weights(model: Any, folder: str) -> int:
    """Load weights a checkpoint stores under legacy names; return how many.

    Some transformers 5.x releases (5.3, in the current Hugging Face training image) save
    LayerNorm parameters of BERT-style models as ``.gamma``/``.beta`` while the model's
    own names are ``.weight``/``.bias``; the Trainer then resumes with a non-strict
    ``load_state_dict`` and silently keeps the LayerNorms it started with. This puts
    them back. A no-op when the names match.
    """
    files = []
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as fh:
            files = sorted({os.path.join(folder, f) for f in json.load(fh)["weight_map"].values()})
    elif os.path.isfile(os.path.join(folder, "model.safetensors")):
        files = [os.path.join(folder, "model.safetensors")]
    if not files:
        return 0
    from safetensors import safe_open

    own = model.state_dict()
    fixed = {}
    for path in files:
        with safe_open(path, framework="pt", device="cpu") as fh:
            for key in fh.keys():
                if key in own:
                    continue
                m = _LEGACY_SUFFIX.search(key)
                if not m:
                    continue
                target = key[: m.start()] + (".weight" if m.group(1) == "gamma" else ".bias")
                if target in own:
                    tensor = fh.get_tensor(key)
                    if tensor.shape == own[target].shape:
                        fixed[target] = tensor
    if fixed:
        model.load_state_dict(fixed, strict=False)
        logger.warning("restored %d weights stored under legacy names from %s", len(fixed), folder)
    return len(fixed)


class _SamplerEpoch(TrainerCallback):
    """Tell the length-grouped sampler which epoch starts, whatever wraps the data loader.

    Some transformers/accelerate versions do not forward ``set_epoch`` through the
    loader that skips already-seen batches on resume; the epoch is read from the
    trainer state instead (``floor(state.epoch)`` is the epoch index at its start).
    """

    def __init__(self, trainer: FtlTrainer):
        self.trainer = trainer

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        sampler = self.trainer._ftl_sampler
        if sampler is not None:
            sampler.set_epoch(math.floor((state.epoch or 0.0) + 1e-9))


def enable_cpu_fsdp(trainer: Trainer) -> bool:
    """FSDP for a multi-process CPU (gloo) run, which accelerate sets up as plain DDP.

    accelerate only turns its FSDP plugin on for GPU-like device types; PyTorch's FSDP
    (FSDP2's ``fully_shard``, and FSDP1 where accelerate has only that) itself runs on CPU
    with gloo. This lets the CPU tests exercise the same sharding, sharded checkpoints and
    resume as a GPU job. A no-op on GPUs.
    """
    if not getattr(trainer.args, "fsdp", None) or trainer.is_fsdp_enabled:
        return False
    from accelerate.utils import DistributedType

    state = trainer.accelerator.state
    if state.distributed_type != DistributedType.MULTI_CPU:
        return False
    state.fsdp_plugin = compat.fsdp_plugin(trainer.args)
    state.distributed_type = DistributedType.FSDP
    os.environ["ACCELERATE_USE_FSDP"] = "true"
    trainer.is_fsdp_enabled = True
    logger.info("FSDP on CPU processes (gloo)")
    return True


class _MeterStart(TrainerCallback):
    def __init__(self, meter: TokenMeter):
        self.meter = meter

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.meter.start()


class FtlTrainer(Trainer):
    def __init__(
        self,
        *args,
        ftl_lengths: list[int] | None = None,
        ftl_is_lm: bool = False,
        ftl_flops_per_token: float | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self._ftl_lengths = ftl_lengths
        self._ftl_is_lm = ftl_is_lm
        self._ftl_sampler: SeededLengthGroupedSampler | None = None
        self.add_callback(_SamplerEpoch(self))
        # Tokens/s and MFU lines for language-model tasks (tokens are what their cost scales with).
        self._ftl_meter: TokenMeter | None = None
        self._ftl_fpt = ftl_flops_per_token
        self._ftl_peak = peak_flops(cuda_device_name())
        if ftl_is_lm:
            pad = getattr(compat.trainer_tokenizer(self), "pad_token_id", None)
            self._ftl_meter = TokenMeter(pad)
            self.add_callback(_MeterStart(self._ftl_meter))

    def ftl_save_model(self, output_dir: str) -> None:
        """The final model as plain safetensors, also under FSDP (whose checkpoints are sharded)."""
        if not compat.trainer_fsdp_enabled(self):
            self.save_model(output_dir)
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(self.model_wrapped, options=options)  # a collective
        if self.args.should_save:
            state = {k: v.detach().clone().contiguous() for k, v in state.items()}
            unwrapped = self.accelerator.unwrap_model(self.model)
            unwrapped.save_pretrained(output_dir, state_dict=state, safe_serialization=True)
        self.ftl_barrier()

    def create_accelerator_and_postprocess(self) -> None:
        super().create_accelerator_and_postprocess()
        enable_cpu_fsdp(self)

    def training_step(self, model: Any, inputs: dict, *args: Any, **kwargs: Any) -> Any:
        if self._ftl_meter is not None and model.training:
            self._ftl_meter.count(inputs)
        return super().training_step(model, inputs, *args, **kwargs)

    def _ftl_throughput(self, logs: dict) -> None:
        import time

        if self._ftl_meter is None or not ("loss" in logs or "train_runtime" in logs):
            return
        world = max(1, self.args.world_size)
        if "train_runtime" in logs:  # the run's summary: the whole session
            tokens = self._ftl_meter.global_total(world)
            rate = tokens / logs["train_runtime"] if logs["train_runtime"] else None
        else:
            rate = self._ftl_meter.interval(time.perf_counter(), world)
        if rate is None:
            return
        logs["train_tokens_per_second"] = rate
        value = mfu(self._ftl_fpt or 0.0, rate, self._ftl_peak, world)
        if value is not None:
            logs["train_mfu"] = value

    # -- length grouping (dynamic padding wastes little when a batch has similar lengths)
    def _get_train_sampler(self, *args: Any, **kwargs: Any) -> Any:
        # The Trainer passes the training set with unused columns removed (a new object),
        # so match it by size: the lengths were computed on the same rows.
        train_dataset = args[0] if args else kwargs.get("train_dataset")
        if train_dataset is None:
            train_dataset = self.train_dataset
        lengths = self._ftl_lengths
        from transformers.utils import is_sagemaker_mp_enabled

        if is_sagemaker_mp_enabled() or (
            compat.trainer_accelerator(self) is None and self.args.world_size > 1
        ):
            # Model parallel, or a Trainer without accelerate (transformers < 4.30) that
            # shards data with its own distributed samplers: keep the Trainer's sampler.
            lengths = None
        if lengths is not None and train_dataset is not None and len(lengths) == len(train_dataset):
            group = (
                self.args.train_batch_size
                * self.args.gradient_accumulation_steps
                * max(1, self.args.world_size)
            )
            seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
            self._ftl_sampler = SeededLengthGroupedSampler(group, lengths, seed)
            return self._ftl_sampler
        return super()._get_train_sampler(*args, **kwargs)

    def ftl_barrier(self) -> None:
        """Wait for every process."""
        compat.barrier(self)

    # -- resuming and best-model loading restore every weight
    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        restore_renamed_weights(model if model is not None else self.model, resume_from_checkpoint)

    def _load_best_model(self) -> None:
        super()._load_best_model()
        if self.state.best_model_checkpoint:
            restore_renamed_weights(self.model, self.state.best_model_checkpoint)

    # -- perplexity next to the eval loss of language-model tasks
    def log(self, logs: dict, *args: Any, **kwargs: Any) -> None:
        self._ftl_throughput(logs)
        if self._ftl_is_lm:
            for key in list(logs):
                if (
                    key.endswith("_loss")
                    and not key.startswith("train")
                    and isinstance(logs[key], (int, float))
                ):
                    prefix = key[: -len("loss")]
                    logs[f"{prefix}perplexity"] = (
                        math.exp(logs[key]) if logs[key] < 700 else float("inf")
                    )
        return super().log(logs, *args, **kwargs)

    # -- checkpoints that can be told complete, rotated only once complete
    def _save_checkpoint(self, model: Any, trial: Any, *args: Any, **kwargs: Any) -> None:
        run_dir = self._get_output_dir(trial=trial)
        if hasattr(self.state, "best_global_step"):  # transformers 5.x: see best_checkpoint
            self.state.best_model_checkpoint = checkpoints.best_checkpoint(
                run_dir,
                self.state.best_global_step,
                self.state.global_step,
                self.state.best_model_checkpoint,
            )
        limit = self.args.save_total_limit
        self.args.save_total_limit = (
            None  # the Trainer's own rotation would count half-written folders
        )
        try:
            super()._save_checkpoint(model, trial, *args, **kwargs)
        finally:
            self.args.save_total_limit = limit
        path = os.path.join(run_dir, f"{checkpoints.PREFIX}-{self.state.global_step}")
        # Every process has written its files (RNG states are per process) before the marker.
        self.ftl_barrier()
        if self.args.should_save:
            checkpoints.mark_complete(path, {"world_size": self.args.world_size})
            checkpoints.rotate(
                run_dir, limit, self.state.best_model_checkpoint, saving_process=True
            )
        elif (
            self.args.world_size > 1
            and self.is_local_process_zero()
            and not self.args.save_on_each_node
        ):
            # Other nodes hold only their processes' RNG files; keep the same window of them.
            checkpoints.rotate(
                run_dir, limit, self.state.best_model_checkpoint, saving_process=False
            )
        self.ftl_barrier()
        self._ftl_agree_on_best()

    def _ftl_agree_on_best(self) -> None:
        """Every process takes the saving process's best checkpoint, the one its
        ``trainer_state.json`` records: whether the best model is loaded at the end is decided
        once for the whole job (loading it under FSDP is a collective, and a process that
        skips it leaves the others waiting; issue 34). transformers 4.x records the best
        checkpoint from the evaluation itself, the same on every process: nothing to do. A
        process group of another backend (smddp) is left alone; ``best_checkpoint`` already
        gives every process the same path."""
        if not hasattr(self.state, "best_global_step") or self.args.world_size <= 1:
            return
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        backend = str(dist.get_backend())  # "nccl", or "cuda:nccl,cpu:gloo" and the like
        if "gloo" not in backend and "nccl" not in backend:
            return
        box = [self.state.best_model_checkpoint]
        dist.broadcast_object_list(box, src=0)
        if box[0] != self.state.best_model_checkpoint:
            logger.warning(
                "best checkpoint %s here, %s on the saving process: taking the latter",
                self.state.best_model_checkpoint,
                box[0],
            )
        self.state.best_model_checkpoint = box[0]
