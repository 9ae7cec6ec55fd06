"""Run moto's server on localhost with shims for the gaps that would stop a CDK deploy.

Each shim fixes moto's handling of a *valid* CloudFormation template; none changes what the
platform synthesises. They are listed here so they are easy to drop when moto catches up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import traceback
import warnings
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer

_patched = False


def _apply_shims() -> None:
    global _patched
    if _patched:
        return
    _patched = True

    # 1. moto 5.2's AWS::KMS::Key expects KMS API tags ({TagKey, TagValue}); CloudFormation
    #    gives {Key, Value}, and the stack fails with KeyError 'TagKey'.
    from moto.kms.models import Key

    original = Key.create_from_cloudformation_json.__func__

    def create_key(
        cls: Any, resource_name: str, cloudformation_json: Any, *args: Any, **kwargs: Any
    ) -> Any:
        props = cloudformation_json.get("Properties", {})
        props["Tags"] = [
            {"TagKey": t.get("Key", t.get("TagKey")), "TagValue": t.get("Value", t.get("TagValue"))}
            for t in props.get("Tags", [])
        ]
        return original(cls, resource_name, cloudformation_json, *args, **kwargs)

    Key.create_from_cloudformation_json = classmethod(create_key)

    # 2. moto 5.2's AWS::S3::Bucket applies only encryption and tags; apply the bucket's
    #    public access block, versioning, lifecycle and access logging too.
    from moto.s3.models import FakeBucket, PublicAccessBlock

    original_bucket = FakeBucket.create_from_cloudformation_json.__func__

    def create_bucket(
        cls: Any, resource_name: str, cloudformation_json: Any, *args: Any, **kwargs: Any
    ) -> Any:
        bucket = original_bucket(cls, resource_name, cloudformation_json, *args, **kwargs)
        props = cloudformation_json.get("Properties", {})
        block = props.get("PublicAccessBlockConfiguration")
        if block:
            bucket.public_access_block = PublicAccessBlock(
                block.get("BlockPublicAcls"),
                block.get("IgnorePublicAcls"),
                block.get("BlockPublicPolicy"),
                block.get("RestrictPublicBuckets"),
            )
        versioning = props.get("VersioningConfiguration")
        if versioning:
            bucket.versioning_status = versioning["Status"]
        lifecycle = props.get("LifecycleConfiguration")
        if lifecycle:
            bucket.set_lifecycle([_api_lifecycle_rule(r) for r in lifecycle["Rules"]])
        logging_config = props.get("LoggingConfiguration")
        if logging_config:
            bucket.logging = {
                "TargetBucket": logging_config["DestinationBucketName"],
                "TargetPrefix": logging_config.get("LogFilePrefix", ""),
            }
        return bucket

    FakeBucket.create_from_cloudformation_json = classmethod(create_bucket)

    # 3. moto runs Lambda code only inside Docker, which this machine lacks: run the function's
    #    own deployed zip in this process instead, with its configured environment.
    from moto.awslambda.models import LambdaFunction

    LambdaFunction._invoke_lambda = _invoke_in_process


_ENDPOINT: list[str] = []
_LOADED: dict[tuple[str, str], Any] = {}
_IMPORT_LOCK = threading.Lock()


def _invoke_in_process(fn: Any, event: Any = None) -> tuple[str, bool, str]:
    from sandbox.runner import Context, load_zip_handler

    key = (fn.function_name, hashlib.sha256(fn.code_bytes).hexdigest())
    with _IMPORT_LOCK:
        if key not in _LOADED:
            env = {
                **(fn.environment_vars or {}),
                "AWS_ENDPOINT_URL": _ENDPOINT[0],
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": fn.region,
                "AWS_DEFAULT_REGION": fn.region,
            }
            _LOADED[key] = load_zip_handler(fn.code_bytes, fn.handler, env)
    handler = _LOADED[key]
    if isinstance(event, str):
        event = json.loads(event or "{}")
    try:
        result = handler(event, Context(fn.function_name))
    except Exception as exc:  # what Lambda reports for an unhandled error
        body = {"errorMessage": str(exc), "errorType": type(exc).__name__}
        return json.dumps(body), True, traceback.format_exc()
    return json.dumps(result), False, ""


def _api_lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A CloudFormation lifecycle rule in the S3 API's shape."""
    api: dict[str, Any] = {
        "ID": rule.get("Id"),
        "Status": rule["Status"],
        "Filter": {"Prefix": rule.get("Prefix", "")},
    }
    if "ExpirationInDays" in rule:
        api["Expiration"] = {"Days": rule["ExpirationInDays"]}
    if "AbortIncompleteMultipartUpload" in rule:
        api["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
    return api


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sandbox:
    """A moto server on ``localhost:<port>``; use as a context manager."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://localhost:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    def __enter__(self) -> Sandbox:
        _apply_shims()
        _ENDPOINT[:] = [self.endpoint]
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", message="Tried to parse AWS::")
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
