"""Docker-free packaging: deterministic source archive, self-contained Lambda bundle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

from bench.asset_size import assets, trigger_asset
from ftl_constructs.bundling import LEDGER_PACKAGE, ROOT, lambda_bundle, source_tarball
from jobmodel import dump_catalog, shipped_catalog
from tests.infra.synth import synth


def test_source_tarball_is_byte_for_byte_reproducible(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("print('hi')\n")
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    (src / "pkg" / "__pycache__").mkdir()
    (src / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"junk")
    first = source_tarball(src, tmp_path / "a").read_bytes()
    later = time.time() + 3600
    os.utime(src / "train.py", (later, later))  # touching a file must not change the archive
    second = source_tarball(src, tmp_path / "b").read_bytes()
    assert first == second
    with tarfile.open(tmp_path / "a" / "sourcedir.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["pkg/mod.py", "train.py"]
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_a_reader_never_sees_a_partial_archive_while_synths_share_the_folder(tmp_path):
    # Parallel synths write the same output path; a deploy reading it mid-write once
    # uploaded an empty archive. Every read must be one whole archive or the other.
    sources = []
    for name in ("a", "b"):
        src = tmp_path / f"src-{name}"
        src.mkdir()
        (src / "train.py").write_bytes(name.encode() * 200_000)
        sources.append(src)
    whole = {
        source_tarball(src, tmp_path / f"ref-{i}").read_bytes() for i, src in enumerate(sources)
    }
    shared = tmp_path / "shared"
    target = source_tarball(sources[0], shared)
    done = threading.Event()

    def writer() -> None:
        for i in range(40):
            source_tarball(sources[i % 2], shared)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    while not done.is_set():
        assert target.read_bytes() in whole
        reads += 1
    thread.join()
    assert reads > 0
    assert not [p for p in shared.iterdir() if p.name != "sourcedir.tar.gz"], "no temp files left"


def test_shipped_training_source_has_the_entrypoint(tmp_path):
    with tarfile.open(source_tarball(ROOT / "training", tmp_path)) as tar:
        assert "train.py" in tar.getnames()


def test_shipped_training_source_carries_every_module_and_runs_unpacked(tmp_path):
    # The container runs train.py from the unpacked archive: every ftl_train module must be
    # in it, and the entrypoint must import them from there alone.
    package = ROOT / "training" / "ftl_train"
    modules = {f"ftl_train/{p.name}" for p in package.glob("*.py")}
    assert {"ftl_train/qa.py", "ftl_train/inputs.py", "ftl_train/hparam_specs.py"} <= modules
    unpacked = tmp_path / "code"
    with tarfile.open(source_tarball(ROOT / "training", tmp_path)) as tar:
        assert modules <= set(tar.getnames())
        tar.extractall(unpacked, filter="data")
    probe = (
        "import os, runpy, sys\n"
        "sys.argv = ['train.py', '--help']\n"
        "try:\n"
        "    runpy.run_path('train.py', run_name='__main__')\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "mine = [m.__file__ for n, m in sys.modules.items() if n.startswith('ftl_train')]\n"
        "assert len(mine) > 10 and all(f.startswith(os.getcwd()) for f in mine), mine\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=unpacked,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hyperparameters (pass as --name value)" in done.stdout


def test_trigger_bundle_carries_handler_job_model_and_catalog():
    catalog = dump_catalog(list(shipped_catalog().values()))
    bundle = lambda_bundle(
        "trigger-test",
        code_dir=ROOT / "lambda" / "trigger",
        packages=[ROOT / "jobmodel", LEDGER_PACKAGE],
        files={"catalog.json": catalog},
    )
    assert (bundle / "handler.py").is_file()
    assert (bundle / "ftl_trigger" / "actions.py").is_file()
    assert (bundle / "jobmodel" / "render.py").is_file()
    assert (bundle / "ftl_ledger" / "ledger.py").is_file()
    assert (bundle / "jobmodel" / "templates" / "shipped_templates.json").is_file()
    assert json.loads((bundle / "catalog.json").read_text())["version"] == 1
    assert not list(bundle.rglob("__pycache__"))
    again = lambda_bundle(
        "trigger-test",
        code_dir=ROOT / "lambda" / "trigger",
        packages=[ROOT / "jobmodel", LEDGER_PACKAGE],
        files={"catalog.json": catalog},
    )
    assert again == bundle  # content-addressed: same content, same folder


def test_lambda_bundle_carries_every_job_model_file_and_imports_every_module():
    # The job model is rooms of subpackages with data files beside their loaders: the asset
    # must carry all of it, and every module must import from the asset alone.
    package = ROOT / "jobmodel"
    files = sorted(
        p.relative_to(ROOT).as_posix()
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert "jobmodel/money/prices.json" in files
    assert "jobmodel/templates/shipped_templates.json" in files
    bundle = lambda_bundle("jobmodel-test", code_dir=ROOT / "lambda" / "prices", packages=[package])
    carried = sorted(
        p.relative_to(bundle).as_posix() for p in (bundle / "jobmodel").rglob("*") if p.is_file()
    )
    assert carried == files
    modules = [
        f[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        for f in files
        if f.endswith(".py")
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({str(bundle)!r}), module.__file__\n"
        "import jobmodel\n"
        "assert jobmodel.shipped_catalog() and jobmodel.money.pricing.PriceTable\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=bundle,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_synthesized_assembly_carries_non_empty_code_and_source_assets():
    # The same lookup `make bench` uses for the asset-size table, on a real assembly.
    app, _stacks = synth()
    assembly = Path(app.synth().directory)
    found = assets(assembly)
    trigger = trigger_asset(found)
    assert trigger["kind"] == "zip" and trigger["files"] > 1 and trigger["zipped"] > 0
    source = next(v for k, v in found.items() if k.endswith("TrainingSource"))
    assert source["kind"] == "file" and source["raw"] > 0
    _job_events_asset_is_self_contained(_asset_folder(assembly, "JobEvents"))


def _asset_folder(assembly: Path, part: str) -> Path:
    for manifest in assembly.glob("*.assets.json"):
        for entry in json.loads(manifest.read_text()).get("files", {}).values():
            name = entry.get("displayName", "")
            if part in name.split("/") and name.endswith("/Code"):
                return assembly / entry["source"]["path"]
    raise LookupError(f"no {part} code asset in {assembly}")


def _job_events_asset_is_self_contained(folder: Path) -> None:
    """The job-events function ships its package, the job model and the ledger package (one
    DynamoDB codec and one writer for both functions), not the trigger, and imports from its
    asset alone."""
    for rel in (
        "handler.py",
        "ftl_events/parse.py",
        "ftl_events/apply.py",
        "ftl_events/publish.py",
        "ftl_ledger/ledger.py",
        "ftl_ledger/items.py",
        "ftl_ledger/usage.py",
        "jobmodel/jobs/training_state.py",
        "jobmodel/jobs/queue_state.py",
    ):
        assert (folder / rel).is_file(), rel
    assert not (folder / "ftl_trigger").exists()
    code = (
        f"import sys; sys.path.insert(0, {str(folder)!r}); import handler;"
        "print(handler.RUNTIME.platform)"
    )
    env = {
        **os.environ,
        "FTL_JOB_TABLE": "t",
        "FTL_TOPIC_ARN": "arn",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    # -I: neither this repository nor PYTHONPATH on the path, only the asset and site-packages.
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], env=env, capture_output=True, text=True, cwd=folder
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ftl"
