"""Helpers to acknowledge cdk-nag v3 findings on the narrowest construct, with their reason."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (e.g. ``AwsSolutions-IAM5[Action::s3:*]``) on ``scope``."""
    Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


def acknowledge_resource(scope: IConstruct, resource: str, reason: str) -> None:
    """Acknowledge the IAM5 wildcard finding for ``resource``, a string that may hold tokens.

    cdk-nag names such findings by the resolved ARN with ``Ref`` shown as ``<Name>`` and
    ``Fn::GetAtt`` as ``<Logical.Attr>``; rendering it the same way here keeps acknowledgements
    free of hard-coded logical ids.
    """
    rendered = _render(Stack.of(scope).resolve(resource))
    acknowledge(scope, f"AwsSolutions-IAM5[Resource::{rendered}]", reason)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return "<{}.{}>".format(*value["Fn::GetAtt"])
        if "Fn::ImportValue" in value:  # another stack's export: cdk-nag shows its name
            return _render(value["Fn::ImportValue"])
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(_render(p) for p in parts)
    raise ValueError(f"cannot render {value!r} as a cdk-nag finding id")


def checkov_skip(construct: IConstruct, check: str, comment: str) -> None:
    """Record a checkov skip, with its reason, on the construct's CloudFormation resource."""
    resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
    assert isinstance(resource, CfnResource), f"{construct.node.path} has no CFN resource"
    current = resource.get_metadata("checkov") or {"skip": []}
    current["skip"].append({"id": check, "comment": comment})
    resource.add_metadata("checkov", current)
