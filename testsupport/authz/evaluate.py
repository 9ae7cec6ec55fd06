"""A small evaluator of IAM's documented policy evaluation logic, for one account.

It implements what the platform's policies use (IAM User Guide, "Policy evaluation logic" and
"IAM JSON policy elements: Condition operators"), and refuses what it does not implement:

* A request is one principal calling one action on one or more resources (an action that AWS
  authorizes on several resource types, such as ``batch:SubmitServiceJob`` on the queue and the
  new service job, is allowed only when every one of them is), with its condition context.
* Per resource: an explicit ``Deny`` in any applicable policy (identity, or the resource's own
  policy, or a VPC endpoint policy on the path) wins; otherwise an ``Allow`` in an identity
  policy or in the resource policy (naming the principal) allows; otherwise implicit deny.
  A KMS key policy is the exception AWS documents: the key policy must allow, either the
  principal directly or the account (``arn:aws:iam::<acct>:root``), which delegates to IAM.
  A VPC endpoint policy must also allow (it is a filter, not a grant).
* Conditions: the ``String*``, ``Numeric*``, ``Date*`` (ISO strings), ``Bool``, ``Arn*`` and
  ``Null`` operators, ``...IfExists``, and the ``ForAllValues:``/``ForAnyValue:`` set
  operators. A key missing from the context makes a positive operator false and a negated one
  (``StringNotEquals``, ``ArnNotLike``, ...) true; ``...IfExists`` is true; ``ForAllValues`` is
  true and ``ForAnyValue`` false. Values within one key are ORed (negated: none may match),
  keys and operators within one statement are ANDed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testsupport.authz.sar import wildcard_regex

ContextValue = str | bool | int | Sequence[str]


@dataclass(frozen=True)
class Request:
    """One authorization request: who, what, on which resources, with which context."""

    principal: str  # the caller's ARN, or a service principal such as events.amazonaws.com
    action: str
    resources: tuple[str, ...]
    context: Mapping[str, ContextValue] = field(default_factory=dict)
    source: str = ""  # where the request comes from (the recorded call), for messages

    def key(self) -> tuple[Any, ...]:
        ctx = tuple(
            sorted(
                (k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in self.context.items()
            )
        )
        return (self.principal, self.action, self.resources, ctx)


@dataclass(frozen=True)
class Policy:
    """A policy document with where it came from (stack, construct path)."""

    document: Mapping[str, Any]
    origin: str
    kind: str = "identity"  # identity | resource | kms | endpoint


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str
    denied_by: tuple[str, ...] = ()  # "origin Sid" of explicit denies


def statements(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = document.get("Statement", [])
    return [raw] if isinstance(raw, dict) else list(raw)


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _action_matches(statement: Mapping[str, Any], action: str) -> bool:
    if "Action" in statement:
        return any(
            wildcard_regex(a, ignore_case=True).match(action) for a in as_list(statement["Action"])
        )
    return not any(
        wildcard_regex(a, ignore_case=True).match(action) for a in as_list(statement["NotAction"])
    )


def _resource_matches(statement: Mapping[str, Any], resource: str) -> bool:
    if "Resource" in statement:
        return any(arn_like(p, resource) for p in as_list(statement["Resource"]))
    if "NotResource" in statement:
        return not any(arn_like(p, resource) for p in as_list(statement["NotResource"]))
    return True  # a resource policy may leave Resource to the resource it is attached to


def arn_like(pattern: str, arn: str) -> bool:
    """IAM's ARN matching: ``*``/``?`` wildcards, compared segment by segment for the first
    five colon-separated parts (a ``*`` there never runs into the next part)."""
    if pattern == "*":
        return True
    p_parts, a_parts = pattern.split(":", 5), arn.split(":", 5)
    if len(p_parts) != len(a_parts):
        return bool(wildcard_regex(pattern).match(arn)) and len(p_parts) < 6
    return all(wildcard_regex(p).match(a) for p, a in zip(p_parts, a_parts, strict=True))


def _principal_matches(statement: Mapping[str, Any], principal: str, account: str) -> str:
    """``direct`` when the statement names the principal, ``account`` when it names the
    principal's account (root: delegation to IAM), else ``""``."""
    if "NotPrincipal" in statement:
        raise NotImplementedError("NotPrincipal is not used by the platform")
    spec = statement.get("Principal")
    if spec is None:
        return "direct"  # identity policy
    if spec == "*":
        return "direct"
    for kind, values in spec.items():
        for value in as_list(values):
            if value == "*":
                return "direct"
            if kind == "Service" and value == principal:
                return "direct"
            if kind == "AWS":
                if value in (account, f"arn:aws:iam::{account}:root"):
                    if principal.startswith(f"arn:aws:iam::{account}:") or principal.startswith(
                        f"arn:aws:sts::{account}:"
                    ):
                        return "account"
                elif arn_like(value, principal):
                    return "direct"
    return ""


_NEGATED = (
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "NumericNotEquals",
    "DateNotEquals",
    "ArnNotEquals",
    "ArnNotLike",
    "NotIpAddress",
)


def _value_matches(base: str, policy_value: Any, value: Any) -> bool:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    pv = str(policy_value).lower() if isinstance(policy_value, bool) else str(policy_value)
    if base in ("StringEquals", "StringNotEquals"):
        return text == pv
    if base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        return text.lower() == pv.lower()
    if base in ("StringLike", "StringNotLike"):
        return bool(wildcard_regex(pv).match(text))
    if base in ("ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike"):
        return arn_like(pv, text)
    if base == "Bool":
        return text.lower() == pv.lower()
    if base.startswith("Numeric"):
        a, b = float(text), float(pv)
        op = base.removeprefix("Numeric")
        return {
            "Equals": a == b,
            "NotEquals": a == b,  # negation applied by the caller
            "LessThan": a < b,
            "LessThanEquals": a <= b,
            "GreaterThan": a > b,
            "GreaterThanEquals": a >= b,
        }[op]
    if base.startswith("Date"):
        op = base.removeprefix("Date")
        return {
            "Equals": text == pv,
            "NotEquals": text == pv,
            "LessThan": text < pv,
            "LessThanEquals": text <= pv,
            "GreaterThan": text > pv,
            "GreaterThanEquals": text >= pv,
        }[op]
    raise NotImplementedError(f"condition operator {base} is not implemented")


def condition_holds(
    operator: str, key: str, policy_values: Any, context: Mapping[str, Any]
) -> bool:
    """One operator on one key, with IAM's rules for missing keys and multi-valued keys."""
    set_op, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    present = key in context and context[key] is not None
    values = as_list(policy_values)
    if base == "Null":
        wants_absent = str(values[0]).lower() == "true"
        empty = present and isinstance(context[key], list | tuple) and not context[key]
        return (not present or empty) if wants_absent else (present and not empty)
    if not present:
        if if_exists or set_op == "ForAllValues":
            return True
        if set_op == "ForAnyValue":
            return False
        return base in _NEGATED
    negated = base in _NEGATED

    def one(value: Any) -> bool:
        hit = any(_value_matches(base, pv, value) for pv in values)
        return not hit if negated else hit

    request = context[key]
    if set_op == "ForAllValues":
        return all(one(v) for v in as_list(request))
    if set_op == "ForAnyValue":
        return any(one(v) for v in as_list(request))
    if isinstance(request, list | tuple):
        # A single-valued operator on a multi-valued key: true when any value matches.
        return any(one(v) for v in request)
    return one(request)


def conditions_hold(statement: Mapping[str, Any], context: Mapping[str, Any]) -> bool:
    for operator, keys in statement.get("Condition", {}).items():
        for key, policy_values in keys.items():
            if not condition_holds(operator, key, policy_values, context):
                return False
    return True


def _applies(
    statement: Mapping[str, Any],
    request: Request,
    resource: str,
    account: str,
    resource_policy: bool,
) -> str:
    if not _action_matches(statement, request.action):
        return ""
    if not _resource_matches(statement, resource):
        return ""
    match = (
        _principal_matches(statement, request.principal, account) if resource_policy else "direct"
    )
    if not match:
        return ""
    if not conditions_hold(statement, request.context):
        return ""
    return match


def evaluate_resource(
    request: Request,
    resource: str,
    identity: Iterable[Policy],
    resource_policies: Iterable[Policy],
    account: str,
) -> Decision:
    """The decision for one resource of a request."""
    identity = list(identity)
    resource_policies = list(resource_policies)
    denies: list[str] = []
    identity_allows = False
    resource_allows = False  # names the principal directly
    kms_policies = [p for p in resource_policies if p.kind == "kms"]
    kms_direct = kms_account = False
    endpoint_policies = [p for p in resource_policies if p.kind == "endpoint"]
    endpoint_allows = {p.origin: False for p in endpoint_policies}
    for policy in identity + resource_policies:
        as_resource = policy.kind != "identity"
        for st in statements(policy.document):
            match = _applies(
                st, request, resource, account, as_resource and policy.kind != "endpoint"
            )
            if not match:
                continue
            if st.get("Effect") == "Deny":
                denies.append(f"{policy.origin} {st.get('Sid', '(no Sid)')}")
            elif policy.kind == "identity":
                identity_allows = True
            elif policy.kind == "kms":
                kms_direct |= match == "direct"
                kms_account |= match == "account"
            elif policy.kind == "endpoint":
                endpoint_allows[policy.origin] = True
            elif match == "direct":  # (naming only the account leaves the decision to IAM)
                resource_allows = True
    if denies:
        return Decision(False, "explicit deny: " + "; ".join(denies), tuple(denies))
    blocked = [o for o, ok in endpoint_allows.items() if not ok]
    if blocked:
        return Decision(False, f"no allow in the VPC endpoint policy {blocked[0]}")
    if kms_policies:
        if kms_direct or (kms_account and identity_allows):
            return Decision(
                True, "allowed by the key policy" + (" and IAM" if not kms_direct else "")
            )
        why = "the key policy does not delegate to IAM" if identity_allows else "no allow"
        return Decision(False, f"implicit deny on the KMS key ({why})")
    if identity_allows or resource_allows:
        return Decision(
            True,
            "allowed by " + ("an identity policy" if identity_allows else "the resource policy"),
        )
    return Decision(False, "implicit deny (no statement allows it)")


def evaluate(
    request: Request,
    identity: Iterable[Policy],
    resource_policies: Mapping[str, list[Policy]] | None = None,
    *,
    account: str,
) -> Decision:
    """Allowed only if allowed on every resource of the request. ``resource_policies`` maps a
    resource ARN pattern (the resource a policy is attached to, wildcards allowed) to its
    policies; each applies to the resources it matches."""
    identity = list(identity)
    resource_policies = resource_policies or {}
    for resource in request.resources:
        attached = [
            p
            for pattern, ps in resource_policies.items()
            if arn_like(pattern, resource)
            for p in ps
        ]
        decision = evaluate_resource(request, resource, identity, attached, account)
        if not decision.allowed:
            return Decision(False, f"{resource}: {decision.reason}", decision.denied_by)
    return Decision(True, "allowed")
