"""Helpers shared by the benchmarks: statistics, the trigger asset, subprocess timing, env.

The fixtures tests use too (account, ARNs, image, trigger env) live in ``testsupport``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testsupport import IMAGE, IMAGE_ENTRYPOINT, REGION, TRIGGER_ENV

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# A representative request: a multi-node smddp job with overrides, both channels and tags.
REQUEST = {
    "template": "bert-large-qa",
    "job_name": "squad-lr3e5",
    "hyperparameters": {"learning_rate": 3e-5, "num_train_epochs": 2},
    "instance_type": "ml.p4d.24xlarge",
    "instance_count": 2,
    "spot": True,
    "max_runtime_seconds": 36000,
    "max_wait_seconds": 72000,
    "inputs": {
        "train": "s3://ftl-data/squad/train/",
        "validation": "s3://ftl-data/squad/validation/",
    },
    "tags": {"team": "nlp", "cost-center": "1234"},
}


def launcher_renderer() -> Callable[[str], dict[str, Any]]:
    """What the trigger does per submit without AWS: validate ``REQUEST``, name it, render it.

    Catalog and platform are loaded once; the returned function takes the job name's random
    suffix and returns the ``CreateTrainingJob`` request.
    """
    from datetime import UTC, datetime

    from jobmodel import (
        PlatformConfig,
        make_job_name,
        render_create_training_job,
        shipped_catalog,
        validate_submit,
    )

    catalog = {
        n: s.with_image(IMAGE, entrypoint=IMAGE_ENTRYPOINT) for n, s in shipped_catalog().items()
    }
    platform = PlatformConfig.from_env(TRIGGER_ENV)

    def render(rand_hex: str) -> dict[str, Any]:
        req = validate_submit(REQUEST, catalog, platform)
        name = make_job_name(req.job_name_prefix, now=datetime.now(UTC), rand_hex=rand_hex)
        return render_create_training_job(req, catalog[req.template], platform, job_name=name)

    return render


def offline_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with fake credentials and no way to reach AWS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FTL_"))}
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        AWS_EC2_METADATA_DISABLED="true",
        AWS_ENDPOINT_URL="http://127.0.0.1:9",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        CDK_DISABLE_VERSION_CHECK="1",
    )
    env.update(extra or {})
    return env


def trigger_asset(dest: Path) -> Path:
    """The trigger's Lambda asset, built by the same code the launcher stack uses, at ``dest``.

    ``dest`` ends up holding exactly the deployed files (trimmed botocore models and, when this
    Python is the functions' runtime, precompiled bytecode included).
    """
    import sys

    from ftl_constructs.botocore_models import declared_operations
    from ftl_constructs.bundling import LEDGER_PACKAGE, lambda_bundle
    from ftl_constructs.lambda_settings import LambdaSettings
    from ftl_constructs.launcher import TRIGGER_OPERATIONS
    from jobmodel import dump_catalog, shipped_catalog

    specs = [s.with_image(IMAGE, entrypoint=IMAGE_ENTRYPOINT) for s in shipped_catalog().values()]
    bundle = lambda_bundle(
        "trigger",
        code_dir=ROOT / "lambda" / "trigger",
        packages=[ROOT / "jobmodel", LEDGER_PACKAGE],
        files={"catalog.json": dump_catalog(specs)},
        aws_operations=declared_operations(TRIGGER_OPERATIONS),
        bytecode=LambdaSettings().python_version == sys.version_info[:2],
    )
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(bundle, dest)
    return dest


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


@dataclass
class Timed:
    """One fresh process: seconds from spawn until it printed ``READY``, its in-process time
    and the CPU time it had used by then (less sensitive to a busy machine than wall time)."""

    wall_s: float
    inner_s: float
    cpu_s: float
    extra: dict


def time_process(
    script: str, *, env: Mapping[str, str], cwd: Path | None = None, args: Sequence[str] = ()
) -> Timed:
    """Run ``script`` in a fresh interpreter; it must print ``READY <json>`` once it is ready.

    The wall time runs from just before the spawn to the moment the line is read, so it covers
    interpreter start-up and imports but not the interpreter's teardown.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(
        [PYTHON, *args, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        text=True,
    )
    assert proc.stdout is not None
    line = ""
    for line in proc.stdout:
        if line.startswith("READY "):
            break
    ready = time.perf_counter()
    out, err = proc.communicate()
    if not line.startswith("READY ") or proc.returncode != 0:
        raise RuntimeError(f"benchmark process failed ({proc.returncode}):\n{out}\n{err[-4000:]}")
    info = json.loads(line[len("READY ") :])
    return Timed(
        wall_s=ready - started,
        inner_s=float(info.pop("inner_s")),
        cpu_s=float(info.pop("cpu_s", "nan")),
        extra=info,
    )


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1000
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms"


def fmt_bytes(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n} B"


def tempdir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"ftl-bench-{prefix}-"))


def write_json(path: str | None, data: object) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")


class _Sink(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)


@contextlib.contextmanager
def handler_output_discarded() -> Iterator[None]:
    """While a handler is timed, its standard output (the fleet metrics' EMF lines, which Lambda
    sends to CloudWatch Logs) goes nowhere: it still formats and writes every line, so the cost
    stays in the timing, but the benchmark's own report is not buried under them."""
    with contextlib.redirect_stdout(_Sink()):
        yield
