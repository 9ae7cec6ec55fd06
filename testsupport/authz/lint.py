"""A static lint of policy documents against the Service Authorization Reference.

Per statement: every action exists; every condition key applies to every action of the
statement (a global key, or one AWS lists for the action or its resource types) and is not
deprecated; every resource matches a resource type the action takes (``*`` for an action that
takes none); operators fit the key's type (``Arn*`` on ARN keys, ``Numeric*`` on numeric ones,
``Bool`` on booleans, no ``ForAnyValue``/``ForAllValues`` on single-valued keys); an Allow with
``ForAllValues`` has a ``Null`` guard on the same key (``ForAllValues`` is true for an absent
key). A finding names the stack, the construct and the statement's Sid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from testsupport.authz import sar
from testsupport.authz.evaluate import as_list, statements


@dataclass(frozen=True)
class Finding:
    stack: str
    construct: str
    sid: str
    message: str

    def __str__(self) -> str:
        return f"{self.stack} {self.construct} [{self.sid}]: {self.message}"


_ARN_OPS = ("ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike")


def _base(operator: str) -> tuple[str, str]:
    set_op, _, base = operator.rpartition(":")
    return set_op, base.removesuffix("IfExists")


def _type_fits(base: str, key_type: str) -> bool:
    scalar = key_type.removeprefix("ArrayOf")
    if base in _ARN_OPS:
        return scalar in ("ARN", "String")  # IAM documents ARN operators on String keys too
    if base.startswith("Numeric"):
        return scalar in ("Numeric", "Long", "Integer")
    if base == "Bool":
        return scalar == "Bool"
    if base.startswith("Date"):
        return scalar == "Date"
    if base.startswith("String"):
        return scalar in ("String", "ARN")
    if base in ("IpAddress", "NotIpAddress"):
        return scalar == "IPAddress"
    return True  # Null applies to any key


def lint_statement(
    statement: Mapping[str, Any], *, stack: str, construct: str, kind: str
) -> list[Finding]:
    sid = str(statement.get("Sid", "(no Sid)"))
    findings: list[Finding] = []

    def add(message: str) -> None:
        findings.append(Finding(stack, construct, sid, message))

    if "Action" not in statement:
        return findings  # NotAction: nothing to check per action
    actions: list[sar.ActionInfo] = []
    for pattern in as_list(statement["Action"]):
        if pattern == "*":
            continue
        names = sar.matching_actions(pattern) if "*" in pattern else [pattern]
        if not names:
            add(f"action {pattern} matches no action AWS lists")
        for name in names:
            info = sar.action(name)
            if info is None:
                add(f"action {name} does not exist")
            else:
                actions.append(info)
    conditions = statement.get("Condition", {})
    for operator, keys in conditions.items():
        set_op, base = _base(operator)
        for key in keys:
            info = sar.condition_key(key)
            if info is None:
                add(f"condition key {key} does not exist")
                continue
            if sar.is_deprecated(info):
                add(f"condition key {key} is deprecated: {info['description']}")
            if kind in ("identity", "resource") and not key.startswith("aws:"):
                for action in actions:
                    if not sar.key_applies(key, action):
                        add(f"condition key {key} does not apply to {action.name}")
            key_type = str(info.get("type", "String"))
            if not _type_fits(base, key_type):
                add(f"operator {operator} does not fit {key} of type {key_type}")
            if set_op and not key_type.startswith("ArrayOf"):
                add(f"{set_op} on single-valued key {key}")
            if (
                set_op == "ForAllValues"
                and statement.get("Effect") == "Allow"
                and str(conditions.get("Null", {}).get(key, "")).lower() != "false"
            ):
                add(f"ForAllValues on {key} without a Null guard (true when the key is absent)")
    if kind in ("identity", "resource") and "Resource" in statement:
        # A statement is a cross product of its actions and resources: a resource of another
        # action's type is fine, an action none of whose resources it can ever match is not.
        # Actions named by a wildcard (``s3:*`` in a TLS-only deny) are not checked.
        explicit = [a for a in actions if a.name.lower() in _named(statement)]
        resources = as_list(statement["Resource"])
        for action in explicit:
            if "*" in resources:
                continue
            service = action.name.split(":", 1)[0]
            if not action.resource_types:
                add(f"{action.name} takes no resource type, only '*': {resources} never match")
                continue
            if not any(_fits(service, rt, r) for rt in action.resource_types for r in resources):
                add(
                    f"none of {resources} is one of {action.name}'s resource types "
                    f"({', '.join(action.resource_types)})"
                )
    return findings


def _named(statement: Mapping[str, Any]) -> set[str]:
    return {str(a).lower() for a in as_list(statement.get("Action")) if "*" not in str(a)}


# What a policy's ``*`` may stand for when it is compared with an ARN format: a name, a path,
# more colon-separated parts (``log-group:<name>:*`` covers ``...:log-stream:<stream>``).
_FILLS = ("x", "x/x", "x:x", "x:log-stream:x")


def _fits(service: str, rtype: str, resource: str) -> bool:
    rx = sar.arn_format_regex(service, rtype)
    if rx is None:
        return False
    return any(rx.match(resource.replace("*", fill)) for fill in _FILLS)


def lint_document(
    document: Mapping[str, Any], *, stack: str, construct: str, kind: str
) -> list[Finding]:
    return [
        f
        for st in statements(document)
        for f in lint_statement(st, stack=stack, construct=construct, kind=kind)
    ]
