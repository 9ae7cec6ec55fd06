"""One timed pair for ``bench/evaluation_overhead.py``: a template's training entrypoint on N
generated examples, then its evaluation entrypoint on N held-out examples, each in a fresh
process of this Python, as a container starts it.

    python bench/_eval_overhead_run.py SPEC.json

SPEC: ``work``, ``family`` (the tiny model's), ``n``, ``training`` (the template's decoded
training hyperparameters, as rendered) and ``evaluation`` (the evaluation job's, from
``jobmodel.evaluation.arguments``), ``channel`` (the held-out channel). Prints one line
``FTL_EVAL_OVERHEAD {"train_s": ..., "eval_s": ..., "train_rc": ..., "eval_rc": ...}``.

Both runs use the image matrix's tiny models and generated data (``tests/images/harness.py``)
and the shipped entrypoints (``training/train.py``, ``training/evaluate.py``); the model the
evaluation reads is the one training wrote, packed as SageMaker packs ``model.tar.gz``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [
    str(ROOT / "tests" / "images"),
    str(ROOT / "training"),
    str(ROOT / "tests" / "training"),
]

import ftl_train_testlib as tl  # noqa: E402
import harness  # noqa: E402

# The training run's only changes from the rendered hyperparameters: the tiny model, one
# epoch, and no checkpoint or log line inside the timed run (the evaluation job's cost is
# compared with training's, not with its checkpoint writes); no best-model reload, which
# needs evaluation inside the training run.
NO_SAVES = {"num_train_epochs": 1, "save_steps": 10**6, "logging_steps": 10**6}


def _timed(script: str, env: dict[str, str], log: Path) -> tuple[float, int]:
    started = time.perf_counter()
    with log.open("w") as out:
        rc = subprocess.run(
            [sys.executable, str(ROOT / "training" / script)],
            env=env,
            cwd=str(ROOT / "training"),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=900,
        ).returncode
    return time.perf_counter() - started, rc


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    work = Path(spec["work"])
    n = int(spec["n"])
    hp = {k: v for k, v in spec["training"].items() if not k.startswith("sagemaker_")}
    task = hp["task"]
    model = harness.make_model(work / "tiny", spec["family"], task, int(hp.get("num_labels", 3)))
    hp.update(NO_SAVES, model_name_or_path=str(model), checkpoint_dir=str(work / "checkpoints"))
    hp.pop("max_steps", None)  # a template's step count would override the one epoch
    if hp.get("load_best_model_at_end"):  # it needs in-run evaluation: the evaluation job's
        hp["load_best_model_at_end"] = False
    train = tl.write_records(harness.records(task, hp, n, seed=1), work / "train", "jsonl")
    held = tl.write_records(harness.records(task, hp, n, seed=2), work / spec["channel"], "jsonl")
    base = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    train_env = tl.sm_environ(work / "t", {"train": train}, SM_HPS=json.dumps(hp), **base)
    train_s, train_rc = _timed("train.py", train_env, work / "train.log")

    archive = work / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    trained = work / "t" / "model_out"
    source = trained if any(trained.glob("*.safetensors")) or any(trained.glob("*.bin")) else model
    with tarfile.open(archive / "model.tar.gz", "w:gz") as tar:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                tar.add(str(path), arcname=str(path.relative_to(source)))
    ev = dict(spec["evaluation"])
    eval_env = tl.sm_environ(
        work / "e", {"archive": archive, spec["channel"]: held}, SM_HPS=json.dumps(ev), **base
    )
    eval_s, eval_rc = _timed("evaluate.py", eval_env, work / "eval.log")
    tails = {
        name: (work / f"{name}.log").read_text()[-2000:]
        for name, rc in (("train", train_rc), ("eval", eval_rc))
        if rc != 0
    }
    report = {
        "train_s": round(train_s, 3),
        "eval_s": round(eval_s, 3),
        "train_rc": train_rc,
        "eval_rc": eval_rc,
        "tails": tails,
    }
    print("FTL_EVAL_OVERHEAD " + json.dumps(report), flush=True)
    return 0 if train_rc == 0 and eval_rc == 0 else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main(sys.argv[1]))
