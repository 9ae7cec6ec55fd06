"""The evaluation entrypoint runs in the image of every template whose shipped policy has task
metrics (issue 36): the platform's evaluation hyperparameters for the template, a tiny model
of its family packed as ``model.tar.gz``, held-out data for its columns, in the image's
package set (``testsupport/image_envs.py``); every gated metric comes out finite.

lm-evaluation-harness is not run here: the image environments are shared and built from the
images' package sets, and an evaluation job installs ``lm_eval`` at its start
(``training/requirements-eval.txt``); tests/training/test_eval_causal.py runs it.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

import jobmodel as jm
from image_sets import for_uri
from jobmodel.after_training.archive import archive_kind
from jobmodel.evaluation import arguments
from tests.images.matrix import ROWS
from tests.images.test_image_matrix import rendered
from testsupport import image_envs

pytestmark = [pytest.mark.slow, pytest.mark.images]

DRIVER = Path(__file__).resolve().parent / "eval_driver.py"
WITH_TASK_METRICS = sorted(
    name
    for name, spec in jm.shipped_catalog().items()
    if spec.evaluation is not None and spec.evaluation.task_metrics_channel
)


def test_the_shipped_task_metric_policies_are_the_ones_run_here():
    assert WITH_TASK_METRICS == [
        "bert-large-qa",
        "distilbert-chain",
        "distilbert-multilingual-sentiment",
        "distilbert-spot",
        "gpt-tp-sharded",
        "roberta-large-mnli-mp",
    ]


@pytest.mark.parametrize("name", WITH_TASK_METRICS)
def test_the_evaluation_runs_in_the_templates_image(name: str, tmp_path: Path) -> None:
    spec, request = rendered(name)
    policy = spec.evaluation
    assert policy is not None and policy.task_metrics_channel is not None
    training = {k: json.loads(v) for k, v in request["HyperParameters"].items()}
    hps = arguments.hyperparameters(policy, archive_kind(training), training)
    driver_spec = {
        "work": str(tmp_path),
        "family": ROWS[name].family,
        "channel": policy.task_metrics_channel,
        "hyperparameters": hps,
    }
    (tmp_path / "spec.json").write_text(json.dumps(driver_spec))
    python = image_envs.ensure(for_uri(spec.image_uri or ""))
    done = subprocess.run(
        [str(python), str(DRIVER), str(tmp_path / "spec.json")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = (done.stdout + done.stderr)[-5000:]
    assert done.returncode == 0, tail
    line = [x for x in done.stdout.splitlines() if x.startswith("FTL_EVAL_REPORT ")]
    report = json.loads(line[-1].split(" ", 1)[1])
    assert report["status"] == "Completed" and report["archive_kind"] == "full-model", tail
    for gated in policy.gate:
        value = report["metrics"].get(gated.metric)
        assert value is not None and math.isfinite(value), (gated.metric, report["metrics"])
