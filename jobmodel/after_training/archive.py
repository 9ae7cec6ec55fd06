"""What a completed job's ``model.tar.gz`` holds (issue 36): one fact for the registry's
version, its lineage and the evaluation job.

Standard library only. The kind follows from the job's hyperparameters as the training
entrypoint reads them (training/README.md, ``ftl_train/lora.py:save_final``):

* ``full-model``: a model at the archive's root (``peft`` unset or ``none``);
* ``lora-adapter``: a LoRA adapter at the root (``adapter_config.json``), to be applied to the
  base model the job named (``peft`` ``lora`` or ``qlora``);
* ``merged-model``: the base model with the adapter merged in at the root, the adapter itself
  under ``adapter/`` (``peft`` ``lora`` or ``qlora`` with ``merge_adapter`` true).

The evaluation entrypoint (``training/ftl_eval/artifact.py``) names the same three kinds and
checks that the archive it reads has the layout this module says it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ADAPTER",
    "ADAPTER_SUBDIR",
    "FULL_MODEL",
    "KINDS",
    "MERGED",
    "ArchiveKind",
    "archive_kind",
]

FULL_MODEL = "full-model"
ADAPTER = "lora-adapter"
MERGED = "merged-model"
KINDS = (FULL_MODEL, ADAPTER, MERGED)
ADAPTER_SUBDIR = "adapter"  # where a merged archive keeps its adapter
BASE_MODEL = "model_name_or_path"
PEFT_ADAPTERS = ("lora", "qlora")
# The entrypoint's spellings of a true boolean hyperparameter (ftl_train/hparams.py).
_TRUE = frozenset({"true", "1", "yes", "y", "on"})


@dataclass(frozen=True, kw_only=True)
class ArchiveKind:
    """A job's archive: ``kind`` (one of :data:`KINDS`) and the base model it started from
    (``model_name_or_path``; None when the job named none)."""

    kind: str
    base_model: str | None = None

    @property
    def needs_base_model(self) -> bool:
        """Only an adapter needs its base model to be used (a merged archive is whole)."""
        return self.kind == ADAPTER

    @property
    def adapter_path(self) -> str | None:
        """Where the adapter sits inside the archive: its root, ``adapter/``, or nowhere."""
        return {ADAPTER: "", MERGED: f"{ADAPTER_SUBDIR}/"}.get(self.kind)

    def describe(self) -> str:
        """The version description's ``<what>``."""
        base = self.base_model or "the template's model"
        if self.kind == ADAPTER:
            return f"LoRA adapter of {base} (load the base model, then apply the adapter)"
        if self.kind == MERGED:
            return (
                f"merged model: {base} with its LoRA adapter merged in "
                f"(the adapter alone under {ADAPTER_SUBDIR}/)"
            )
        return f"model fine-tuned from {base}"

    def lineage(self) -> dict[str, str]:
        """The lineage entries: ``artifact`` always, ``base_model`` where one is named."""
        out = {"artifact": self.kind}
        if self.base_model:
            out["base_model"] = self.base_model
        return out


def _true(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    return isinstance(value, str) and value.strip().strip('"').lower() in _TRUE


def archive_kind(hyperparameters: Mapping[str, Any]) -> ArchiveKind:
    """The archive a job with these hyperparameters leaves (values as the script sees them:
    strings, or the template's JSON values)."""
    peft = str(hyperparameters.get("peft") or "none").strip().strip('"').lower()
    base = hyperparameters.get(BASE_MODEL)
    base_model = None if base in (None, "") else str(base).strip('"')
    if peft not in PEFT_ADAPTERS:
        return ArchiveKind(kind=FULL_MODEL, base_model=base_model)
    merged = _true(hyperparameters.get("merge_adapter", False))
    return ArchiveKind(kind=MERGED if merged else ADAPTER, base_model=base_model)
