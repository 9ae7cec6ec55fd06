"""The evaluation job's hyperparameters: its own ``ftl_eval_*`` entries (written by the
platform's ``jobmodel.evaluation.arguments``) and the training job's, passed on unchanged."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ftl_train.hparams import HyperparameterError, split_cli

PREFIX = "ftl_eval_"
KEYS = (
    "archive_kind",
    "task_metrics_channel",
    "lm_eval_tasks",
    "lm_eval_task_channel",
    "num_fewshot",
    "limit",
    "golden_sets",
)


@dataclass(frozen=True)
class EvalArgs:
    """What to run. Empty strings in the job's hyperparameters read as nothing."""

    archive_kind: str
    task_metrics_channel: str | None
    lm_eval_tasks: tuple[str, ...]
    lm_eval_task_channel: str | None
    num_fewshot: int
    limit: int | None
    golden_sets: tuple[str, ...]

    @property
    def uses_harness(self) -> bool:
        return bool(self.lm_eval_tasks or self.golden_sets)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in KEYS}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    return "" if value is None else json.dumps(value)


def _list(value: Any) -> tuple[str, ...]:
    return tuple(part.strip() for part in _text(value).split(",") if part.strip())


def _int(raw: Mapping[str, Any], key: str, default: int | None) -> int | None:
    text = _text(raw.get(PREFIX + key, ""))
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise HyperparameterError(f"{PREFIX}{key} must be an integer, got {text!r}") from None


def read(argv: Sequence[str] | None, environ: Mapping[str, str]) -> tuple[EvalArgs, dict[str, Any]]:
    """``(what to run, the training job's hyperparameters)`` from ``SM_HPS`` and ``argv``."""
    raw: dict[str, Any] = {}
    if environ.get("SM_HPS"):
        try:
            hps = json.loads(environ["SM_HPS"])
        except json.JSONDecodeError as exc:
            raise HyperparameterError(f"SM_HPS is not valid JSON: {exc}") from None
        if isinstance(hps, dict):
            raw.update(hps)
    if argv:
        raw.update(split_cli(argv))
    own = {k: v for k, v in raw.items() if k.startswith(PREFIX)}
    unknown = sorted(k for k in own if k[len(PREFIX) :] not in KEYS)
    if unknown:
        raise HyperparameterError(f"unknown evaluation hyperparameter(s): {', '.join(unknown)}")
    kind = _text(own.get(PREFIX + "archive_kind", ""))
    if not kind:
        raise HyperparameterError(f"{PREFIX}archive_kind is required (what the archive holds)")
    args = EvalArgs(
        archive_kind=kind,
        task_metrics_channel=_text(own.get(PREFIX + "task_metrics_channel", "")) or None,
        lm_eval_tasks=_list(own.get(PREFIX + "lm_eval_tasks", "")),
        lm_eval_task_channel=_text(own.get(PREFIX + "lm_eval_task_channel", "")) or None,
        num_fewshot=_int(own, "num_fewshot", 0) or 0,
        limit=_int(own, "limit", None),
        golden_sets=_list(own.get(PREFIX + "golden_sets", "")),
    )
    training = {k: v for k, v in raw.items() if not k.startswith(PREFIX)}
    return args, training
