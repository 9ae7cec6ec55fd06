"""Run a deployed Lambda's code in this process (moto cannot run Lambdas without Docker).

The function's code zip is downloaded from where the deploy put it and its configuration is
read back from moto, so what runs is exactly what was deployed, with the deployed settings.
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3

from sandbox.deploy import ACCOUNT, REGION

ASSETS_BUCKET = f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}"


class Context:
    """The parts of the Lambda context object the handlers use."""

    def __init__(self, function_name: str, qualifier: str | None = None) -> None:
        self.function_name = function_name
        self.aws_request_id = str(uuid.uuid4())
        arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_name}"
        # Lambda passes the invoked ARN with the alias or version the caller named.
        self.invoked_function_arn = f"{arn}:{qualifier}" if qualifier else arn

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class DeployedFunction:
    """A deployed function's handler module, loaded from its code zip with its environment."""

    def __init__(self, endpoint: str, function_name: str) -> None:
        kwargs = {
            "endpoint_url": endpoint,
            "region_name": REGION,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        fn = boto3.client("lambda", **kwargs).get_function(FunctionName=function_name)
        self.name = function_name
        self.environment: dict[str, str] = fn["Configuration"]["Environment"]["Variables"]
        self.handler_name = fn["Configuration"]["Handler"]
        key = fn["Code"]["Location"].rsplit("/", 1)[1]
        code = boto3.client("s3", **kwargs).get_object(Bucket=ASSETS_BUCKET, Key=key)["Body"]
        self.code_dir = Path(tempfile.mkdtemp(prefix=f"deployed-{function_name[:40]}-"))
        with zipfile.ZipFile(io.BytesIO(code.read())) as archive:
            archive.extractall(self.code_dir)
        os.environ.update(self.environment)
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        self.module = import_asset_module(self.code_dir, self.handler_name.split(".")[0])
        self._handler = getattr(self.module, self.handler_name.split(".")[1])

    def __call__(self, event: Any, alias: str | None = None) -> Any:
        """Run the handler as an invoke of the function (or of its ``alias``) would."""
        return self._handler(event, Context(self.name, alias))


def load_zip_handler(code: bytes, handler: str, env: dict[str, str]) -> Any:
    """Unpack a function's zip, import its handler module with ``env`` set, return the handler."""
    code_dir = Path(tempfile.mkdtemp(prefix="sandbox-lambda-"))
    with zipfile.ZipFile(io.BytesIO(code)) as archive:
        archive.extractall(code_dir)
    os.environ.update(env)
    module_name, _, function = handler.partition(".")
    return getattr(import_asset_module(code_dir, module_name), function)


# The packages a Lambda asset ships and the repository also has: a deployed function gets its
# own copies, kept out of ``sys.modules`` afterwards so later code (tests included) still
# imports the repository's.
# ftl_ledger too: shared by both functions' assets, one copy per function, so its errors are
# the classes of that function's own jobmodel (the soak found a trigger loaded second taking
# the ledger's UpstreamError for an unexpected exception).
_ASSET_PACKAGES = ("jobmodel", "ftl_trigger", "ftl_events", "ftl_ledger")


def import_asset_module(code_dir: Path, module_name: str) -> ModuleType:
    """Import ``code_dir/<module_name>.py`` with its own copies of the asset's packages.

    The modules it imported are left on the returned module as ``asset_modules`` (name to
    module) and taken out of ``sys.modules``, where the caller's modules are put back; the
    deployed code keeps its references, and it imports nothing later (no lazy imports)."""

    def ours(name: str) -> bool:
        return name == module_name or name.split(".")[0] in _ASSET_PACKAGES

    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if ours(name)}
    sys.path.insert(0, str(code_dir))
    try:
        spec = importlib.util.spec_from_file_location(
            f"deployed_{uuid.uuid4().hex}", code_dir / f"{module_name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(code_dir))
        loaded = {name: sys.modules.pop(name) for name in list(sys.modules) if ours(name)}
        sys.modules.update(saved)
    module.asset_modules = loaded
    return module
