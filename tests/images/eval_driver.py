"""The evaluation entrypoint in one image's package set (issue 36): run by
``test_eval_matrix.py`` with the image environment's Python, like ``harness.py``.

    <env>/bin/python tests/images/eval_driver.py SPEC.json

SPEC holds the evaluation job's hyperparameters (decoded, as the toolkit hands them over,
written by the platform's ``jobmodel.evaluation.arguments``), the held-out channel's name and
the tiny model's family. The driver builds the model in this image's transformers (as the
matrix does), packs it as SageMaker's ``model.tar.gz`` in the ``archive`` channel, writes
held-out data for the template's columns, runs ``ftl_eval.main`` and prints
``FTL_EVAL_REPORT {evaluation.json}`` last.
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "training"), str(REPO / "tests" / "training")]

import ftl_train_testlib as tl  # noqa: E402
import harness  # noqa: E402  (the matrix's tiny models and data)


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    work = Path(spec["work"])
    hps = spec["hyperparameters"]
    task = hps["task"]
    model = harness.make_model(work / "model", spec["family"], task, int(hps.get("num_labels", 3)))
    archive = work / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive / "model.tar.gz", "w:gz") as tar:
        for path in sorted(model.rglob("*")):
            if path.is_file():
                tar.add(str(path), arcname=str(path.relative_to(model)))
    channel = spec["channel"]
    held = tl.write_records(harness.records(task, hps, 16, seed=7), work / channel, "jsonl")
    env = tl.sm_environ(work, {"archive": archive, channel: held}, SM_HPS=json.dumps(hps))
    from ftl_eval.main import main as evaluate

    rc = evaluate([], env)
    report = json.loads((work / "output_data" / "evaluation.json").read_text())
    print("FTL_EVAL_REPORT " + json.dumps(report), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
