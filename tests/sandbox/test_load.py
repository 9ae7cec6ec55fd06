"""Concurrency and load on the deployed launcher in the moto sandbox.

* 50 concurrent Lambda invocations with the same ``client_token`` (through moto's Lambda API,
  which runs the deployed zip): exactly one training job, every caller gets that job.
* ``LOAD_SUBMISSIONS`` distinct submissions through the deployed code from a thread pool:
  every one recorded in the ledger and created in SageMaker, none lost, none duplicated.
  Throughput and handler-overhead percentiles are printed (``pytest -s`` shows them).

moto's DynamoDB is made atomic by the sandbox (shim 4 in ``sandbox/server.py``): DynamoDB
applies each conditional write and transaction atomically, moto 5.2 does not, and without
that these tests would measure moto's races rather than the launcher's. The jobs they start
are dropped from moto afterwards (``bench.load.forget_training_jobs``).
"""

from __future__ import annotations

import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.load import (
    check,
    forget_training_jobs,
    ledger_items,
    report,
    sagemaker_jobs,
    submit_many,
)
from sandbox.runner import DeployedFunction

SAME_TOKEN_CALLERS = 50
# 1,000 distinct submissions take about 25-40 s on two shared cores (moto runs in this process).
LOAD_SUBMISSIONS = int(os.environ.get("FTL_LOAD_SUBMISSIONS", "1000"))
LOAD_WORKERS = 8


@pytest.fixture(scope="module")
def trigger(deployed):
    return DeployedFunction(deployed.endpoint, deployed.output("TriggerFunctionName"))


def test_fifty_concurrent_same_token_submissions_start_one_job(deployed):
    prefix = f"same{uuid.uuid4().hex[:8]}"
    request = {
        "template": "distilbert-spot",
        "job_name": prefix,
        "client_token": prefix,
        "hyperparameters": {"learning_rate": 2e-5},
    }
    function = deployed.output("TriggerFunctionName")
    lam = deployed.client("lambda")

    def invoke(_):
        reply = lam.invoke(FunctionName=function, Payload=json.dumps(request).encode())
        assert "FunctionError" not in reply, reply["Payload"].read()
        return json.loads(reply["Payload"].read())

    with ThreadPoolExecutor(max_workers=SAME_TOKEN_CALLERS) as pool:
        answers = list(pool.map(invoke, range(SAME_TOKEN_CALLERS)))

    errors = [a for a in answers if "error" in a]
    assert not errors, errors[:3]
    names = {a["job_name"] for a in answers}
    assert len(names) == 1, names
    (name,) = names
    assert sagemaker_jobs(deployed.client("sagemaker"), prefix) == [name]
    items = ledger_items(deployed.client("dynamodb"), deployed.output("JobTableName"), prefix)
    assert sorted(items) == [f"job#{name}", f"token#{prefix}"]
    assert items[f"job#{name}"]["status"]["S"] == "InProgress"
    assert items[f"token#{prefix}"]["job_name"]["S"] == name
    forget_training_jobs(prefix=prefix)


def test_distinct_submissions_are_all_recorded_and_created_once(trigger):
    runtime = trigger.module.RUNTIME
    result = submit_many(trigger, runtime, submissions=LOAD_SUBMISSIONS, workers=LOAD_WORKERS)
    print("\n" + report(result.summary()))
    problems = check(result, runtime.sagemaker, runtime.dynamodb, runtime.table_name)
    # moto's state is shared by every test in this process; a thousand jobs left behind would
    # hide later tests' jobs from one-page ListTrainingJobs lookups.
    forget_training_jobs(prefix=result.prefix)
    assert not problems, "\n".join(problems)
