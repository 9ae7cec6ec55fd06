"""Load Lambda handlers by path (``lambda`` is a keyword) and call them like Lambda does."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3

from jobmodel import dump_catalog, shipped_catalog
from jobmodel.contract.names import ENV_CATALOG_PATH, ENV_JOB_TABLE, ENV_PRICES
from testsupport import ACCOUNT, IMAGE_ENTRYPOINT, REGION, TRIGGER_ENV
from testsupport import IMAGE as FAKE_IMAGE
from testsupport import create_ledger_table as create_ledger_table  # the tests' import

ROOT = Path(__file__).resolve().parent.parent


FUNCTION_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:ftl-trigger"


@dataclass
class FakeContext:
    """What Lambda passes; ``alias`` qualifies ``invoked_function_arn`` (``http``,
    ``team-<name>``, ``admin``), as an invoke through that alias does."""

    function_name: str = "ftl-trigger"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = FUNCTION_ARN
    alias: str | None = None

    def __post_init__(self) -> None:
        if self.alias:
            self.invoked_function_arn = f"{FUNCTION_ARN}:{self.alias}"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def load_handler(code_dir: Path, monkeypatch: Any, env: dict[str, str]) -> ModuleType:
    """Import ``code_dir/handler.py`` fresh, with ``env`` set, as Lambda would on cold start:
    the platform's other variables (``FTL_*``) are unset, so one a deployed function's run left
    in this process (sandbox/runner.py) cannot switch on a feature this test did not ask for."""
    for key in [k for k in os.environ if k.startswith("FTL_") and k not in env]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for name in list(sys.modules):
        if name == "handler" or name.startswith(("ftl_trigger", "ftl_events", "ftl_ledger")):
            del sys.modules[name]
    monkeypatch.syspath_prepend(str(code_dir))
    spec = importlib.util.spec_from_file_location("handler", code_dir / "handler.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["handler"] = module
    spec.loader.exec_module(module)
    return module


def write_catalog(path: Path) -> Path:
    """The shipped catalog with a fixed image, as the synth step would write it."""
    specs = [
        s.with_image(FAKE_IMAGE, entrypoint=IMAGE_ENTRYPOINT) for s in shipped_catalog().values()
    ]
    path.write_text(json.dumps(dump_catalog(specs)))
    return path


# Test prices (USD per instance-hour), not AWS's: round numbers that make sums easy to check.
TEST_PRICES = {
    REGION: {
        "ml.p4d.24xlarge": 30.0,
        "ml.p4de.24xlarge": 40.0,
        "ml.p3dn.24xlarge": 30.0,
        "ml.p3.2xlarge": 3.0,
        "ml.g5.xlarge": 1.0,
        "ml.g5.2xlarge": 1.5,
    }
}


def trigger_env(endpoint: str, tmp: Path, *, table: str = "ftl-jobs") -> dict[str, str]:
    """The launcher stack's trigger environment, pointed at moto and a catalog file in ``tmp``.

    ``ml.g6.xlarge`` is left out of the test prices on purpose (an unknown price)."""
    return {
        **TRIGGER_ENV,
        ENV_PRICES: json.dumps(TEST_PRICES),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        ENV_JOB_TABLE: table,
        ENV_CATALOG_PATH: str(write_catalog(tmp / "catalog.json")),
    }


def client(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def http_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict | None = None,
    user_arn: str = f"arn:aws:iam::{ACCOUNT}:user/data-scientist",
) -> dict[str, Any]:
    """An HTTP API (payload format 2.0) event, as API Gateway sends it after IAM auth."""
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "queryStringParameters": query,
        "requestContext": {
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "test",
            },
            "authorizer": {
                "iam": {"userArn": user_arn, "accountId": ACCOUNT, "callerId": "AIDAEXAMPLE"}
            },
            "stage": "$default",
            "requestId": str(uuid.uuid4()),
        },
        "body": None if body is None else (body if isinstance(body, str) else json.dumps(body)),
        "isBase64Encoded": False,
    }


def emf_records(text: str) -> list[dict[str, Any]]:
    """The CloudWatch EMF records (fleet metrics) among the lines a function printed."""
    records = []
    for line in text.splitlines():
        if line.startswith('{"') and '"_aws"' in line:
            records.append(json.loads(line))
    return records


def emf_totals(records: list[dict[str, Any]], job_name: str) -> dict[str, float]:
    """Each fleet metric summed over one job's EMF records."""
    totals: dict[str, float] = {}
    for record in records:
        if record.get("JobName") != job_name:
            continue
        for metric in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            totals[metric["Name"]] = totals.get(metric["Name"], 0) + record[metric["Name"]]
    return totals
