"""From an AWS call to the IAM authorization requests AWS makes for it.

Each mapping follows the Service Authorization Reference (the action, the resource types it
is authorized on, the condition keys) and the service's documentation for the requests AWS
makes on the caller's behalf: tag-on-create (``AddTags``/``TagResource``), ``iam:PassRole``
for a role in the request, and KMS for SSE-KMS reads and writes (S3, DynamoDB, SNS: the
caller needs the key, with ``kms:ViaService``). An operation without a mapping raises, so a new
call in the code cannot slip past the check.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobmodel.contract.names import BATCH_SLR
from testsupport.authz.evaluate import Request
from testsupport.authz.requests_registry import RegistryRequests
from testsupport.authz.requests_tuner import TunerRequests

ACCOUNT = "123456789012"
REGION = "us-east-1"
SAGEMAKER = "sagemaker.amazonaws.com"


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


def training_job_arn(name: str) -> str:
    # SageMaker writes resource names lower-case in the ARNs it returns.
    return _arn("sagemaker", f"training-job/{name.lower()}")


def training_job_arns(name: str) -> tuple[str, ...]:
    """The job's ARN as SageMaker returns it (lower-case) and with the name as given: AWS
    does not document which one it authorizes, so a request must pass with either."""
    return tuple(dict.fromkeys([training_job_arn(name), _arn("sagemaker", f"training-job/{name}")]))


def tag_context(tags: Sequence[Mapping[str, str]], key: str = "Key", value: str = "Value") -> dict:
    ctx: dict[str, Any] = {f"aws:RequestTag/{t[key]}": t[value] for t in tags}
    if tags:
        ctx["aws:TagKeys"] = [t[key] for t in tags]
    return ctx


@dataclass
class Mapper(RegistryRequests, TunerRequests):
    """Maps calls to requests for one deployment: which key encrypts which table, bucket and
    topic, and the tags of each training job and tuning job seen created (describe/stop carry
    them as ``aws:ResourceTag``; a tuning job's trials carry its tags)."""

    encrypted: Mapping[str, str] = field(default_factory=dict)  # resource ARN -> key ARN
    job_tags: dict[str, dict[str, str]] = field(default_factory=dict)
    service_jobs: dict[str, str] = field(default_factory=dict)  # batch job id -> queue
    tuning_tags: dict[str, dict[str, str]] = field(default_factory=dict)

    def _kms(
        self, principal: str, resource: str, actions: Sequence[str], via: str, src: str
    ) -> list[Request]:
        key = next((k for prefix, k in self.encrypted.items() if resource.startswith(prefix)), None)
        if key is None:
            return []
        ctx = {"kms:ViaService": f"{via}.{REGION}.amazonaws.com", "kms:CallerAccount": ACCOUNT}
        return [Request(principal, a, (key,), ctx, src) for a in actions]

    def requests(
        self, principal: str, service: str, operation: str, params: Mapping[str, Any]
    ) -> list[Request]:
        src = f"{service}:{operation}"
        handler = getattr(self, f"_{service.replace('-', '_')}_{operation}", None)
        if handler is None:
            raise NotImplementedError(f"no authorization mapping for {src}")
        return handler(principal, params, src)

    # ----------------------------------------------------------------- SageMaker
    def create_training_job_context(self, params: Mapping[str, Any]) -> dict[str, Any]:
        rc = params.get("ResourceConfig", {})
        types = [rc["InstanceType"]] if "InstanceType" in rc else []
        types += [g["InstanceType"] for g in rc.get("InstanceGroups", [])]
        types += [
            p["InstanceType"] for p in rc.get("InstancePreferences", []) if "InstanceType" in p
        ]
        ctx: dict[str, Any] = {
            "sagemaker:InstanceTypes": types,
            "sagemaker:MaxRuntimeInSeconds": params["StoppingCondition"]["MaxRuntimeInSeconds"],
            "sagemaker:NetworkIsolation": bool(params.get("EnableNetworkIsolation", False)),
            "sagemaker:InterContainerTrafficEncryption": bool(
                params.get("EnableInterContainerTrafficEncryption", False)
            ),
            **tag_context(params.get("Tags", [])),
        }
        if params.get("OutputDataConfig", {}).get("KmsKeyId"):
            ctx["sagemaker:OutputKmsKeyArn"] = params["OutputDataConfig"]["KmsKeyId"]
        if rc.get("VolumeKmsKeyId"):
            ctx["sagemaker:VolumeKmsKeyArn"] = rc["VolumeKmsKeyId"]
        if "KeepAlivePeriodInSeconds" in rc:
            ctx["sagemaker:KeepAlivePeriod"] = rc["KeepAlivePeriodInSeconds"]
        vpc = params.get("VpcConfig")
        if vpc:
            ctx["sagemaker:VpcSubnets"] = list(vpc["Subnets"])
            ctx["sagemaker:VpcSecurityGroupIds"] = list(vpc["SecurityGroupIds"])
        if "RemoteDebugConfig" in params:
            ctx["sagemaker:EnableRemoteDebug"] = bool(
                params["RemoteDebugConfig"].get("EnableRemoteDebug", False)
            )
        return ctx

    def _sagemaker_CreateTrainingJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        name = params["TrainingJobName"]
        tags = params.get("Tags", [])
        self.job_tags[name.lower()] = {t["Key"]: t["Value"] for t in tags}
        ctx = self.create_training_job_context(params)
        out = [
            Request(p, "sagemaker:CreateTrainingJob", (a,), ctx, src)
            for a in training_job_arns(name)
        ]
        if tags:
            tagging = {"sagemaker:TaggingAction": "CreateTrainingJob", **tag_context(tags)}
            out += [
                Request(p, "sagemaker:AddTags", (a,), tagging, src) for a in training_job_arns(name)
            ]
        # A job on reserved capacity is authorized on the training plan too (same context).
        plan = params.get("ResourceConfig", {}).get("TrainingPlanArn")
        if plan:
            out.append(Request(p, "sagemaker:CreateTrainingJob", (plan,), ctx, src))
        out.append(
            Request(
                p, "iam:PassRole", (params["RoleArn"],), {"iam:PassedToService": SAGEMAKER}, src
            )
        )
        return out

    def _job_request(self, p: str, action: str, name: str, src: str) -> list[Request]:
        tags = self.job_tags.get(name.lower())
        if tags is None:  # a tuner's trial: its tuning job's tags
            tags = self.trial_tags(name)
        if tags is None:  # a job AWS Batch created: AWSBatch<jobName><32 hex>, payload's tags
            # (the job name cut to fit SageMaker's 63 characters, when it is long)
            base = name.lower()[:-32]
            found = [k for k in self.job_tags if k.endswith("*") and k[:-1].startswith(base)]
            # Several payloads may fit a cut name: only the tags they all carry are certain.
            common = [set(self.job_tags[k].items()) for k in found]
            tags = dict(set.intersection(*common)) if common else {}
        ctx = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
        return [Request(p, action, (arn,), ctx, src) for arn in training_job_arns(name)]

    def _sagemaker_DescribeTrainingJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return self._job_request(p, "sagemaker:DescribeTrainingJob", params["TrainingJobName"], src)

    def _sagemaker_StopTrainingJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return self._job_request(p, "sagemaker:StopTrainingJob", params["TrainingJobName"], src)

    def _sagemaker_ListTrainingJobs(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return [Request(p, "sagemaker:ListTrainingJobs", ("*",), {}, src)]

    # ----------------------------------------------------------------- DynamoDB
    def _table(self, name: str) -> str:
        return name if name.startswith("arn:") else _arn("dynamodb", f"table/{name}")

    def _item(self, p: str, action: str, table: str, src: str) -> list[Request]:
        arn = self._table(table)
        return [
            Request(p, action, (arn,), {}, src),
            *self._kms(p, arn, ["kms:Decrypt"], "dynamodb", src),
        ]

    def _dynamodb_GetItem(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        return self._item(p, "dynamodb:GetItem", params["TableName"], src)

    def _dynamodb_PutItem(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        out = self._item(p, "dynamodb:PutItem", params["TableName"], src)
        # The partition key written, for policies that limit it (dynamodb:LeadingKeys).
        pk = params.get("Item", {}).get("pk", {}).get("S")
        if pk is not None:
            first = out[0]
            context = {**first.context, "dynamodb:LeadingKeys": [pk]}
            out[0] = Request(first.principal, first.action, first.resources, context, src)
        return out

    # ---------------------------------------------------------------- Price List
    def _pricing_GetProducts(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        # No resource types and no condition keys (Service Authorization Reference).
        return [Request(p, "pricing:GetProducts", ("*",), {}, src)]

    def _servicequotas_ListServiceQuotas(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        # No resource types and no condition keys in the Service Authorization Reference.
        return [Request(p, "servicequotas:ListServiceQuotas", ("*",), {}, src)]

    def _ssm_GetParameter(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        name = str(params["Name"])
        if name.startswith("arn:"):
            return [Request(p, "ssm:GetParameter", (name,), {}, src)]
        arn = _arn("ssm", f"parameter/{name.lstrip('/')}")
        return [Request(p, "ssm:GetParameter", (arn,), {}, src)]

    def _sts_GetCallerIdentity(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        # "No permissions are required to perform this operation" (STS API reference): not
        # even an explicit deny stops it, so it makes no authorization request.
        return []

    def _iam_GetRole(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        name = params["RoleName"]
        path = (
            "aws-service-role/sagemaker-queuing.batch.amazonaws.com/" if name == BATCH_SLR else ""
        )
        return [Request(p, "iam:GetRole", (f"arn:aws:iam::{ACCOUNT}:role/{path}{name}",), {}, src)]

    def _dynamodb_UpdateItem(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        return self._item(p, "dynamodb:UpdateItem", params["TableName"], src)

    def _dynamodb_DeleteItem(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        return self._item(p, "dynamodb:DeleteItem", params["TableName"], src)

    def _dynamodb_BatchGetItem(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        out: list[Request] = []
        for table in params["RequestItems"]:
            out += self._item(p, "dynamodb:BatchGetItem", table, src)
        return out

    def _dynamodb_Scan(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        return self._item(p, "dynamodb:Scan", params["TableName"], src)

    def _dynamodb_Query(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        table = self._table(params["TableName"])
        arn = f"{table}/index/{params['IndexName']}" if params.get("IndexName") else table
        return [
            Request(p, "dynamodb:Query", (arn,), {}, src),
            *self._kms(p, table, ["kms:Decrypt"], "dynamodb", src),
        ]

    def _dynamodb_TransactWriteItems(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        actions = {
            "Put": "dynamodb:PutItem",
            "Update": "dynamodb:UpdateItem",
            "Delete": "dynamodb:DeleteItem",
            "ConditionCheck": "dynamodb:ConditionCheckItem",
        }
        out: list[Request] = []
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            out += self._item(p, actions[kind], body["TableName"], src)
        return out

    # ----------------------------------------------------------------- AWS Batch
    def _queue(self, queue: str) -> str:
        return queue if queue.startswith("arn:") else _arn("batch", f"job-queue/{queue}")

    def _batch_SubmitServiceJob(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        queue = self._queue(params["jobQueue"])
        new_job = _arn("batch", f"service-job/{uuid.uuid4()}")
        resources = [queue, new_job]
        if params.get("quotaShareName"):
            resources.append(f"{queue}/quota-share/{params['quotaShareName']}")
        tags = [{"Key": k, "Value": v} for k, v in params.get("tags", {}).items()]
        ctx: dict[str, Any] = tag_context(tags)
        if "shareIdentifier" in params:
            ctx["batch:ShareIdentifier"] = params["shareIdentifier"]
        if "schedulingPriority" in params:
            ctx["batch:SchedulingPriority"] = params["schedulingPriority"]
        out = [Request(p, "batch:SubmitServiceJob", tuple(resources), ctx, src)]
        if tags:
            out.append(Request(p, "batch:TagResource", (new_job,), tag_context(tags), src))
        payload = json.loads(params["serviceRequestPayload"])
        batch_name = f"awsbatch{params['jobName']}".lower()
        self.job_tags[f"{batch_name}*"] = {t["Key"]: t["Value"] for t in payload.get("Tags", [])}
        out.append(
            Request(
                p, "iam:PassRole", (payload["RoleArn"],), {"iam:PassedToService": SAGEMAKER}, src
            )
        )
        return out

    def _batch_DescribeServiceJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return [Request(p, "batch:DescribeServiceJob", ("*",), {}, src)]

    def _batch_ListServiceJobs(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        return [Request(p, "batch:ListServiceJobs", ("*",), {}, src)]

    def _batch_TerminateServiceJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return [
            Request(
                p,
                "batch:TerminateServiceJob",
                (_arn("batch", f"service-job/{params['jobId']}"),),
                {},
                src,
            )
        ]

    def _batch_GetJobQueueSnapshot(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return [
            Request(p, "batch:GetJobQueueSnapshot", (self._queue(params["jobQueue"]),), {}, src)
        ]

    # ----------------------------------------------------------------- SNS, Lambda, logs, CFN
    def _sns_Publish(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        topic = params["TopicArn"]
        return [
            Request(p, "sns:Publish", (topic,), {}, src),
            *self._kms(p, topic, ["kms:GenerateDataKey", "kms:Decrypt"], "sns", src),
        ]

    def _sns_Subscribe(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        ctx = {"sns:Protocol": params["Protocol"]}
        if params.get("Endpoint"):
            ctx["sns:Endpoint"] = params["Endpoint"]
        return [Request(p, "sns:Subscribe", (params["TopicArn"],), ctx, src)]

    def _sns_ListSubscriptionsByTopic(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return [Request(p, "sns:ListSubscriptionsByTopic", (params["TopicArn"],), {}, src)]

    def _events_PutEvents(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        """One request per entry, on its bus, with its source and detail-type as context."""
        out = []
        for entry in params["Entries"]:
            bus = entry.get("EventBusName") or "default"
            if not bus.startswith("arn:"):
                bus = _arn("events", f"event-bus/{bus}")
            ctx = {"events:source": entry["Source"], "events:detail-type": entry["DetailType"]}
            out.append(Request(p, "events:PutEvents", (bus,), ctx, src))
        return out

    def _lambda_Invoke(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        fn = params["FunctionName"]
        if not fn.startswith("arn:"):
            fn = _arn("lambda", f"function:{fn}")
        if params.get("Qualifier"):
            fn = f"{fn}:{params['Qualifier']}"
        return [Request(p, "lambda:InvokeFunction", (fn,), {}, src)]

    def _cloudformation_DescribeStacks(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        name = params["StackName"]
        arn = (
            name
            if name.startswith("arn:")
            else _arn("cloudformation", f"stack/{name}/{uuid.uuid4()}")
        )
        return [Request(p, "cloudformation:DescribeStacks", (arn,), {}, src)]

    def _logs_group(self, name: str) -> str:
        return _arn("logs", f"log-group:{name}:*")

    def _logs_DescribeLogStreams(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return [
            Request(
                p, "logs:DescribeLogStreams", (self._logs_group(params["logGroupName"]),), {}, src
            )
        ]

    def _logs_FilterLogEvents(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        return [
            Request(p, "logs:FilterLogEvents", (self._logs_group(params["logGroupName"]),), {}, src)
        ]

    def _logs_GetLogEvents(self, p: str, params: Mapping[str, Any], src: str) -> list[Request]:
        group = params["logGroupName"]
        stream = _arn("logs", f"log-group:{group}:log-stream:{params['logStreamName']}")
        return [Request(p, "logs:GetLogEvents", (stream,), {}, src)]
