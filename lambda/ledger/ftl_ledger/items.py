"""DynamoDB items: the one codec between Python values and attribute values, and the one
update-expression builder. The ledger (``ledger.py``) uses them, and the job-events function
uses the ledger, so both Lambdas write items the same way.

Why not boto3's ``TypeSerializer``: importing ``boto3.dynamodb.types`` imports boto3 and
s3transfer (about 20-30 ms), which the trigger's cold start avoids (it builds botocore clients
directly, ``aws.py``); and that serializer wants ``Decimal`` for every number, so callers
would convert anyway.

Values: ``str`` (S), ``bool`` (BOOL), ``int``/``float`` (N; finite only), ``None`` (NULL),
mappings with string keys (M) and lists or tuples (L). Numbers decode to ``int`` when they
have no fraction or exponent, else ``float``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["decode", "encode", "from_item", "to_item", "update_request"]


def encode(value: Any) -> dict[str, Any]:
    """One Python value as a DynamoDB attribute value (``TypeError``/``ValueError`` if not)."""
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot store the number {value!r}")
        return {"N": repr(value)}
    if isinstance(value, str):
        return {"S": value}
    if value is None:
        return {"NULL": True}
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("map keys must be strings")
        return {"M": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [encode(v) for v in value]}
    raise TypeError(f"cannot store {type(value).__name__}")


def decode(attr: Mapping[str, Any]) -> Any:
    """One DynamoDB attribute value as a Python value."""
    if "S" in attr:
        return attr["S"]
    if "BOOL" in attr:
        return attr["BOOL"]
    if "N" in attr:
        number = attr["N"]
        return float(number) if any(c in number for c in ".eE") else int(number)
    if "NULL" in attr:
        return None
    if "M" in attr:
        return {k: decode(v) for k, v in attr["M"].items()}
    if "L" in attr:
        return [decode(v) for v in attr["L"]]
    raise TypeError(f"unexpected attribute {attr!r}")


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """An item from a mapping; ``None`` values are left out (not stored as NULL)."""
    return {k: encode(v) for k, v in values.items() if v is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: decode(v) for k, v in item.items()}


def update_request(
    table: str,
    pk: str,
    values: Mapping[str, Any],
    *,
    add: Mapping[str, int | float] | None = None,
    condition: str | None = None,
    names: Mapping[str, str] | None = None,
    condition_values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``UpdateItem`` parameters (also a transaction's ``Update``) for the item ``pk``.

    ``values``: attributes to set; a ``None`` value removes the attribute. ``add``: numbers
    added to attributes (``ADD``). ``condition`` may use ``names`` (``#x`` -> attribute) and
    ``condition_values`` (``:x`` -> Python value, encoded here).
    """
    attr_names = dict(names or {})
    attr_values = {k: encode(v) for k, v in (condition_values or {}).items()}
    sets, removes, adds = [], [], []
    for i, (key, value) in enumerate(values.items()):
        attr_names[f"#a{i}"] = key
        if value is None:
            removes.append(f"#a{i}")
        else:
            attr_values[f":v{i}"] = encode(value)
            sets.append(f"#a{i} = :v{i}")
    for i, (key, amount) in enumerate((add or {}).items()):
        attr_names[f"#n{i}"] = key
        attr_values[f":n{i}"] = encode(amount)
        adds.append(f"#n{i} :n{i}")
    clauses = [
        f"{verb} {', '.join(parts)}"
        for verb, parts in (("SET", sets), ("REMOVE", removes), ("ADD", adds))
        if parts
    ]
    if not clauses:
        raise ValueError("an update needs at least one attribute to change")
    request: dict[str, Any] = {
        "TableName": table,
        "Key": {"pk": {"S": pk}},
        "UpdateExpression": " ".join(clauses),
        "ExpressionAttributeNames": attr_names,
    }
    if attr_values:
        request["ExpressionAttributeValues"] = attr_values
    if condition:
        request["ConditionExpression"] = condition
    return request
