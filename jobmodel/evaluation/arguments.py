"""What the evaluation job hands its entrypoint (``training/evaluate.py``): channels and
hyperparameters. Pure; the request around them (image, role, instance, spot, time limit,
tags) is rendered where the training job's is.

Channels: ``archive`` (the Completed attempt's ``model.tar.gz``), ``base_model`` (for a LoRA
adapter only: the training job's ``model`` channel, the base the adapter was trained on), the
held-out channel and the lm-eval task channel under their template names, and one
``golden_<name>`` per golden set (in the team's prefix of the data bucket).

Hyperparameters: the training job's own (the entrypoint prepares the held-out data as
training did, with the same ``task``, lengths and columns), without SageMaker's
``sagemaker_*``, plus the ``ftl_eval_*`` entries of :data:`EVAL_KEYS`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..after_training.archive import ADAPTER, ArchiveKind
from ..templates.evaluation_policy import EvaluationPolicy

__all__ = [
    "ARCHIVE_CHANNEL",
    "BASE_CHANNEL",
    "EVAL_KEYS",
    "GOLDEN_PREFIX",
    "TRAINING_BASE_CHANNEL",
    "channels",
    "hyperparameters",
]

ARCHIVE_CHANNEL = "archive"
BASE_CHANNEL = "base_model"
TRAINING_BASE_CHANNEL = "model"  # the causal-LM templates' base model channel
GOLDEN_PREFIX = "golden_"
EVAL_KEYS = (
    "ftl_eval_archive_kind",
    "ftl_eval_task_metrics_channel",
    "ftl_eval_lm_eval_tasks",
    "ftl_eval_lm_eval_task_channel",
    "ftl_eval_num_fewshot",
    "ftl_eval_limit",
    "ftl_eval_golden_sets",
)


def hyperparameters(
    policy: EvaluationPolicy, archive: ArchiveKind, training: Mapping[str, str]
) -> dict[str, str]:
    """The evaluation job's HyperParameters (values as strings, as CreateTrainingJob wants)."""
    out = {k: v for k, v in training.items() if not k.startswith(("sagemaker_", "ftl_eval_"))}
    lm = policy.lm_eval
    out.update(
        {
            "ftl_eval_archive_kind": archive.kind,
            "ftl_eval_task_metrics_channel": policy.task_metrics_channel or "",
            "ftl_eval_lm_eval_tasks": ",".join(lm.tasks) if lm else "",
            "ftl_eval_lm_eval_task_channel": (lm.task_channel or "") if lm else "",
            "ftl_eval_num_fewshot": str(lm.num_fewshot if lm else 0),
            "ftl_eval_limit": "" if lm is None or lm.limit is None else str(lm.limit),
            "ftl_eval_golden_sets": ",".join(g.name for g in policy.golden_sets),
        }
    )
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in out.items()}


def channels(
    policy: EvaluationPolicy,
    archive: ArchiveKind,
    *,
    model_data_url: str,
    training_channels: Mapping[str, str],
    team_data_prefix: str,
) -> dict[str, str]:
    """Channel name -> S3 URI. ``training_channels`` are the training job's input channels,
    ``team_data_prefix`` is ``s3://<data bucket>/<team>/`` (or the bucket's root for a
    single-team deployment). A channel the training job did not get is left out: the
    entrypoint then says which one is missing."""
    out = {ARCHIVE_CHANNEL: model_data_url}
    if archive.kind == ADAPTER and TRAINING_BASE_CHANNEL in training_channels:
        out[BASE_CHANNEL] = training_channels[TRAINING_BASE_CHANNEL]
    held = [policy.task_metrics_channel, policy.lm_eval.task_channel if policy.lm_eval else None]
    for name in held:
        if name is not None and name in training_channels:
            out[name] = training_channels[name]
    prefix = team_data_prefix.rstrip("/") + "/"
    for golden in policy.golden_sets:
        out[f"{GOLDEN_PREFIX}{golden.name}"] = prefix + golden.prefix
    return out
