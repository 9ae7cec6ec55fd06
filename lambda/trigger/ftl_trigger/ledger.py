"""The job ledger in DynamoDB: one item per job, one per client token.

Items:
* ``pk = "job#<name>"``: the job, who asked, the request, the rendered request and its hash,
  status; ``gsi_pk = "job"`` and ``gsi_sk = "<created_at>#<name>"`` list jobs newest first.
* ``pk = "token#<client_token>"``: which job a token started and the request's fingerprint.

The job and its token are written in one transaction with ``attribute_not_exists`` conditions,
so of any number of concurrent duplicates exactly one claims the token.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from jobmodel import ValidationError

JOB_INDEX = "by-created"
JOB = "job#"
TOKEN = "token#"


class TokenTaken(Exception):
    """Another request already claimed this client token."""


class NameTaken(Exception):
    """The generated job name is already in the ledger."""


def _enc(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value)}
    if isinstance(value, str):
        return {"S": value}
    raise TypeError(f"cannot store {type(value).__name__}")


def _dec(attr: Mapping[str, Any]) -> Any:
    if "S" in attr:
        return attr["S"]
    if "BOOL" in attr:
        return attr["BOOL"]
    if "N" in attr:
        number = attr["N"]
        return float(number) if any(c in number for c in ".eE") else int(number)
    if "NULL" in attr:
        return None
    raise TypeError(f"unexpected attribute {attr!r}")


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _enc(v) for k, v in values.items() if v is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _dec(v) for k, v in item.items()}


class Ledger:
    def __init__(self, client: Any, table: str) -> None:
        self.client = client
        self.table = table

    def get_job(self, name: str) -> dict[str, Any] | None:
        return self._get(JOB + name)

    def get_token(self, token: str) -> dict[str, Any] | None:
        return self._get(TOKEN + token)

    def _get(self, pk: str) -> dict[str, Any] | None:
        item = self.client.get_item(
            TableName=self.table, Key={"pk": {"S": pk}}, ConsistentRead=True
        ).get("Item")
        return from_item(item) if item else None

    def claim(self, job: Mapping[str, Any], token: Mapping[str, Any] | None) -> None:
        """Write the job (and its token) only if neither exists yet."""
        job_put = {
            "Put": {
                "TableName": self.table,
                "Item": to_item(
                    {
                        "pk": JOB + job["job_name"],
                        "gsi_pk": "job",
                        "gsi_sk": f"{job['created_at']}#{job['job_name']}",
                        **job,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        if token is None:
            try:
                self.client.put_item(**job_put["Put"])
            except ClientError as err:
                if _code(err) == "ConditionalCheckFailedException":
                    raise NameTaken(job["job_name"]) from None
                raise
            return
        token_put = {
            "Put": {
                "TableName": self.table,
                "Item": to_item({"pk": TOKEN + token["client_token"], **token}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        try:
            self.client.transact_write_items(TransactItems=[token_put, job_put])
        except ClientError as err:
            if _code(err) != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            if reasons and reasons[0] == "ConditionalCheckFailed":
                raise TokenTaken(token["client_token"]) from None
            if len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
                raise NameTaken(job["job_name"]) from None
            raise

    def update_job(
        self, name: str, values: Mapping[str, Any], *, expect_status: str | None = None
    ) -> bool:
        """Set attributes on an existing job; False if the expected status no longer holds."""
        names = {f"#a{i}": k for i, k in enumerate(values)}
        vals = {f":v{i}": _enc(v) for i, v in enumerate(values.values())}
        sets = ", ".join(f"#a{i} = :v{i}" for i in range(len(values)))
        condition = "attribute_exists(pk)"
        if expect_status is not None:
            names["#status"] = "status"
            vals[":expected"] = {"S": expect_status}
            condition += " AND #status = :expected"
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": {"S": JOB + name}},
                UpdateExpression=f"SET {sets}",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=vals,
            )
        except ClientError as err:
            if _code(err) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def fail_job(self, name: str, values: Mapping[str, Any], token: str | None) -> None:
        """Record a failed start and free the token so the same request can be retried."""
        names = {f"#a{i}": k for i, k in enumerate(values)}
        vals = {f":v{i}": _enc(v) for i, v in enumerate(values.values())}
        update = {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": {"S": JOB + name}},
                "UpdateExpression": "SET "
                + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": vals,
            }
        }
        items = [update]
        if token is not None:
            items.append(
                {
                    "Delete": {
                        "TableName": self.table,
                        "Key": {"pk": {"S": TOKEN + token}},
                        "ConditionExpression": "job_name = :job",
                        "ExpressionAttributeValues": {":job": {"S": name}},
                    }
                }
            )
        self.client.transact_write_items(TransactItems=items)

    def list_jobs(
        self, *, template: str | None, status: str | None, limit: int, next_token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": JOB_INDEX,
            "KeyConditionExpression": "gsi_pk = :job",
            "ExpressionAttributeValues": {":job": {"S": "job"}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        filters, names = [], {}
        if template is not None:
            filters.append("#t = :template")
            names["#t"] = "template"
            kwargs["ExpressionAttributeValues"][":template"] = {"S": template}
        if status is not None:
            filters.append("#s = :status")
            names["#s"] = "status"
            kwargs["ExpressionAttributeValues"][":status"] = {"S": status}
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
            kwargs["ExpressionAttributeNames"] = names
        if next_token:
            kwargs["ExclusiveStartKey"] = decode_token(next_token)
        page = self.client.query(**kwargs)
        items = [from_item(i) for i in page.get("Items", [])]
        last = page.get("LastEvaluatedKey")
        return items, encode_token(last) if last else None


def encode_token(key: Mapping[str, Any]) -> str:
    plain = {k: v["S"] for k, v in key.items()}
    return base64.urlsafe_b64encode(json.dumps(plain, sort_keys=True).encode()).decode()


def decode_token(token: str) -> dict[str, Any]:
    try:
        plain = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        if not (
            isinstance(plain, dict)
            and set(plain) == {"pk", "gsi_pk", "gsi_sk"}
            and all(isinstance(v, str) for v in plain.values())
            and plain["gsi_pk"] == "job"
            and plain["pk"].startswith(JOB)
        ):
            raise ValueError
    except (ValueError, UnicodeError, TypeError):
        raise ValidationError(
            "next_token", "next_token is not one this launcher returned"
        ) from None
    return {k: {"S": v} for k, v in plain.items()}


def _code(err: ClientError) -> str:
    return err.response.get("Error", {}).get("Code", "")
