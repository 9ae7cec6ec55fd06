"""One launcher per fuzz module: the real handler against an in-process moto server.

The per-test ``launcher`` fixture of ``tests/unit/trigger`` builds a table and reloads the
handler for every test; hypothesis runs many examples per test, so here one launcher (and
one ledger table) serves a whole module, and the contract checks count what each example
wrote instead of reading a fresh table. The training jobs a module started are dropped from
moto when it ends.
"""

from __future__ import annotations

import uuid

import pytest

from bench.load import forget_training_jobs, training_job_names
from tests.lambda_support import client, create_ledger_table, load_handler, trigger_env
from tests.unit.conftest import moto_endpoint  # noqa: F401
from tests.unit.trigger.conftest import TRIGGER_DIR, Launcher


@pytest.fixture(scope="module")
def fuzz_launcher(moto_endpoint, tmp_path_factory):  # noqa: F811
    table = f"ftl-fuzz-{uuid.uuid4().hex[:8]}"
    create_ledger_table(client("dynamodb", moto_endpoint), table)
    patch = pytest.MonkeyPatch()
    env = trigger_env(moto_endpoint, tmp_path_factory.mktemp("fuzz"), table=table)
    module = load_handler(TRIGGER_DIR, patch, env)
    before = training_job_names()
    # The list-token signing key is written to the ledger by the first list that signs a
    # token, once per table; create it now so that one-time write is not counted against
    # whichever example happens to list first.
    _ = module.LAUNCHER.signer.key
    try:
        yield Launcher(module, moto_endpoint, table)
    finally:
        patch.undo()
        # moto's state is per process and shared by every test here; hundreds of fuzzed jobs
        # would hide later tests' jobs from one-page ListTrainingJobs lookups.
        forget_training_jobs(keep=before)
