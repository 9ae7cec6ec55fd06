"""The synthesized stacks with their intrinsics resolved.

CloudFormation would give every resource a physical name; here each gets a deterministic fake
one of the right shape (an ARN where ``Ref`` returns an ARN, a bucket name where it returns a
name), so the policies and the trigger's environment resolve to the same strings. Cross-stack
``Fn::ImportValue`` reads the exporting stack's output, and a parameter of type
``AWS::SSM::Parameter::Value<String>`` the value of the ``AWS::SSM::Parameter`` of that name
another stack writes (how the training roles' ARNs reach the launcher stack).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"


def _token(*parts: str, n: int = 8) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]


@dataclass
class Stacks:
    """Templates by stack name, resolved on demand."""

    templates: Mapping[str, Mapping[str, Any]]
    _exports: dict[str, Any] = field(default_factory=dict)
    _ssm: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for stack, template in self.templates.items():
            for output in template.get("Outputs", {}).values():
                name = output.get("Export", {}).get("Name")
                if name is not None:
                    self._exports[self.resolve(stack, name)] = (stack, output["Value"])
            for resource in template.get("Resources", {}).values():
                if resource["Type"] == "AWS::SSM::Parameter":
                    props = resource["Properties"]
                    self._ssm[props["Name"]] = (stack, props["Value"])

    # ------------------------------------------------------------------ physical names
    def _name(self, stack: str, logical: str, prop: str | None, *, lower: bool = False) -> str:
        props = self.templates[stack]["Resources"][logical].get("Properties", {})
        if prop and prop in props:
            return str(self.resolve(stack, props[prop]))
        name = f"{stack}-{logical}-{_token(stack, logical)}"
        return name.lower() if lower else name

    def ref(self, stack: str, logical: str) -> Any:
        params = self.templates[stack].get("Parameters", {})
        if logical in params:
            default = params[logical].get("Default", f"{logical}-parameter")
            if params[logical].get("Type", "").startswith("AWS::SSM::Parameter::Value"):
                if default in self._ssm:
                    writer, value = self._ssm[default]
                    return self.resolve(writer, value)
            return default
        pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": stack,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/"
            f"{_token(stack, n=8)}-0000-4000-8000-{_token(stack, 'id', n=12)}",
            "AWS::NoValue": None,
        }
        if logical in pseudo:
            return pseudo[logical]
        rtype = self.templates[stack]["Resources"][logical]["Type"]
        a = f"{REGION}:{ACCOUNT}"
        match rtype:
            case "AWS::S3::Bucket":
                return self._name(stack, logical, "BucketName", lower=True)
            case "AWS::KMS::Key":
                t = _token(stack, logical, n=32)
                return f"{t[:8]}-{t[8:12]}-{t[12:16]}-{t[16:20]}-{t[20:32]}"
            case "AWS::Lambda::Function":
                return self._name(stack, logical, "FunctionName")
            case "AWS::Lambda::Alias":
                props = self.templates[stack]["Resources"][logical]["Properties"]
                fn = self.resolve(stack, props["FunctionName"])
                fn = fn if fn.startswith("arn:") else f"arn:aws:lambda:{a}:function:{fn}"
                return f"{fn}:{self.resolve(stack, props['Name'])}"
            case "AWS::Lambda::Version":
                props = self.templates[stack]["Resources"][logical]["Properties"]
                fn = self.resolve(stack, props["FunctionName"])
                fn = fn if fn.startswith("arn:") else f"arn:aws:lambda:{a}:function:{fn}"
                return f"{fn}:1"
            case "AWS::IAM::Role":
                return self._name(stack, logical, "RoleName")[:64]
            case "AWS::IAM::ManagedPolicy":
                name = self._name(stack, logical, "ManagedPolicyName")
                return f"arn:aws:iam::{ACCOUNT}:policy/{name}"
            case "AWS::DynamoDB::Table":
                return self._name(stack, logical, "TableName")
            case "AWS::SNS::Topic":
                return f"arn:aws:sns:{a}:{self._name(stack, logical, 'TopicName')}"
            case "AWS::SQS::Queue":
                name = self._name(stack, logical, "QueueName")
                return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
            case "AWS::Batch::JobQueue":
                return f"arn:aws:batch:{a}:job-queue/{self._name(stack, logical, 'JobQueueName')}"
            case "AWS::Batch::SchedulingPolicy":
                return f"arn:aws:batch:{a}:scheduling-policy/{self._name(stack, logical, 'Name')}"
            case "AWS::Batch::ServiceEnvironment":
                name = self._name(stack, logical, "ServiceEnvironmentName")
                return f"arn:aws:batch:{a}:service-environment/{name}"
            case "AWS::Batch::QuotaShare":
                props = self.templates[stack]["Resources"][logical]["Properties"]
                queue = self.resolve(stack, props["JobQueue"])
                return f"{queue}/quota-share/{props['QuotaShareName']}"
            case "AWS::EC2::VPC":
                return f"vpc-{_token(stack, logical, n=17)}"
            case "AWS::EC2::Subnet":
                return f"subnet-{_token(stack, logical, n=17)}"
            case "AWS::EC2::SecurityGroup":
                return f"sg-{_token(stack, logical, n=17)}"
            case "AWS::EC2::VPCEndpoint":
                return f"vpce-{_token(stack, logical, n=17)}"
            case "AWS::ApiGatewayV2::Api":
                return _token(stack, logical, n=10)
            case "AWS::Logs::LogGroup":
                return self._name(stack, logical, "LogGroupName")
            case "AWS::Events::Rule":
                return self._name(stack, logical, "Name")
        return f"{logical}-{_token(stack, logical)}"

    def get_att(self, stack: str, logical: str, attr: str) -> Any:
        rtype = self.templates[stack]["Resources"][logical]["Type"]
        ref = self.ref(stack, logical)
        a = f"{REGION}:{ACCOUNT}"
        table = {
            ("AWS::S3::Bucket", "Arn"): f"arn:aws:s3:::{ref}",
            ("AWS::S3::Bucket", "RegionalDomainName"): f"{ref}.s3.{REGION}.amazonaws.com",
            ("AWS::S3::Bucket", "DomainName"): f"{ref}.s3.amazonaws.com",
            ("AWS::KMS::Key", "Arn"): f"arn:aws:kms:{a}:key/{ref}",
            ("AWS::KMS::Key", "KeyId"): ref,
            ("AWS::Lambda::Function", "Arn"): f"arn:aws:lambda:{a}:function:{ref}",
            ("AWS::Lambda::Version", "Version"): "1",
            ("AWS::IAM::Role", "Arn"): f"arn:aws:iam::{ACCOUNT}:role/{ref}",
            ("AWS::IAM::Role", "RoleId"): f"AROA{_token(stack, logical, n=16).upper()}",
            ("AWS::DynamoDB::Table", "Arn"): f"arn:aws:dynamodb:{a}:table/{ref}",
            ("AWS::DynamoDB::Table", "StreamArn"): f"arn:aws:dynamodb:{a}:table/{ref}/stream/x",
            ("AWS::SNS::Topic", "TopicArn"): ref,
            ("AWS::SNS::Topic", "TopicName"): ref.rsplit(":", 1)[-1],
            ("AWS::SQS::Queue", "Arn"): f"arn:aws:sqs:{a}:{str(ref).rsplit('/', 1)[-1]}",
            ("AWS::SQS::Queue", "QueueName"): str(ref).rsplit("/", 1)[-1],
            ("AWS::Batch::JobQueue", "JobQueueArn"): ref,
            ("AWS::Batch::SchedulingPolicy", "Arn"): ref,
            ("AWS::Batch::ServiceEnvironment", "ServiceEnvironmentArn"): ref,
            ("AWS::Batch::QuotaShare", "QuotaShareArn"): ref,
            ("AWS::EC2::SecurityGroup", "GroupId"): ref,
            ("AWS::EC2::VPC", "CidrBlock"): "10.0.0.0/16",
            ("AWS::Logs::LogGroup", "Arn"): f"arn:aws:logs:{a}:log-group:{ref}:*",
            ("AWS::Events::Rule", "Arn"): f"arn:aws:events:{a}:rule/{ref}",
            (
                "AWS::ApiGatewayV2::Api",
                "ApiEndpoint",
            ): f"https://{ref}.execute-api.{REGION}.amazonaws.com",
            ("AWS::ApiGatewayV2::Api", "ApiId"): ref,
        }
        if (rtype, attr) in table:
            return table[(rtype, attr)]
        return f"{ref}.{attr}"

    # ------------------------------------------------------------------ intrinsics
    def resolve(self, stack: str, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(stack, v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return self.ref(stack, arg)
            if fn == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(stack, logical, attr)
            if fn == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(stack, p)) for p in self.resolve(stack, parts))
            if fn == "Fn::Select":
                index, items = arg
                return self.resolve(stack, items)[int(self.resolve(stack, index))]
            if fn == "Fn::Split":
                sep, text = arg
                return str(self.resolve(stack, text)).split(sep)
            if fn == "Fn::GetAZs":
                return [f"{REGION}a", f"{REGION}b", f"{REGION}c"]
            if fn == "Fn::ImportValue":
                exporter, exported = self._exports[self.resolve(stack, arg)]
                return self.resolve(exporter, exported)
            if fn == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg

                def sub(m: re.Match[str]) -> str:
                    name = m.group(1)
                    if name in variables:
                        return str(self.resolve(stack, variables[name]))
                    if "." in name:
                        logical, attr = name.split(".", 1)
                        return str(self.get_att(stack, logical, attr))
                    return str(self.ref(stack, name))

                return re.sub(r"\$\{([^}!]+)\}", sub, text)
            if fn == "Fn::If":
                cond, yes, no = arg
                return self.resolve(stack, yes if self.condition(stack, cond) else no)
            if fn.startswith("Fn::"):
                raise NotImplementedError(f"{fn} in {stack}")
        return {k: self.resolve(stack, v) for k, v in value.items()}

    def condition(self, stack: str, name: str) -> bool:
        return bool(self._cond(stack, self.templates[stack]["Conditions"][name]))

    def _cond(self, stack: str, expr: Any) -> Any:
        if isinstance(expr, dict) and len(expr) == 1:
            ((fn, arg),) = expr.items()
            if fn == "Fn::Equals":
                a, b = (self._cond(stack, x) for x in arg)
                return a == b
            if fn == "Fn::Not":
                return not self._cond(stack, arg[0])
            if fn == "Fn::And":
                return all(self._cond(stack, x) for x in arg)
            if fn == "Fn::Or":
                return any(self._cond(stack, x) for x in arg)
            if fn == "Condition":
                return self.condition(stack, arg)
            if fn == "Fn::Contains":
                items, item = (self._cond(stack, x) for x in arg)
                return item in items
        return self.resolve(stack, expr)

    # ------------------------------------------------------------------ reading
    def resources(self, rtype: str) -> list[tuple[str, str, dict[str, Any]]]:
        """(stack, logical id, resolved properties) of every resource of a type."""
        found = []
        for stack, template in self.templates.items():
            for logical, resource in template["Resources"].items():
                if resource["Type"] == rtype:
                    if "Condition" in resource and not self.condition(stack, resource["Condition"]):
                        continue
                    props = self.resolve(stack, resource.get("Properties", {}))
                    found.append((stack, logical, props))
        return found

    def path(self, stack: str, logical: str) -> str:
        meta = self.templates[stack]["Resources"][logical].get("Metadata", {})
        return str(meta.get("aws:cdk:path", f"{stack}/{logical}"))


__all__ = ["ACCOUNT", "REGION", "Stacks"]
