"""SnapStart readiness: nothing random is drawn before the snapshot; the restore hook is guarded."""

from __future__ import annotations

import random
import secrets
import sys
import types
import uuid

import pytest

from tests.lambda_support import load_handler, trigger_env
from tests.unit.trigger.conftest import TRIGGER_DIR


def _load(monkeypatch, tmp_path):
    # No request is made at import, so an unreachable endpoint is fine.
    return load_handler(TRIGGER_DIR, monkeypatch, trigger_env("http://localhost:9", tmp_path))


def test_nothing_random_is_drawn_at_import(monkeypatch, tmp_path):
    def refuse(*_args, **_kwargs):
        raise AssertionError("a random value was drawn at import: it would be in the snapshot")

    with monkeypatch.context() as m:
        for module, names in (
            (secrets, ("token_hex", "token_bytes", "token_urlsafe", "randbelow", "choice")),
            (random, ("random", "getrandbits", "randint", "choice", "randrange")),
            (uuid, ("uuid1", "uuid4")),
        ):
            for name in names:
                m.setattr(module, name, refuse)
        handler = _load(monkeypatch, tmp_path)
    # Job-name suffixes are drawn per call, after any restore.
    draws = {handler.RUNTIME.random_hex() for _ in range(20)}
    assert len(draws) > 1


def test_without_the_snapstart_runtime_no_hook_is_registered(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails
    handler = _load(monkeypatch, tmp_path)
    assert handler.snapstart.register_restore_hooks() is False


def test_on_a_snapstart_runtime_random_is_reseeded_after_restore(monkeypatch, tmp_path):
    hooks = []
    fake = types.ModuleType("snapshot_restore_py")
    fake.register_after_restore = hooks.append
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    handler = _load(monkeypatch, tmp_path)
    assert hooks == [handler.snapstart.reseed_after_restore]
    random.seed(7)
    snapshot_draw = random.random()
    random.seed(7)  # what every restored copy would start from
    hooks[0]()
    assert random.random() != pytest.approx(snapshot_draw)
