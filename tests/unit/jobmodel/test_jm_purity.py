"""The job model stays standard-library only, importable on its own, and fast."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import jobmodel as jm

PACKAGE = Path(jm.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_standard_library_imports() -> None:
    files = sorted(PACKAGE.glob("*.py"))
    assert files
    for path in files:
        outside = {
            m for m in _imports(path) if m not in sys.stdlib_module_names and m != "__future__"
        }
        assert not outside, f"{path.name} imports {outside}"


def test_import_pulls_in_no_aws_or_cdk() -> None:
    heavy = ("boto3", "botocore", "aws_cdk", "sagemaker", "constructs")
    code = (
        "import sys, jobmodel; jobmodel.shipped_catalog();"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    root = PACKAGE.parent
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_catalog_file_ships_inside_the_package() -> None:
    assert (PACKAGE / "shipped_templates.json").is_file()


def test_validate_and_render_well_under_a_millisecond(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    payload = {
        "template": "bert-large-qa",
        "job_name": "squad-lr3e5",
        "hyperparameters": {"learning_rate": 3e-5, "num_train_epochs": 2},
        "instance_count": 2,
        "max_runtime_seconds": 36000,
        "max_wait_seconds": 72000,
        "inputs": {"train": "s3://ftl-data-123456789012/squad/train/"},
        "tags": {"team": "nlp", "cost-center": "1234"},
        "client_token": "7f0c2c1e-squad-run-3",
    }
    now = datetime(2026, 11, 22, 1, 53, tzinfo=UTC)

    def once() -> None:
        req = jm.validate_submit(payload, catalog, platform)
        name = jm.make_job_name(req.job_name_prefix, now=now, rand_hex="a1b2")
        out = jm.render_create_training_job(req, catalog[req.template], platform, job_name=name)
        req.fingerprint()
        jm.request_hash(out)

    once()
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(200):
            once()
        best = min(best, (time.process_time() - start) / 200)
    # Typically ~0.1 ms; the bound leaves room for a loaded CI machine.
    assert best < 1e-3, f"validate+render+hashes took {best * 1e6:.0f} us per call"
