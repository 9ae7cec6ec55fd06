"""Fixtures for the training entrypoint tests (helpers live in ftl_train_testlib.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE.parents[1] / "training"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from ftl_train_testlib import make_model_dir  # noqa: E402


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory):
    """Tiny saved models, built once per session: {(task, arch): path}."""
    root = tmp_path_factory.mktemp("models")
    cache: dict = {}

    def get(task: str, arch: str = "bert") -> Path:
        key = (task, arch)
        if key not in cache:
            cache[key] = make_model_dir(root / f"{task}-{arch}", task, arch)
        return cache[key]

    return get
