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

from . import checkpoints

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


class FtlTrainer(Trainer):
    def __init__(
        self, *args, ftl_lengths: list[int] | None = None, ftl_is_lm: bool = False, **kwargs
    ):
        super().__init__(*args, **kwargs)
        self._ftl_lengths = ftl_lengths
        self._ftl_is_lm = ftl_is_lm
        self._ftl_sampler: SeededLengthGroupedSampler | None = None
        self.add_callback(_SamplerEpoch(self))

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
            getattr(self, "accelerator", None) is None and self.args.world_size > 1
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
        """Wait for every process (transformers < 4.30 has no accelerator on the Trainer)."""
        accelerator = getattr(self, "accelerator", None)
        if accelerator is not None:
            accelerator.wait_for_everyone()
            return
        if self.args.world_size <= 1:
            return
        from transformers.utils import is_sagemaker_mp_enabled

        if is_sagemaker_mp_enabled():
            import smdistributed.modelparallel.torch as smp

            smp.barrier()
            return
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()

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
        limit = self.args.save_total_limit
        self.args.save_total_limit = (
            None  # the Trainer's own rotation would count half-written folders
        )
        try:
            super()._save_checkpoint(model, trial, *args, **kwargs)
        finally:
            self.args.save_total_limit = limit
        run_dir = self._get_output_dir(trial=trial)
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
