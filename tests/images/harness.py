"""One template through its image's package set: prepare, start, stop, resume, check.

Run by ``test_image_matrix.py`` with the image environment's Python (3.9 and up: standard
library, the image's packages and ``tests/training``'s offline builders only):

    <env>/bin/python tests/images/harness.py SPEC.json

SPEC (written by the test from the platform's rendered ``CreateTrainingJob`` request) holds
the rendered hyperparameters, channels and environment, the overrides the test applies
(listed there), the tiny model's family, the template's declared metrics, the stand-in
folders for the image's closed libraries, and the container's PID 1 command line as
SageMaker resolves it from the request. The harness lays out a SageMaker container's
``/opt/ml`` in a work folder: ``input/config/hyperparameters.json`` with the rendered values
as SageMaker writes them (JSON-encoded strings), ``resourceconfig.json`` and
``inputdataconfig.json``, the channels with generated data, and the source directory packed
as ``sourcedir.tar.gz``. Then it starts the container twice (``container_run``: its own PID
and mount namespace, the work folder mounted at ``/opt/ml``, PID 1 the request's init and
the image's start script, whose ``train`` is the toolkit, ``toolkit_shim.py``). The first
start is stopped after its second logged step as SageMaker stops a container (SIGTERM to
PID 1 from outside, SIGKILL after the grace period), the second resumes from the checkpoint
and runs to the end. Each start has a deadline: past it, every Python process's stack is
taken with py-spy and the start fails with them. The last line printed is
``FTL_MATRIX_REPORT {json}``.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "training"))

import container_run  # noqa: E402
import ftl_train_testlib as tl  # noqa: E402

LOSS_LINE = re.compile(r"ftl_metric name=train_loss value=(\S+) step=(\d+)")
METRIC_LINE = re.compile(r"ftl_metric name=([a-z0-9_]+) value=(\S+) step=(\d+)")


# ---------------------------------------------------------------- tiny models


def _encoder_config(family: str, vocab: int):  # -> transformers.PretrainedConfig
    import transformers

    common = dict(vocab_size=vocab, max_position_embeddings=512)
    if family == "bert":
        return transformers.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            **common,
        )
    if family == "roberta":
        cfg = transformers.RobertaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=3,
            type_vocab_size=2,  # the tiny tokenizer is BERT-style: pairs get segment ids 0 and 1
            vocab_size=vocab,
            max_position_embeddings=514,
        )
        return cfg
    if family == "distilbert":
        return transformers.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=37, **common)
    if family == "albert":
        return transformers.AlbertConfig(
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=37,
            pad_token_id=0,
            **common,
        )
    if family == "gpt2":
        return transformers.GPT2Config(
            vocab_size=vocab,
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_positions=512,
            bos_token_id=tl.VOCAB.index("[CLS]"),
            eos_token_id=tl.VOCAB.index("[SEP]"),
            pad_token_id=0,
        )
    raise ValueError(f"unknown model family {family!r}")


def make_model(path: Path, family: str, task: str, num_labels: int) -> Path:
    """A tiny model of the template's family, saved with its tokenizer, in this image's
    transformers (so the files are what this version writes)."""
    import transformers

    if family == "llama":
        import llm_testlib

        return llm_testlib.make_llama_dir(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = tl.make_tokenizer()
    cfg = _encoder_config(family, len(tl.VOCAB))
    if task == "classification":
        cfg.num_labels = num_labels
    auto = {
        "qa": transformers.AutoModelForQuestionAnswering,
        "classification": transformers.AutoModelForSequenceClassification,
        "mlm": transformers.AutoModelForMaskedLM,
        "clm": transformers.AutoModelForCausalLM,
    }[task]
    transformers.set_seed(0)
    auto.from_config(cfg).save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


# ---------------------------------------------------------------- generated data


def records(task: str, hp: dict, n: int, seed: int) -> list:
    if task == "qa":
        return tl.qa_records(n, seed=seed, lo=10, hi=40)
    if task == "classification":
        if hp.get("label_mapping") == "stars3":
            return tl.cls_records(n, seed=seed, stars=True)
        pair = bool(hp.get("text_pair_column"))
        recs = tl.cls_records(n, seed=seed, pair=pair)
        num_labels = int(hp.get("num_labels", 3))
        for r in recs:
            r["label"] = int(r["label"]) % num_labels
        return recs
    if task in ("mlm", "clm"):
        return tl.lm_records(n, seed=seed)
    if task == "sft":
        import llm_testlib

        return llm_testlib.chat_records(n, seed=seed)
    raise ValueError(task)


# ---------------------------------------------------------------- the container


def _decoded(encoded: dict) -> dict:
    return {k: json.loads(v) for k, v in encoded.items()}


def lay_out(spec: dict, work: Path) -> dict:
    """The container's /opt/ml under ``work``; returns the decoded hyperparameters in force."""
    rendered = _decoded(spec["hyperparameters"])
    hp = dict(rendered)
    hp.update(spec["overrides"])
    task = hp["task"]
    data = work / "input" / "data"
    channels = {}
    for name in spec["channels"]:
        if name == "model":
            make_model(data / "model", spec["family"], task, int(hp.get("num_labels", 3)))
        else:
            seed = 1 if name == "train" else 2
            n = spec["train_records"] if name == "train" else spec["eval_records"]
            tl.write_records(records(task, hp, n, seed), data / name, "jsonl")
        channels[name] = {
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        }
    if "model" not in spec["channels"]:
        make_model(work / "tiny-model", spec["family"], task, int(hp.get("num_labels", 3)))
        hp["model_name_or_path"] = str(work / "tiny-model")
    src = work / "sourcedir.tar.gz"
    with tarfile.open(src, "w:gz") as tar:
        training = REPO / "training"
        for item in sorted(training.iterdir()):
            if item.name in ("__pycache__",) or item.suffix == ".md":
                continue
            tar.add(
                str(item),
                arcname=item.name,
                filter=lambda t: None if "__pycache__" in t.name else t,
            )
    hp["sagemaker_submit_directory"] = str(src)
    config = work / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "hyperparameters.json").write_text(
        json.dumps({k: json.dumps(v) for k, v in hp.items()})
    )
    instance_type = spec["instance_type"]
    (config / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": "algo-1",
                "current_instance_type": instance_type,
                "current_group_name": "homogeneousCluster",
                "hosts": ["algo-1"],
                "instance_groups": [
                    {
                        "instance_group_name": "homogeneousCluster",
                        "instance_type": instance_type,
                        "hosts": ["algo-1"],
                    }
                ],
                "network_interface_name": "lo",
            }
        )
    )
    (config / "inputdataconfig.json").write_text(json.dumps(channels))
    for d in ("model", "output/data", "code"):
        (work / d).mkdir(parents=True, exist_ok=True)
    return hp


def start(spec: dict, work: Path, label: str, sigterm_after_step: int | None) -> dict:
    """One start of the container, stopped once a loss line at ``sigterm_after_step`` or
    later has been printed (as a spot interruption or StopTrainingJob would)."""
    rcfile = work / (f"{label}.rc")
    if rcfile.exists():
        rcfile.unlink()
    env = dict(os.environ)
    env.update(spec["environment"])
    stand_ins = [str(REPO / p) for p in spec["stand_ins"]]
    env.pop("SAGEMAKER_BASE_DIR", None)  # the container's own /opt/ml is the work folder
    env.update(
        {
            "SM_STUDIO_LOCAL_MODE": "true",
            "FTL_MATRIX_PYTHON": sys.executable,
            "FTL_MATRIX_TOOLKIT": str(HERE / "toolkit_shim.py"),
            "FTL_MATRIX_RCFILE": str(rcfile),
            "FTL_MATRIX_NPROC": str(spec["nproc"]),
            "FTL_CACHE_DIR": str(work / "cache"),
            "HF_HOME": str(work / "hf"),
            "HF_DATASETS_CACHE": str(work / "hf" / "datasets"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
            "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join(stand_ins),
            "OMP_NUM_THREADS": "1",
        }
    )
    env.pop("SM_STUDIO_LOCAL_MODE", None) if spec.get("dns_check") else None
    started = time.monotonic()
    box = container_run.start(spec["container_command"], opt_ml=work, env=env)
    box.watchdog(spec["deadline_seconds"], spec.get("py_spy"))
    lines = []
    signalled_at = None
    assert box.proc.stdout is not None
    for raw in box.proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        lines.append(line)
        m = LOSS_LINE.search(line)
        if (
            sigterm_after_step is not None
            and signalled_at is None
            and m
            and int(m.group(2)) >= sigterm_after_step
        ):
            box.stop(spec["grace_seconds"])
            signalled_at = int(m.group(2))
    container_rc = box.wait()
    log = "\n".join(lines)
    (work / (f"{label}.log")).write_text(log)
    return {
        "container_rc": container_rc,
        "rc": int(rcfile.read_text()) if rcfile.exists() else None,
        "signalled_at_step": signalled_at,
        "stop_seconds": round(time.monotonic() - box.signalled_at, 1)
        if box.signalled_at is not None
        else None,
        "killed_after_grace": box.killed_after_grace,
        "hung": box.hung,
        "stacks": box.stacks,
        "stopped_on_sigterm": "stopped on SIGTERM after checkpointing" in log,
        "reported_success": "Reporting training SUCCESS" in log,
        "seconds": round(time.monotonic() - started, 1),
        "log": log,
    }


def complete_checkpoints(folder: Path) -> list:
    return sorted(
        p.name for p in folder.glob("checkpoint-*") if (p / "trainer_state.json").exists()
    )


def best_model_state(folder: Path, log: str) -> dict:
    """What the newest checkpoint's ``trainer_state.json`` records about the best model, and
    which checkpoint the run's end loaded (issue 34: ranks disagreed on it and hung)."""
    steps = sorted(
        (int(p.name.split("-")[1]), p)
        for p in folder.glob("checkpoint-*")
        if (p / "trainer_state.json").exists()
    )
    state = json.loads((steps[-1][1] / "trainer_state.json").read_text()) if steps else {}
    loaded = re.search(r"Loading best model from (\S+)", log)
    return {
        "newest": steps[-1][1].name if steps else None,
        "best_metric": state.get("best_metric"),
        "best_global_step": state.get("best_global_step"),
        "best_model_checkpoint": state.get("best_model_checkpoint"),
        "loaded": loaded.group(1) if loaded else None,
    }


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    work = Path(spec["work"])
    work.mkdir(parents=True, exist_ok=True)
    import torch
    import transformers

    report = {
        "template": spec["template"],
        "python": ".".join(str(v) for v in sys.version_info[:3]),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    hp = lay_out(spec, work)
    first = start(spec, work, "start-1", spec["sigterm_after_step"])
    checkpoints_after_sigterm = complete_checkpoints(work / "checkpoints")
    second = start(spec, work, "start-2", None)
    losses = [
        float(v)
        for _s, v in (
            (m.group(2), m.group(1))
            for m in LOSS_LINE.finditer(first["log"] + "\n" + second["log"])
        )
    ]
    printed = set(m.group(1) for m in METRIC_LINE.finditer(first["log"] + "\n" + second["log"]))
    model_dir = work / "model"
    resumed = re.search(r"resuming from (\S+)", second["log"])
    report.update(
        {
            "overrides": sorted(spec["overrides"])
            + ["sagemaker_submit_directory"]
            + ([] if "model" in spec["channels"] else ["model_name_or_path"]),
            "launch": [
                m.group(1)
                for m in re.finditer(r"ftl_matrix launch kind=(\w+) .*train\.py", first["log"])
            ],
            "first": {k: v for k, v in first.items() if k != "log"},
            "second": {k: v for k, v in second.items() if k != "log"},
            "checkpoints_after_sigterm": checkpoints_after_sigterm,
            "best_model": best_model_state(work / "checkpoints", second["log"]),
            "resumed_from": resumed.group(1) if resumed else None,
            "losses": losses,
            "losses_finite": bool(losses) and all(math.isfinite(x) for x in losses),
            "metrics_printed": sorted(printed),
            "metrics_missing": sorted(set(spec["metrics"]) - printed),
            "model_files": sorted(p.name for p in model_dir.iterdir())
            if model_dir.exists()
            else [],
            "max_steps": hp.get("max_steps"),
            "final_step": max(
                (int(m.group(3)) for m in METRIC_LINE.finditer(second["log"])), default=None
            ),
        }
    )
    print("FTL_MATRIX_REPORT " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
