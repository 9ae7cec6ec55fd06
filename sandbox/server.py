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

from sandbox.cfn_updates import alias_fields, apply_update_shims, update_function_first

_patched = False


def _apply_shims() -> None:
    global _patched
    if _patched:
        return
    _patched = True
    # 1. moto 5.2's AWS::KMS::Key expects KMS API tags ({TagKey, TagValue}); CloudFormation
    #    gives {Key, Value}, and the stack fails with KeyError 'TagKey'.
    _kms_key_tags()
    # 2. moto 5.2's AWS::S3::Bucket applies only encryption and tags; apply the bucket's
    #    public access block, versioning, lifecycle and access logging too.
    _s3_bucket_properties()
    # 3. moto runs Lambda code only inside Docker, which this machine lacks: run the function's
    #    own deployed zip in this process instead, with its configured environment.
    _lambda_in_process()
    # 4. DynamoDB applies each conditional write and each transaction atomically; moto 5.2
    #    checks a condition and then writes with no lock (two concurrent claims of one token
    #    can both succeed), and its transactions deep-copy whole tables for rollback while
    #    other request threads change them (500s), at ~0.1 ms per item. One lock serialises
    #    moto's DynamoDB actions, and a transaction saves and restores only the items it
    #    touches instead of copying tables: equivalent once nothing else runs concurrently.
    _make_dynamodb_atomic()
    # 5. moto 5.2's CloudFormation has no AWS::Lambda::Alias (the trigger's http, team-<name>
    #    and admin aliases), and its AWS::Lambda::Version answers neither Ref (the version ARN)
    #    nor Fn::GetAtt Version: create aliases with moto's own Lambda API, and answer both.
    _lambda_alias_resources()
    # 6. moto 5.2's UpdateStack: previous parameter values and exports as CloudFormation keeps
    #    them, so a second deploy (an upgrade) runs (sandbox/cfn_updates.py).
    apply_update_shims()
    # 7. moto 5.2's CloudFormation has no AWS::SageMaker::ModelPackageGroup (the model
    #    registry's groups): create them with moto's SageMaker (sandbox/registry_cfn.py).
    from sandbox.registry_cfn import register

    register()

    # 8. moto 5.2's EventBridge: a scheduled rule matches no event (sandbox/events_shim.py).
    from sandbox.events_shim import scheduled_rules_match_no_event

    scheduled_rules_match_no_event()
    # 9. moto 5.2's UpdateModelPackage drops what the request leaves out and replaces the
    #    customer metadata; SageMaker changes only what it names. Its CreateModelPackage makes
    #    a version per call; SageMaker's ClientToken makes a repeat answer the first one
    #    (sandbox/registry_update.py).
    from sandbox.registry_update import merge_updates

    merge_updates()


def _kms_key_tags() -> None:
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


def _s3_bucket_properties() -> None:
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


def _lambda_in_process() -> None:
    """Lambda decodes the payload once (a JSON string arrives as a str) and tells the handler
    the invoked ARN with its qualifier (alias or version): so does the shim."""
    from moto.awslambda.models import LambdaBackend, LambdaFunction

    original_invoke = LambdaBackend.invoke

    def invoke(self: Any, function_name: str, qualifier: str | None, body: Any, *args: Any) -> Any:
        qualifier = qualifier or getattr(_INVOKED, "qualifier", None)
        _INVOKED.arn = _invoked_arn(self, function_name, qualifier)
        return original_invoke(self, function_name, qualifier, body, *args)

    def function_invoke(fn: Any, body: Any, request_headers: Any, response_headers: Any) -> Any:
        event = json.loads(body) if body else {}
        res, errored, logs = _invoke_in_process(fn, event)
        if errored:
            response_headers["x-amz-function-error"] = "Handled"
        return res.encode("utf-8")

    # moto's Invoke response reads the query parameter as ``qualifier``; boto3 sends
    # ``Qualifier``: read it here so an alias invoke is an alias invoke (unknown alias: 404).
    from moto.awslambda.responses import LambdaResponse

    original_response = LambdaResponse.invoke

    def response_invoke(self: Any) -> Any:
        _INVOKED.qualifier = self.querystring.get("Qualifier", [None])[0]
        try:
            return original_response(self)
        finally:
            _INVOKED.qualifier = None

    LambdaResponse.invoke = response_invoke  # type: ignore[method-assign]
    LambdaBackend.invoke = invoke  # type: ignore[method-assign]
    LambdaFunction.invoke = function_invoke  # type: ignore[method-assign]
    LambdaFunction._invoke_lambda = _invoke_in_process


def _lambda_alias_resources() -> None:
    from moto.awslambda.models import LambdaVersion, get_backend
    from moto.cloudformation import parsing
    from moto.core.common_models import CloudFormationModel

    original_version = LambdaVersion.create_from_cloudformation_json.__func__

    def create_version(
        cls: Any,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region: str,
        **kw: Any,
    ) -> Any:
        # The one hook on moto's versions: in an update, the function first (cfn_updates),
        # then the version, whose Ref is its ARN.
        name = cloudformation_json["Properties"]["FunctionName"]
        update_function_first(name, account_id, region)
        version = original_version(
            cls, resource_name, cloudformation_json, account_id, region, **kw
        )
        fn = get_backend(account_id, region).get_function(name)
        version.physical_resource_id = f"{fn.function_arn}:{version.version}"
        return version

    LambdaVersion.create_from_cloudformation_json = classmethod(create_version)
    LambdaVersion.get_cfn_attribute = lambda self, attr: str(self.version)  # only "Version"

    class LambdaAliasResource(CloudFormationModel):
        def __init__(self, arn: str) -> None:
            self.physical_resource_id = arn  # Ref of an alias is its ARN

        @staticmethod
        def cloudformation_name_type() -> str:
            return "Name"

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::Lambda::Alias"

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return False

        @classmethod
        def create_from_cloudformation_json(  # type: ignore[override]
            cls,
            resource_name: str,
            cloudformation_json: Any,
            account_id: str,
            region: str,
            **kw: Any,
        ) -> LambdaAliasResource:
            props = cloudformation_json["Properties"]
            alias = get_backend(account_id, region).create_alias(**alias_fields(props))
            return cls(alias.arn)

    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()


def _make_dynamodb_atomic() -> None:
    import copy as copy_module

    import moto.dynamodb.models as models
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoHandler

    original_action = DynamoHandler.call_action
    original_transact = models.DynamoDBBackend.transact_write_items
    lock = threading.RLock()

    class _TablesAreNotCopied:
        copy = staticmethod(copy_module.copy)

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy_module.deepcopy(value, memo)

    def call_action(self: Any) -> Any:
        with lock:
            return original_action(self)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = []
        for entry in transact_items:
            op = next(iter(entry.values()), None) if isinstance(entry, dict) else None
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            key = op.get("Key") or {
                a: op.get("Item", {}).get(a)
                for a in (table.hash_key_attr, table.range_key_attr)
                if a is not None
            }
            try:
                hash_key, range_key = self.get_keys_value(table, key)
            except Exception:  # a malformed key: moto's own code reports it
                continue
            before = table.get_item(hash_key, range_key)
            saved.append((table, hash_key, range_key, copy_module.deepcopy(before)))
        models.copy = _TablesAreNotCopied  # type: ignore[assignment]
        try:
            original_transact(self, transact_items)
        except BaseException:
            for table, hash_key, range_key, item in reversed(saved):
                slot = table.items if range_key is None else table.items[hash_key]
                slot_key = hash_key if range_key is None else range_key
                if item is None:
                    slot.pop(slot_key, None)
                else:
                    slot[slot_key] = item
            raise
        finally:
            models.copy = copy_module

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


_ENDPOINT: list[str] = []
_INVOKED = threading.local()


def _invoked_arn(backend: Any, function_name: str, qualifier: str | None) -> str:
    """``arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]``, as Lambda passes."""
    if function_name.startswith("arn:"):
        parts = function_name.split(":")
        base, qualifier = ":".join(parts[:7]), (parts[7] if len(parts) > 7 else qualifier)
    else:
        name, _, in_name = function_name.partition(":")
        qualifier = in_name or qualifier
        base = f"arn:aws:lambda:{backend.region_name}:{backend.account_id}:function:{name}"
    return f"{base}:{qualifier}" if qualifier else base


_LOADED: dict[tuple[str, str], Any] = {}
_IMPORT_LOCK = threading.Lock()


def _invoke_in_process(fn: Any, event: Any = None) -> tuple[str, bool, str]:
    from sandbox.clock import apply_function_clock
    from sandbox.runner import Context, load_zip_handler

    # A new code zip or a new environment (an upgrade's second deploy) is a new execution
    # environment, as in Lambda: load the function again.
    variables = json.dumps(fn.environment_vars or {}, sort_keys=True)
    key = (fn.function_name, hashlib.sha256(fn.code_bytes).hexdigest(), variables)
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
    apply_function_clock(handler)  # the demo's simulated time, when it set one
    context = Context(fn.function_name)
    context.invoked_function_arn = getattr(_INVOKED, "arn", None) or context.invoked_function_arn
    _INVOKED.arn = None
    try:
        result = handler(event, context)
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


class PortInUse(Exception):
    """The port the sandbox was asked to listen on is taken."""


def port_free(port: int) -> bool:
    """True when nothing listens on ``127.0.0.1:port`` (the address the sandbox binds)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug's server
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


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
        # moto's server thread would die on a taken port and leave start() waiting forever.
        if not port_free(self.port):
            raise PortInUse(f"port {self.port} is in use; the sandbox cannot listen on it")
        _apply_shims()
        self._outer = list(_ENDPOINT)  # a sandbox started before this one gets it back on exit
        _ENDPOINT[:] = [self.endpoint]
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", message="Tried to parse AWS::")
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
        _ENDPOINT[:] = self._outer
