"""Every shipped template trains in the image it names (issue: the image matrix).

For each template: the platform renders its ``CreateTrainingJob`` request; the image's
package set (``image_sets/``) gives an environment (``testsupport/image_envs.py``); there
``harness.py`` lays out the container and starts it as SageMaker does (its own PID and mount
namespace, ``/opt/ml`` mounted, PID 1 the request's ``ContainerEntrypoint`` +
``ContainerArguments``: the platform's init running the image's start script, whose ``train``
is the real SageMaker training toolkit) with the rendered hyperparameters, environment and
channels. It stops the container after the job's second step as SageMaker does (SIGTERM to
PID 1 from outside, SIGKILL after the grace period), starts it again and checks the job
checkpointed within the grace, resumed from the checkpoint to the end, wrote its model
directory and printed every metric the template declares. A start past its deadline fails
with every Python process's stack (py-spy). ``matrix.py`` lists the overrides.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jobmodel as jm
from ftl_constructs.job_template import resolve_template_image
from image_sets import for_uri
from tests.images.container_run import container_command
from tests.images.matrix import (
    EVAL_STEPS_OVERRIDE,
    GPU_ONLY_METRICS,
    ROWS,
    STAND_IN_DIRS,
    STEP_OVERRIDES,
)
from testsupport import image_envs

pytestmark = [pytest.mark.slow, pytest.mark.images]

HARNESS = Path(__file__).resolve().parent / "harness.py"
REPO = HARNESS.parents[2]
REGION = "us-east-1"
# StopTrainingJob's grace period (SIGTERM, then SIGKILL 120 s later; a spot reclaim gives two
# minutes' notice); each start's deadline, past which the watchdog dumps the stacks.
GRACE_SECONDS = 120
DEADLINE_SECONDS = 420
PY_SPY = Path(sys.executable).parent / "py-spy"

PLATFORM = jm.PlatformConfig(
    region=REGION,
    role_arn="arn:aws:iam::123456789012:role/ftl-training",
    data_bucket="ftl-data-123456789012",
    checkpoint_bucket="ftl-checkpoints-123456789012",
    artifact_bucket="ftl-artifacts-123456789012",
    source_s3_uri="s3://ftl-artifacts-123456789012/source/sourcedir.tar.gz",
)


def rendered(name: str) -> tuple[jm.TemplateSpec, dict[str, Any]]:
    shipped = jm.shipped_catalog()[name]
    image = resolve_template_image(REGION, shipped.framework, shipped.default_instance_type)
    spec = shipped.with_image(image, entrypoint=for_uri(image).entrypoint)  # as synth does
    inputs = {c.name: f"s3://{PLATFORM.data_bucket}/{c.name}/" for c in spec.inputs}
    req = jm.validate_submit({"template": name, "inputs": inputs}, {name: spec}, PLATFORM)
    return spec, jm.render_create_training_job(req, spec, PLATFORM, job_name=f"{name}-matrix")


def run_template(name: str, work: Path) -> dict[str, Any]:
    row = ROWS[name]
    spec, request = rendered(name)
    image_set = for_uri(spec.image_uri or "")
    python = image_envs.ensure(image_set)
    channels = [c["ChannelName"] for c in request.get("InputDataConfig", [])]
    harness_spec = {
        "template": name,
        "work": str(work),
        "family": row.family,
        "nproc": row.nproc,
        "hyperparameters": request["HyperParameters"],
        "environment": request.get("Environment", {}),
        "instance_type": request["ResourceConfig"]["InstanceType"],
        "channels": channels,
        "overrides": {
            **STEP_OVERRIDES,
            **({"eval_steps": EVAL_STEPS_OVERRIDE} if "eval_steps" in spec.hyperparameters else {}),
            **row.extra_overrides,
            **_mp_overrides(request, row.mp_overrides),
        },
        "metrics": [m["Name"] for m in request["AlgorithmSpecification"]["MetricDefinitions"]],
        "stand_ins": [path for lib, path in STAND_IN_DIRS.items() if image_set.ships(lib)],
        "sigterm_after_step": 2,
        "container_command": container_command(
            request["AlgorithmSpecification"], image_set.entrypoint
        ),
        "grace_seconds": GRACE_SECONDS,
        "deadline_seconds": DEADLINE_SECONDS,
        "py_spy": str(PY_SPY) if PY_SPY.exists() else None,
        "train_records": 48,
        "eval_records": 12,
    }
    spec_path = work / "spec.json"
    work.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(json.dumps(harness_spec, indent=2))
    trace = work / "standin-trace.jsonl"
    done = subprocess.run(
        [str(python), str(HARNESS), str(spec_path)],
        capture_output=True,
        text=True,
        timeout=2 * DEADLINE_SECONDS + 300,
        env=_trace_env(trace, image_set),
    )
    tail = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, tail
    line = [x for x in done.stdout.splitlines() if x.startswith("FTL_MATRIX_REPORT ")]
    assert line, tail
    report = json.loads(line[-1].split(" ", 1)[1])
    report["_logs"] = {p.name: p.read_text()[-4000:] for p in work.glob("start-*.log")}
    report["image_set"] = image_set.name
    report["trace"] = (
        [json.loads(x) for x in trace.read_text().splitlines()] if trace.exists() else []
    )
    report["channels"] = channels
    return report


def _mp_overrides(request: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The template's SMP parameters with a row's CPU changes, as one override."""
    if not changes:
        return {}
    return {"mp_parameters": {**json.loads(request["HyperParameters"]["mp_parameters"]), **changes}}


def _trace_env(trace: Path, image_set: Any) -> dict[str, str]:
    """The stand-ins trace every call to ``trace`` (issue 34); where the image ships smddp, its
    stand-in ``smddprun`` is on PATH, so the toolkit builds the launch line the real image gets."""
    env = dict(os.environ, FTL_STANDIN_TRACE=str(trace))
    if image_set.ships("smdistributed-dataparallel"):
        bin_dir = REPO / STAND_IN_DIRS["smdistributed-dataparallel"] / "bin"
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def assert_distribution_path_ran(name: str, report: dict[str, Any], logs: str) -> None:
    """From the stand-ins' trace and the logs: the template's distribution really ran."""
    kind = jm.shipped_catalog()[name].distribution.kind
    calls: dict[str, list[dict[str, Any]]] = {}
    for record in report["trace"]:
        calls.setdefault(record["call"], []).append(record)
    if kind == "smddp":
        assert "smddprun" in logs, "the toolkit's launch line runs smddprun"
        assert {c["backend"] for c in calls.get("init_process_group", [])} == {"smddp"}
        assert calls.get("backend.create") and calls.get("ddp.wrap"), sorted(calls)
    elif kind == "smp":
        assert calls.get("init") and calls.get("DistributedModel") and calls.get("step")
        tp = dict(ROWS[name].mp_overrides).get("tensor_parallel_degree", 1)
        splits = calls.get("tensor_parallel.split", [])
        if tp > 1:  # item 5: the model was created for tensor parallelism and split
            assert splits and all(s["degree"] == tp for s in splits), calls.get("init")
        assert all(c["tp_size"] == tp for c in calls["init"]), calls["init"]
    elif kind == "smp-v2":
        assert calls.get("init") and calls.get("transform"), sorted(calls)
        assert all(c["world_size"] == ROWS[name].nproc for c in calls["tensor_parallel"])
    elif kind == "torchrun":
        assert f"world_size={ROWS[name].nproc} " in logs, "torchrun started the ranks"


@pytest.mark.parametrize("name", sorted(ROWS))
def test_template_trains_in_its_image(name: str, tmp_path: Path) -> None:
    assert set(ROWS) == set(jm.shipped_catalog()), "every shipped template has a matrix row"
    report = run_template(name, tmp_path / name)
    logs = "\n".join(report["_logs"].values())[-6000:]
    full = "\n".join(p.read_text() for p in sorted((tmp_path / name).glob("start-*.log")))
    assert_distribution_path_ran(name, report, full)
    first, second = report["first"], report["second"]
    for run in (first, second):  # the watchdog's stacks, not a CI timeout
        assert not run["hung"], f"start past its {DEADLINE_SECONDS} s deadline:\n{run['stacks']}"
    if ROWS[name].cpu_limit:  # see the row: only the start is checked on a CPU
        assert first["signalled_at_step"] is not None and report["losses_finite"], logs
        started = (tmp_path / name / "start-1.log").read_text()
        assert "SMP v2 initialised" in started, logs
        assert report["launch"] == ["torchrun"], report["launch"]
        return
    assert first["signalled_at_step"] is not None, logs
    # The stop went through PID 1 (the init) and the job checkpointed within the grace.
    assert not first["killed_after_grace"], (first["stop_seconds"], logs)
    # Stopped on SIGTERM after checkpointing: the process exits non-zero (143; torchrun,
    # whose workers got the signal, 1), the toolkit does not report success, and the
    # container exits with the toolkit's status.
    assert first["rc"] not in (None, 0) and first["container_rc"] not in (None, 0), logs
    assert first["stopped_on_sigterm"] and not first["reported_success"], logs
    assert report["checkpoints_after_sigterm"], logs
    assert second["rc"] == 0 and second["container_rc"] == 0 and second["reported_success"], logs
    assert report["resumed_from"], logs
    assert report["final_step"] == report["max_steps"], logs
    assert report["losses_finite"], logs
    if "validation" in report["channels"]:
        # Issue 34: the resumed run evaluated and saved, recorded its best checkpoint (the
        # folder of the best step, where the release records the step) and loaded it at
        # the end on every rank: a rank left waiting would have hung the run.
        best = report["best_model"]
        assert best["best_metric"] is not None and best["best_model_checkpoint"], best
        if best["best_global_step"] is not None:
            assert best["best_model_checkpoint"].endswith(f"-{best['best_global_step']}"), best
        assert best["loaded"] == best["best_model_checkpoint"], (best, logs)
    assert set(report["metrics_missing"]) <= GPU_ONLY_METRICS, (report["metrics_missing"], logs)
    files = set(report["model_files"])
    assert files & {
        "model.safetensors",
        "pytorch_model.bin",
        "adapter_model.safetensors",
        "model.safetensors.index.json",
    }, (files, logs)
