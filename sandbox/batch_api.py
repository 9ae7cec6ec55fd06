"""The Batch stand-in's edges: request checks, response views, events, and HTTP routing.

``BatchSandbox`` is the sandbox (``sandbox.server.Sandbox``) with the stand-in mounted on the
same endpoint: a WSGI layer in front of moto's app sends ``POST /v1/<operation>`` requests
whose SigV4 credential scope names the ``batch`` service and whose operation is one of
:data:`OPERATIONS` to :class:`sandbox.batch.BatchStandIn`; every other request (including
moto's own Batch API) goes to moto unchanged. So boto3's real ``batch`` client, pointed at
the sandbox endpoint, talks to the stand-in.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sandbox.batch import (
    MAX_PAYLOAD,
    REGION,
    BatchClientError,
    BatchStandIn,
    Job,
    Queue,
)
from sandbox.json_protocol import SCOPE
from sandbox.server import Sandbox

OPERATIONS = {
    "/v1/submitservicejob": "submit",
    "/v1/describeservicejob": "describe",
    "/v1/listservicejobs": "list",
    "/v1/terminateservicejob": "terminate",
    "/v1/getjobqueuesnapshot": "snapshot",
}
_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


def check_submit(req: dict[str, Any], queue: Queue) -> str:
    """Batch's checks on SubmitServiceJob; returns the job's share."""
    if req.get("serviceJobType") != "SAGEMAKER_TRAINING":
        raise BatchClientError("serviceJobType must be SAGEMAKER_TRAINING")
    if not _NAME.fullmatch(str(req.get("jobName") or "")):
        raise BatchClientError("jobName must be 1-128 letters, numbers, hyphens, underscores")
    payload = req.get("serviceRequestPayload") or ""
    if len(payload.encode("utf-8")) > MAX_PAYLOAD:
        raise BatchClientError(f"serviceRequestPayload exceeds {MAX_PAYLOAD} bytes")
    try:
        parsed = json.loads(payload)
    except ValueError:
        raise BatchClientError("serviceRequestPayload is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise BatchClientError("serviceRequestPayload must be a JSON object")
    priority = req.get("schedulingPriority", 0)
    if not 0 <= int(priority) <= 9999:
        raise BatchClientError("schedulingPriority must be from 0 to 9999")
    attempts = (req.get("retryStrategy") or {}).get("attempts", 1)
    if not 1 <= int(attempts) <= 10:
        raise BatchClientError("retryStrategy.attempts must be from 1 to 10")
    if len((req.get("retryStrategy") or {}).get("evaluateOnExit") or []) > 5:
        raise BatchClientError("retryStrategy.evaluateOnExit takes at most 5 entries")
    field = "quotaShareName" if queue.share_policy == "quotashare" else "shareIdentifier"
    other = "shareIdentifier" if field == "quotaShareName" else "quotaShareName"
    if req.get(other):
        raise BatchClientError(f"{other} is not allowed on job queue {queue.name}")
    share = req.get(field)
    if not share:
        raise BatchClientError(f"{field} is required on job queue {queue.name}")
    # Batch's ShareAttributes: at most 255 alphanumeric characters (quota share names may
    # also hold '-' and '_', up to 128).
    text = str(share)
    if field == "shareIdentifier" and not (text.isascii() and text.isalnum() and len(text) <= 255):
        raise BatchClientError("shareIdentifier must be at most 255 alphanumeric characters")
    return text


def filter_jobs(jobs: list[Job], req: dict[str, Any]) -> list[Job]:
    """ListServiceJobs' filters: JOB_NAME (ignores jobStatus), SHARE_IDENTIFIER or
    QUOTA_SHARE_NAME (with jobStatus); jobStatus defaults to RUNNING."""
    filters = req.get("filters") or []
    for f in filters:
        values = [v.lower() for v in f.get("values", [])]
        if f.get("name") == "JOB_NAME":
            jobs = [j for j in jobs if _name_matches(j.name, values)]
        elif f.get("name") in ("SHARE_IDENTIFIER", "QUOTA_SHARE_NAME"):
            jobs = [j for j in jobs if j.share.lower() in values]
    if not any(f.get("name") == "JOB_NAME" for f in filters):
        wanted = req.get("jobStatus") or "RUNNING"
        jobs = [j for j in jobs if _list_status(j) == wanted]
    return jobs


def _list_status(job: Job) -> str:
    return "RUNNING" if job.status == "STARTING" else job.status


def _name_matches(name: str, patterns: list[str]) -> bool:
    low = name.lower()
    return any(low.startswith(p[:-1]) if p.endswith("*") else low == p for p in patterns)


def view(job: Job, *, full: bool) -> dict[str, Any]:
    """DescribeServiceJob (``full``) or a ListServiceJobs summary of ``job``."""
    req = job.request
    out: dict[str, Any] = {
        "jobArn": job.arn,
        "jobId": job.job_id,
        "jobName": job.name,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": job.status,
        "createdAt": int(job.created * 1000),
        "isTerminated": job.terminated,
        "capacityUsage": [{"capacityUnit": "NUM_INSTANCES", "quantity": float(job.instances)}],
    }
    share_key = "quotaShareName" if job.queue.share_policy == "quotashare" else "shareIdentifier"
    out[share_key] = job.share
    if job.reason:
        out["statusReason"] = job.reason
    for key, value in (
        ("scheduledAt", job.scheduled),
        ("startedAt", job.started),
        ("stoppedAt", job.stopped),
    ):
        if value is not None:
            out[key] = int(value * 1000)
    if job.training_arn:
        out["latestAttempt"] = {
            "serviceResourceId": {"name": "TrainingJobArn", "value": job.training_arn}
        }
    if not full:
        return out
    out.setdefault("startedAt", 0)  # required in DescribeServiceJob's output shape
    out.update(
        jobQueue=job.queue.arn,
        attempts=[dict(a) for a in job.attempts],
        schedulingPriority=int(req.get("schedulingPriority") or 0),
        serviceRequestPayload=req["serviceRequestPayload"],
    )
    for key in ("retryStrategy", "tags", "timeoutConfig"):
        if req.get(key):
            out[key] = req[key]
    return out


def state_change_event(job: Job, now: float) -> dict[str, Any]:
    """The EventBridge event Batch sends for a state change (no tags, no payload)."""
    detail = view(job, full=True)
    detail.pop("tags", None)
    detail.pop("serviceRequestPayload", None)
    return {
        "version": "0",
        "id": f"{job.job_id}-{len(job.attempts)}-{job.status}",
        "detail-type": "Batch Service Job State Change",
        "source": "aws.batch",
        "account": job.arn.split(":")[4],
        "time": _iso(now),
        "region": REGION,
        "resources": [job.arn],
        "detail": detail,
    }


def _iso(now: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wsgi_layer(app: Any, standin: BatchStandIn) -> Any:
    """Route the stand-in's operations to it; pass everything else to ``app``."""

    def layer(environ: dict[str, Any], start_response: Any) -> Any:
        operation = OPERATIONS.get(environ.get("PATH_INFO", "").rstrip("/").lower())
        scope = SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        if operation is None or scope is None or scope.group("service") != "batch":
            return app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
        try:
            status, out = "200 OK", _call(standin, operation, body)
            headers = [("Content-Type", "application/json")]
        except BatchClientError as exc:
            status, out = "400 Bad Request", {"__type": "ClientException", "message": str(exc)}
            headers = [
                ("Content-Type", "application/json"),
                ("x-amzn-ErrorType", "ClientException"),
            ]
        data = json.dumps(out).encode()
        start_response(status, [*headers, ("Content-Length", str(len(data)))])
        return [data]

    return layer


def _call(standin: BatchStandIn, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    if operation == "submit":
        return standin.submit(body)
    if operation == "describe":
        return standin.describe(str(body.get("jobId")))
    if operation == "list":
        return standin.list(body)
    if operation == "terminate":
        if not body.get("reason"):
            raise BatchClientError("reason is required")
        return standin.terminate(str(body.get("jobId")), str(body["reason"]))
    return standin.snapshot(str(body.get("jobQueue")))


class BatchSandbox(Sandbox):
    """The moto sandbox with the Batch service-job stand-in, the Price List API's stand-in
    (``sandbox/pricing.py``), Service Quotas' (``sandbox/service_quotas.py``), SageMaker's
    capacity stand-in (``sandbox/capacity_api.py``, off until ``capacity.enable``) and
    SageMaker's automatic model tuning (``self.tuner``, ``sandbox/tuner.py``, always on) on
    the same endpoint, and moto's CloudFormation able to deploy the queue's Batch resources
    (``sandbox/batch_cfn.py``)."""

    def __init__(self, port: int | None = None, *, standin: BatchStandIn | None = None) -> None:
        super().__init__(port)
        self.batch = standin or BatchStandIn()
        from sandbox.capacity_api import CapacityLayer, capacity_layer
        from sandbox.pricing import PricingStandIn, pricing_layer

        self.pricing = PricingStandIn()  # the Price List API (sandbox/pricing.py)
        from sandbox.service_quotas import ServiceQuotasStandIn, quotas_layer

        self.quotas = ServiceQuotasStandIn()  # ListServiceQuotas (sandbox/service_quotas.py)
        self.capacity = CapacityLayer()  # SageMaker's capacity rules (sandbox/capacity.py)
        from sandbox.tuner import TunerStandIn
        from sandbox.tuner_api import tuner_layer

        self.tuner = TunerStandIn()  # hyperparameter tuning jobs (sandbox/tuner.py)
        server = self._server
        batch, pricing, quotas, capacity = self.batch, self.pricing, self.quotas, self.capacity
        tuner = self.tuner

        def entry() -> None:  # ThreadedMotoServer._server_entry, with the Batch layer
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )
            from werkzeug.serving import make_server

            moto_app = DomainDispatcherApplication(create_backend_app)
            app = pricing_layer(wsgi_layer(moto_app, batch), pricing)
            app = capacity_layer(quotas_layer(app, quotas), capacity)
            app = tuner_layer(app, tuner)  # in front: the trials' DescribeTrainingJob
            server._server = make_server(
                server._ip_address, server._port, app, True, request_handler=MotoRequestHandler
            )
            server._server_ready_event.set()
            server._server.serve_forever()

        server._server_entry = entry

    def __enter__(self) -> BatchSandbox:
        super().__enter__()
        from sandbox.batch_cfn import register

        register()
        return self


def configure_from_template(standin: BatchStandIn, template: dict[str, Any]) -> dict[str, str]:
    """Create the stand-in's queues from a synthesized template's ``AWS::Batch::*`` resources
    (moto's CloudFormation skips them); returns queue name -> queue ARN."""
    resources = template.get("Resources", {})

    def by_ref(value: Any) -> dict[str, Any]:
        logical = value["Fn::GetAtt"][0] if isinstance(value, dict) else value
        return resources.get(logical, {}).get("Properties", {})

    queues: dict[str, str] = {}
    for res in resources.values():
        if res.get("Type") != "AWS::Batch::JobQueue":
            continue
        props = res["Properties"]
        if str(props.get("JobQueueType", "")).upper() != "SAGEMAKER_TRAINING":
            continue
        (order,) = props["ServiceEnvironmentOrder"]
        env = by_ref(order["ServiceEnvironment"])
        capacity = sum(int(c["MaxCapacity"]) for c in env.get("CapacityLimits", []))
        policy = by_ref(props["SchedulingPolicyArn"]) if "SchedulingPolicyArn" in props else {}
        fairshare = policy.get("FairsharePolicy") or {}
        shares = fairshare.get("ShareDistribution") or []
        limits = [a for a in props.get("JobStateTimeLimitActions", []) if a["State"] == "RUNNABLE"]
        name = props["JobQueueName"]
        queues[name] = standin.create_queue(
            name,
            capacity=capacity,
            head_timeout_s=float(limits[0]["MaxTimeSeconds"]) if limits else None,
            weight_factors={s["ShareIdentifier"]: float(s["WeightFactor"]) for s in shares},
            share_policy="quotashare" if "QuotaSharePolicy" in policy else "fairshare",
            # The reasons the limit acts on (Batch matches a waiting job's reason code).
            head_reasons=tuple(a["Reason"] for a in limits if a.get("Action") == "TERMINATE"),
            share_decay_s=float(fairshare.get("ShareDecaySeconds") or 0),
        )
    return queues
