"""The job ledger in DynamoDB: one item per job, one per client token, one per team's usage.

Items:
* ``pk = "job#<name>"``: the job, who asked, its team, the request, the rendered request and
  its hash, status, price and estimate; ``gsi_pk = "job"`` and ``gsi_sk =
  "<created_at>#<name>"`` list all jobs newest first (index ``by-created``); ``team`` with the
  same ``gsi_sk`` lists one team's jobs (index ``by-team``, teams deployments only).
* ``pk = "token#<client_token>"`` (single-team) or ``"token#<team>#<client_token>"``: which
  job a token started and the request's fingerprint. Tokens are scoped per team.
* ``pk = "usage#<team>"``: the team's usage (``jobmodel.quotas``).
* ``pk = "secret#paging"``: the key that signs list tokens (``ftl_trigger.paging``).

The job, its token and its usage are written in one transaction with conditions, so of any
number of concurrent duplicates exactly one claims the token, and concurrent submits never
take a team past its limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from jobmodel.names import JOB_INDEX, TEAM_INDEX

JOB = "job#"
TOKEN = "token#"


def token_pk(token: str, team: str | None) -> str:
    return TOKEN + (token if team is None else f"{team}#{token}")


class TokenTaken(Exception):
    """Another request already claimed this client token."""


class NameTaken(Exception):
    """The generated job name is already in the ledger."""


class MonthTurned(Exception):
    """A usage update expected a month the usage item has already left."""


class LimitRace(Exception):
    """The team's usage no longer allowed this job when the claim was written."""


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

    def get_token(self, token: str, team: str | None = None) -> dict[str, Any] | None:
        return self._get(token_pk(token, team))

    def get_usage(self, team: str) -> dict[str, Any] | None:
        return self._get("usage#" + team)

    def put_if_absent(self, put: Mapping[str, Any]) -> bool:
        try:
            self.client.put_item(**put)
        except ClientError as err:
            if _code(err) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def update_if(self, update: Mapping[str, Any]) -> bool:
        try:
            self.client.update_item(**update)
        except ClientError as err:
            if _code(err) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def paging_key(self, fresh: str) -> bytes:
        """The list-token signing key: ``fresh`` if this call created it, else the stored one."""
        put = {
            "TableName": self.table,
            "Item": {"pk": {"S": "secret#paging"}, "key": {"S": fresh}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        if self.put_if_absent(put):
            return bytes.fromhex(fresh)
        return bytes.fromhex(self._get("secret#paging")["key"])

    def _get(self, pk: str) -> dict[str, Any] | None:
        item = self.client.get_item(
            TableName=self.table, Key={"pk": {"S": pk}}, ConsistentRead=True
        ).get("Item")
        return from_item(item) if item else None

    def claim(
        self,
        job: Mapping[str, Any],
        token: Mapping[str, Any] | None,
        usage: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the job (and its token) only if neither exists yet, and add the job to its
        team's usage (``usage``: a ``jobmodel.quotas.claim_update``) only if the limits hold."""
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
        if token is None and usage is None:
            try:
                self.client.put_item(**job_put["Put"])
            except ClientError as err:
                if _code(err) == "ConditionalCheckFailedException":
                    raise NameTaken(job["job_name"]) from None
                raise
            return
        items: list[dict[str, Any]] = []
        kinds: list[type[Exception]] = []
        if token is not None:
            pk = token_pk(token["client_token"], job.get("team"))
            items.append(
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": to_item({"pk": pk, **token}),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
            kinds.append(TokenTaken)
        items.append(job_put)
        kinds.append(NameTaken)
        if usage is not None:
            items.append({"Update": dict(usage)})
            kinds.append(LimitRace)
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as err:
            if _code(err) != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            for kind, reason in zip(kinds, reasons, strict=False):
                if reason == "ConditionalCheckFailed":
                    raise kind(job["job_name"]) from None
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

    def fail_job(
        self,
        name: str,
        values: Mapping[str, Any],
        token: str | None,
        *,
        team: str | None = None,
        release: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a failed start, free the token so the same request can be retried, and give
        the job's usage back (``release``: a ``jobmodel.quotas.release_update``)."""
        if release is not None:
            values = {**values, "usage_released": True}
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
                        "Key": {"pk": {"S": token_pk(token, team)}},
                        "ConditionExpression": "job_name = :job",
                        "ExpressionAttributeValues": {":job": {"S": name}},
                    }
                }
            )
        if release is not None:
            items.append({"Update": dict(release)})
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as err:
            reasons = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            if release is not None and reasons and reasons[-1] == "ConditionalCheckFailed":
                raise MonthTurned(name) from None
            raise

    def finish_job(self, name: str, values: Mapping[str, Any], release: Mapping[str, Any]) -> bool:
        """Record a job's end and give its usage back, once; False if already given back."""
        values = {**values, "usage_released": True}
        names = {f"#a{i}": k for i, k in enumerate(values)}
        vals = {f":v{i}": _enc(v) for i, v in enumerate(values.values())}
        update = {
            "TableName": self.table,
            "Key": {"pk": {"S": JOB + name}},
            "UpdateExpression": "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values))),
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#released)",
            "ExpressionAttributeNames": {**names, "#released": "usage_released"},
            "ExpressionAttributeValues": vals,
        }
        try:
            self.client.transact_write_items(
                TransactItems=[{"Update": update}, {"Update": dict(release)}]
            )
        except ClientError as err:
            if _code(err) != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            if reasons and reasons[0] == "ConditionalCheckFailed":
                return False
            if len(reasons) > 1 and reasons[1] == "ConditionalCheckFailed":
                raise MonthTurned(name) from None
            raise
        return True

    def write_job(
        self,
        name: str,
        changes: Mapping[str, Any],
        *,
        expect: Mapping[str, Any],
        release: Mapping[str, Any] | None = None,
    ) -> bool:
        """Apply ``changes`` to job ``name`` (``None`` removes the attribute) only if every
        ``expect``ed attribute still has that value (``None``: absent); with ``release`` (a
        ``jobmodel.quotas.release_update``) also give the job's usage back, once. False when
        the job changed meanwhile or its usage was already given back (read it and decide
        again); ``MonthTurned`` when the usage item has left the month."""
        sets = {k: v for k, v in changes.items() if v is not None}
        if release is not None:
            sets["usage_released"] = True
        removes = [k for k, v in changes.items() if v is None]
        alias = {k: f"#n{i}" for i, k in enumerate({*sets, *removes, *expect})}
        values = {f":s{i}": _enc(v) for i, v in enumerate(sets.values())}
        clauses = ["SET " + ", ".join(f"{alias[k]} = :s{i}" for i, k in enumerate(sets))]
        if removes:
            clauses.append("REMOVE " + ", ".join(alias[k] for k in removes))
        conditions = ["attribute_exists(pk)"]
        for i, (key, value) in enumerate(expect.items()):
            if value is None:
                conditions.append(f"attribute_not_exists({alias[key]})")
            else:
                values[f":e{i}"] = _enc(value)
                conditions.append(f"{alias[key]} = :e{i}")
        if release is not None:
            conditions.append(f"attribute_not_exists({alias['usage_released']})")
        update = {
            "TableName": self.table,
            "Key": {"pk": {"S": JOB + name}},
            "UpdateExpression": " ".join(clauses),
            "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": {v: k for k, v in alias.items()},
            "ExpressionAttributeValues": values,
        }
        try:
            if release is None:
                self.client.update_item(**update)
            else:
                items = [{"Update": update}, {"Update": dict(release)}]
                self.client.transact_write_items(TransactItems=items)
        except ClientError as err:
            reasons = [r.get("Code") for r in err.response.get("CancellationReasons", [])]
            if _code(err) == "ConditionalCheckFailedException" or reasons[:1] == [
                "ConditionalCheckFailed"
            ]:
                return False
            if reasons[1:2] == ["ConditionalCheckFailed"]:
                raise MonthTurned(name) from None
            raise
        return True

    def list_jobs(
        self,
        *,
        template: str | None,
        status: str | None,
        limit: int,
        start: dict[str, Any] | None,
        team: str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One page newest first: every job, or one team's (``team``); returns the page and
        DynamoDB's ``LastEvaluatedKey``."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": JOB_INDEX,
            "KeyConditionExpression": "gsi_pk = :job",
            "ExpressionAttributeValues": {":job": {"S": "job"}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if team is not None:
            kwargs["IndexName"] = TEAM_INDEX
            kwargs["KeyConditionExpression"] = "#team = :job"
            kwargs["ExpressionAttributeValues"] = {":job": {"S": team}}
        filters, names = [], {}
        if template is not None:
            filters.append("#t = :template")
            names["#t"] = "template"
            kwargs["ExpressionAttributeValues"][":template"] = {"S": template}
        if status is not None:
            filters.append("#s = :status")
            names["#s"] = "status"
            kwargs["ExpressionAttributeValues"][":status"] = {"S": status}
        if team is not None:
            names["#team"] = "team"
        if filters:
            kwargs["FilterExpression"] = " AND ".join(filters)
        if names:
            kwargs["ExpressionAttributeNames"] = names
        if start:
            kwargs["ExclusiveStartKey"] = start
        page = self.client.query(**kwargs)
        items = [from_item(i) for i in page.get("Items", [])]
        return items, page.get("LastEvaluatedKey")


def _code(err: ClientError) -> str:
    return err.response.get("Error", {}).get("Code", "")
