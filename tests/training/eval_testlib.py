"""Helpers for the evaluation entrypoint's tests: archives as SageMaker writes them, and the
evaluation job's hyperparameters as the platform writes them (jobmodel.evaluation)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from ftl_train_testlib import parse_lines, sm_environ

from jobmodel.after_training.archive import archive_kind
from jobmodel.evaluation import arguments as A
from jobmodel.templates.evaluation_policy import EvaluationPolicy


def tar_archive(model_dir: Path, dest: Path) -> Path:
    """``model_dir``'s files as ``dest/model.tar.gz`` (what the ``archive`` channel gets)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest / "model.tar.gz", "w:gz") as tar:
        for path in sorted(model_dir.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(model_dir)))
    return dest


def eval_environ(
    tmp: Path, policy: dict[str, Any], training_hps: dict[str, Any], channels: dict[str, Path]
) -> dict[str, str]:
    """The job's environment: ``SM_HPS`` from the platform's own functions."""
    hps = A.hyperparameters(
        EvaluationPolicy.from_dict(policy),
        archive_kind(training_hps),
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in training_hps.items()},
    )
    return sm_environ(tmp, channels, SM_HPS=json.dumps(hps), TRAINING_JOB_NAME="job-eval")


def result(tmp: Path) -> dict[str, Any]:
    return json.loads((tmp / "output_data" / "evaluation.json").read_text())


def metric_lines(out: str) -> dict[str, float]:
    lines = parse_lines(out)
    assert all(step == 0 for _, _, step in lines)
    return {name: float(value) for name, value, _ in lines}
