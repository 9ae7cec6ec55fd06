"""Where a job's model and data are: the ``model`` channel (a folder or a ``model.tar.gz``)
or ``model_name_or_path``, and the train and validation channels."""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from typing import Any

from . import compat
from .data import DataError, load_split
from .env import SageMakerEnv
from .hparams import HyperparameterError, Hyperparameters
from .preprocess import cache_dir, limit_raw

logger = logging.getLogger("ftl_train")

TRAIN_CHANNELS = ("train", "training")
EVAL_CHANNELS = ("validation", "valid", "eval", "dev", "test")
MODEL_CHANNELS = ("model",)
EVAL_SPLITS = ("validation", "valid", "eval", "dev", "test")


def resolve_model_path(hp: Hyperparameters, sm: SageMakerEnv) -> str:
    """The `model` channel when it holds a model, else model_name_or_path."""
    channel = sm.channel(*MODEL_CHANNELS)
    if channel:
        if os.path.isfile(os.path.join(channel, "config.json")):
            return channel
        for sub in sorted(glob.glob(os.path.join(channel, "*", "config.json"))):
            return os.path.dirname(sub)
        tars = sorted(glob.glob(os.path.join(channel, "*.tar.gz")))
        if tars:  # a SageMaker model artifact (model.tar.gz)
            found = _extract_model_tarball(tars[0])
            if found:
                return found
        if hp.model_name_or_path is None:
            raise HyperparameterError(
                f"the model channel {channel} holds no model (no config.json)"
            )
        logger.warning(
            "the model channel holds no config.json; using model_name_or_path=%s",
            hp.model_name_or_path,
        )
    if hp.model_name_or_path is None:
        raise HyperparameterError("no model: set model_name_or_path or provide a `model` channel")
    return hp.model_name_or_path


@dataclass
class DataPlan:
    train_path: str
    eval_path: str | None
    eval_split_in_train: (
        str | None
    )  # a DatasetDict in the train channel that carries a validation split

    @property
    def has_eval(self) -> bool:
        return self.eval_path is not None or self.eval_split_in_train is not None


def plan_data(sm: SageMakerEnv) -> DataPlan:
    """Find the data folders without reading the data."""
    train_path = sm.channel(*TRAIN_CHANNELS)
    if train_path is None:
        raise DataError(
            "no training data: expected a `train` channel (SM_CHANNEL_TRAIN); channels present: "
            + (", ".join(sorted(sm.channels)) or "none")
        )
    eval_path = sm.channel(*EVAL_CHANNELS)
    in_train = None
    dd = os.path.join(train_path, "dataset_dict.json")
    if eval_path is None and os.path.isfile(dd):
        try:
            with open(dd, encoding="utf-8") as fh:
                splits = json.load(fh).get("splits", [])
        except (OSError, json.JSONDecodeError):
            splits = []
        in_train = next((name for name in EVAL_SPLITS if name in splits), None)
    return DataPlan(train_path, eval_path, in_train)


def _extract_model_tarball(tar_path: str) -> str | None:
    """Unpack once per node into the cache folder; return the folder holding config.json."""
    st = os.stat(tar_path)
    key = f"{os.path.abspath(tar_path)}:{st.st_size}:{int(st.st_mtime)}"
    dest = os.path.join(cache_dir(), "model-" + hashlib.sha256(key.encode()).hexdigest()[:16])
    if not os.path.isdir(dest):
        tmp = tempfile.mkdtemp(prefix=".extract-", dir=cache_dir())
        try:
            with tarfile.open(tar_path) as tar:
                compat.safe_extract(tar, tmp)
        except (tarfile.TarError, ValueError) as exc:  # a link or a path outside the folder
            shutil.rmtree(tmp, ignore_errors=True)
            raise DataError(f"model archive {tar_path}: {exc}") from None
        try:
            os.rename(tmp, dest)  # atomic; another process may have won the race
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    found = sorted(glob.glob(os.path.join(dest, "**", "config.json"), recursive=True))
    return os.path.dirname(found[0]) if found else None


def load_data(hp: Hyperparameters, plan: DataPlan) -> tuple[Any, Any]:
    cache = os.path.join(cache_dir(), "datasets")
    train = load_split(plan.train_path, ("train",), cache_dir=cache)
    evald = None
    if plan.eval_path is not None:
        evald = load_split(plan.eval_path, EVAL_SPLITS, cache_dir=cache)
    elif plan.eval_split_in_train is not None:
        evald = load_split(plan.train_path, (plan.eval_split_in_train,), cache_dir=cache)
    return limit_raw(train, hp.max_train_samples), limit_raw(evald, hp.max_eval_samples)
