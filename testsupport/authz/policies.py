"""Every policy of a synthesized deployment: identity policies by principal, resource policies
by the ARN pattern of what they are attached to, and every document for the lint."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from testsupport.authz.aws_managed import AWS_MANAGED
from testsupport.authz.evaluate import Policy
from testsupport.authz.template import ACCOUNT, REGION, Stacks


@dataclass
class PolicySet:
    """Every policy of a deployment: identity policies by role ARN, resource policies by the
    ARN pattern of the resource they are attached to."""

    identity: dict[str, list[Policy]]
    resource: dict[str, list[Policy]]
    managed: dict[str, Policy]  # customer-managed policies by ARN (a team's, the admins')
    role_names: dict[str, str]  # role ARN -> construct path
    endpoints: list[Policy]  # VPC endpoint policies (S3 gateway)

    def for_principal(self, arn: str) -> list[Policy]:
        return self.identity.get(arn, [])


def _identity(
    stacks: Stacks,
) -> tuple[dict[str, list[Policy]], dict[str, Policy], dict[str, str]]:
    """Identity policies by role ARN, customer-managed policies by ARN, role paths."""
    identity: dict[str, list[Policy]] = {}
    role_names: dict[str, str] = {}
    role_arn_by_name: dict[str, str] = {}
    for stack, logical, props in stacks.resources("AWS::IAM::Role"):
        arn = stacks.get_att(stack, logical, "Arn")
        name = stacks.ref(stack, logical)
        role_arn_by_name[name] = arn
        role_names[arn] = stacks.path(stack, logical)
        docs = identity.setdefault(arn, [])
        for inline in props.get("Policies", []) or []:
            docs.append(
                Policy(
                    inline["PolicyDocument"],
                    f"{stacks.path(stack, logical)} {inline['PolicyName']}",
                )
            )
        for managed in props.get("ManagedPolicyArns", []) or []:
            if managed in AWS_MANAGED:
                docs.append(Policy(AWS_MANAGED[managed], managed))
    managed_by_arn: dict[str, Policy] = {}
    for stack, logical, props in stacks.resources("AWS::IAM::ManagedPolicy"):
        policy = Policy(props["PolicyDocument"], stacks.path(stack, logical))
        managed_by_arn[stacks.ref(stack, logical)] = policy
        for role in props.get("Roles", []) or []:
            identity.setdefault(role_arn_by_name.get(role, role), []).append(policy)
    for stack, logical, props in stacks.resources("AWS::IAM::Policy"):
        policy = Policy(props["PolicyDocument"], stacks.path(stack, logical))
        for role in props.get("Roles", []) or []:
            identity.setdefault(
                role_arn_by_name.get(role, f"arn:aws:iam::{ACCOUNT}:role/{role}"), []
            ).append(policy)
    return identity, managed_by_arn, role_names


def _resources(stacks: Stacks) -> dict[str, list[Policy]]:
    """Resource policies by the ARN pattern of what they are attached to."""
    resource: dict[str, list[Policy]] = {}
    for stack, logical, props in stacks.resources("AWS::S3::BucketPolicy"):
        bucket = props["Bucket"]
        policy = Policy(props["PolicyDocument"], stacks.path(stack, logical), "resource")
        resource.setdefault(f"arn:aws:s3:::{bucket}", []).append(policy)
        resource.setdefault(f"arn:aws:s3:::{bucket}/*", []).append(policy)
    for stack, logical, props in stacks.resources("AWS::KMS::Key"):
        arn = stacks.get_att(stack, logical, "Arn")
        resource.setdefault(arn, []).append(
            Policy(props["KeyPolicy"], stacks.path(stack, logical), "kms")
        )
    for stack, logical, props in stacks.resources("AWS::SNS::TopicPolicy"):
        for topic in props["Topics"]:
            resource.setdefault(topic, []).append(
                Policy(props["PolicyDocument"], stacks.path(stack, logical), "resource")
            )
    for stack, logical, props in stacks.resources("AWS::SQS::QueuePolicy"):
        for url in props["Queues"]:
            name = str(url).rsplit("/", 1)[-1]
            resource.setdefault(f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}", []).append(
                Policy(props["PolicyDocument"], stacks.path(stack, logical), "resource")
            )
    for stack, logical, props in stacks.resources("AWS::Lambda::Permission"):
        fn = props["FunctionName"]
        fn = (
            fn if str(fn).startswith("arn:") else f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{fn}"
        )
        statement: dict[str, Any] = {
            "Sid": logical,
            "Effect": "Allow",
            "Action": props["Action"],
            "Resource": fn,
        }
        principal = props["Principal"]
        statement["Principal"] = (
            {"Service": principal} if principal.endswith(".amazonaws.com") else {"AWS": principal}
        )
        cond: dict[str, dict[str, str]] = {}
        if "SourceArn" in props:
            cond.setdefault("ArnLike", {})["aws:SourceArn"] = props["SourceArn"]
        if "SourceAccount" in props:
            cond.setdefault("StringEquals", {})["aws:SourceAccount"] = props["SourceAccount"]
        if cond:
            statement["Condition"] = cond
        resource.setdefault(fn, []).append(
            Policy({"Statement": [statement]}, stacks.path(stack, logical), "resource")
        )
    return resource


def policy_set(stacks: Stacks) -> PolicySet:
    endpoints = [
        Policy(props["PolicyDocument"], stacks.path(stack, logical), "endpoint")
        for stack, logical, props in stacks.resources("AWS::EC2::VPCEndpoint")
        if props.get("PolicyDocument")
    ]
    identity, managed, role_names = _identity(stacks)
    return PolicySet(identity, _resources(stacks), managed, role_names, endpoints)


def all_documents(stacks: Stacks) -> list[tuple[str, str, str, Mapping[str, Any]]]:
    """(stack, construct path, kind, document) of every policy document in the templates."""
    found: list[tuple[str, str, str, Mapping[str, Any]]] = []
    kinds = {
        "AWS::IAM::Policy": ("PolicyDocument", "identity"),
        "AWS::IAM::ManagedPolicy": ("PolicyDocument", "identity"),
        "AWS::S3::BucketPolicy": ("PolicyDocument", "resource"),
        "AWS::KMS::Key": ("KeyPolicy", "resource"),
        "AWS::SNS::TopicPolicy": ("PolicyDocument", "resource"),
        "AWS::SQS::QueuePolicy": ("PolicyDocument", "resource"),
        "AWS::EC2::VPCEndpoint": ("PolicyDocument", "endpoint"),
    }
    for rtype, (prop, kind) in kinds.items():
        for stack, logical, props in stacks.resources(rtype):
            if props.get(prop):
                found.append((stack, stacks.path(stack, logical), kind, props[prop]))
    for stack, logical, props in stacks.resources("AWS::IAM::Role"):
        for inline in props.get("Policies", []) or []:
            found.append((stack, stacks.path(stack, logical), "identity", inline["PolicyDocument"]))
        trust = props.get("AssumeRolePolicyDocument")
        if trust:
            found.append((stack, stacks.path(stack, logical), "trust", trust))
    return found
