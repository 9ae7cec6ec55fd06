"""The job ledger in DynamoDB: one item per job, one per client token, one per team's usage.

Items:
* ``pk = "job#<name>"``: the job, who asked, its team, the request, the rendered request and
  its hash, status, price and estimate; ``gsi_pk = "job"`` and ``gsi_sk =
  "<created_at>#<name>"`` list all jobs newest first (index ``by-created``); ``team`` with the
  same ``gsi_sk`` lists one team's jobs (index ``by-team``, teams deployments only); ``care``
  with the same ``gsi_sk``, only while the job is claimed or owes end effects, lists the jobs
  the sweep looks after (index ``needs-care``, ``jobmodel.jobs.claims``).
  ``revision`` counts the writes to a job after its claim: every write adds one, so a writer
  that read the item writes only if nothing changed since (:meth:`Ledger.write_job`, made
  by the one writer, ``ftl_ledger.writer``).
* ``pk = "token#<client_token>"`` (single-team) or ``"token#<team>#<client_token>"``: which
  job a token started and the request's fingerprint. Tokens are scoped per team.
* ``pk = "usage#<team>"``: the team's usage (``jobmodel.money.limits``).
* ``pk = "secret#paging"``: the key that signs list tokens (``ftl_trigger.paging``).
* ``pk = "prices#<region>"``: the region's training prices from the AWS Price List API, with
  ``refreshed_at`` and ``source`` (``jobmodel.money.price_list``; :meth:`Ledger.put_prices`).

The job, its token and its usage are written in one transaction with conditions, so of any
number of concurrent duplicates exactly one claims the token, and concurrent submits never
take a team past its limits.

Failures: a condition that does not hold is this module's own exception or a ``False``
return, as each method says; any other DynamoDB failure is the contract's error
(``Throttled`` or ``UpstreamError``, ``jobmodel.contract.errors.aws_error``), naming the operation.
The trigger, the job-events and the price-refresh functions ship this package
(``ftl_constructs/launcher.py``, ``job_events.py``, ``price_refresh.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ftl_ledger.calls import (
    LimitRace,
    MonthTurned,
    NameTaken,
    Refused,
    TokenTaken,
    dynamodb_call,
)
from ftl_ledger.items import from_item, to_item, update_request
from ftl_ledger.job_codec import from_record
from jobmodel.contract.names import CARE_INDEX, JOB_INDEX, TEAM_INDEX
from jobmodel.jobs.claims import CARE, CARE_VALUE
from jobmodel.jobs.record import REVISION

__all__ = [
    "JOB",
    "REVISION",
    "TOKEN",
    "Ledger",
    "LimitRace",
    "MonthTurned",
    "NameTaken",
    "TokenTaken",
    "from_item",
    "to_item",
    "token_pk",
]

JOB = "job#"
TOKEN = "token#"
_BUMP = {REVISION: 1}


def token_pk(token: str, team: str | None) -> str:
    return TOKEN + (token if team is None else f"{team}#{token}")


class Ledger:
    def __init__(self, client: Any, table: str) -> None:
        self.client = client
        self.table = table

    # ----------------------------------------------------------------- reads
    def get_job(self, name: str) -> dict[str, Any] | None:
        return self._get(JOB + name)

    def get_token(self, token: str, team: str | None = None) -> dict[str, Any] | None:
        return self._get(token_pk(token, team))

    def get_usage(self, team: str) -> dict[str, Any] | None:
        return self._get("usage#" + team)

    def get_item(self, pk: str) -> dict[str, Any] | None:
        """Any ledger item by key (the Price List prices: ``jobmodel.money.price_list``)."""
        return self._get(pk)

    def get_jobs(self, names: list[str], attributes: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """``attributes`` of the jobs ``names`` (job name -> attributes; a job not in the
        ledger is left out): BatchGetItem, 100 keys a call, eventually consistent (a queue
        estimate's facts, not a decision's). Keys DynamoDB leaves unprocessed are asked again
        up to twice, then left out."""
        wanted = list(dict.fromkeys(names))
        found: dict[str, dict[str, Any]] = {}
        projection: dict[str, Any] = {
            "ProjectionExpression": ", ".join(f"#a{i}" for i in range(len(attributes))),
            "ExpressionAttributeNames": {f"#a{i}": a for i, a in enumerate(attributes)},
        }
        for first in range(0, len(wanted), 100):
            keys: list[dict[str, Any]] = [
                {"pk": {"S": JOB + n}} for n in wanted[first : first + 100]
            ]
            for _ in range(3):
                request = {self.table: {"Keys": keys, **projection}}
                with dynamodb_call("BatchGetItem"):
                    out = self.client.batch_get_item(RequestItems=request)
                for item in out.get("Responses", {}).get(self.table, []):
                    job = from_item(item)
                    found[str(from_record(job).job_name)] = job
                keys = out.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys") or []
                if not keys:
                    break
        return found

    def _get(self, pk: str) -> dict[str, Any] | None:
        with dynamodb_call("GetItem"):
            item = self.client.get_item(
                TableName=self.table, Key={"pk": {"S": pk}}, ConsistentRead=True
            ).get("Item")
        return from_item(item) if item else None

    # ----------------------------------------------------------------- prices
    def put_prices(self, pk: str, prices: str, *, source: str, refreshed_at: str) -> None:
        """Replace the Price List prices item ``pk`` (``prices#<region>``) whole."""
        item = {
            "pk": {"S": pk},
            "prices": {"S": prices},
            "source": {"S": source},
            "refreshed_at": {"S": refreshed_at},
        }
        with dynamodb_call("PutItem"):
            self.client.put_item(TableName=self.table, Item=item)

    # ----------------------------------------------------- conditional writes
    def put_if_absent(self, put: Mapping[str, Any]) -> bool:
        try:
            with dynamodb_call("PutItem"):
                self.client.put_item(**put)
        except Refused:
            return False
        return True

    def update_if(self, update: Mapping[str, Any]) -> bool:
        try:
            with dynamodb_call("UpdateItem"):
                self.client.update_item(**update)
        except Refused:
            return False
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
        return bytes.fromhex((self._get("secret#paging") or {})["key"])

    # ----------------------------------------------------------------- claim
    def claim(
        self,
        job: Mapping[str, Any],
        token: Mapping[str, Any] | None,
        usage: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the job (and its token) only if neither exists yet, and add the job to its
        team's usage (``usage``: a ``jobmodel.money.limits.claim_update``) only if the limits
        hold."""
        typed = from_record(job)
        name = str(typed.job_name)
        values = {"pk": JOB + name, "gsi_pk": "job", "gsi_sk": f"{typed.created_at}#{name}"}
        job_put = {
            "TableName": self.table,
            "Item": to_item({**values, **job}),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        if token is None and usage is None:
            try:
                with dynamodb_call("PutItem"):
                    self.client.put_item(**job_put)
            except Refused:
                raise NameTaken(name) from None
            return
        items: list[dict[str, Any]] = []
        kinds: list[type[Exception]] = []
        if token is not None:
            pk = token_pk(token["client_token"], typed.team)
            item = to_item({"pk": pk, **token})
            condition = "attribute_not_exists(pk)"
            items.append(
                {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": condition}}
            )
            kinds.append(TokenTaken)
        items.append({"Put": job_put})
        kinds.append(NameTaken)
        if usage is not None:
            items.append({"Update": dict(usage)})
            kinds.append(LimitRace)
        try:
            self._transact(items)
        except Refused as refused:
            for index, kind in enumerate(kinds):
                if refused.failed(index):
                    raise kind(name) from None
            raise refused.as_error() from None

    # ------------------------------------------------------------- job writes
    def write_job(
        self,
        name: str,
        changes: Mapping[str, Any],
        *,
        expect: Mapping[str, Any],
        usage: Mapping[str, Any] | None = None,
        free_token: str | None = None,
    ) -> bool:
        """Apply ``changes`` to job ``name`` (``None`` removes the attribute) only if every
        ``expect``ed attribute still has that value (``None``: absent), adding one to its
        ``revision``; in the same transaction, ``usage`` (a usage-item update, e.g.
        ``jobmodel.money.limits.release_update``) and the deletion of the token item ``free_token``
        (a ``token_pk``; only while it is still this job's).

        The one write of an existing job: ``ftl_ledger.writer.JobWriter`` makes it. False
        when the job changed meanwhile (read it and decide again); ``MonthTurned`` when only
        the usage item's month condition failed.
        """
        names, values, conditions = {}, {}, ["attribute_exists(pk)"]
        for i, (key, value) in enumerate(expect.items()):
            names[f"#e{i}"] = key
            if value is None:
                conditions.append(f"attribute_not_exists(#e{i})")
            else:
                values[f":e{i}"] = value
                conditions.append(f"#e{i} = :e{i}")
        update = update_request(
            self.table,
            JOB + name,
            changes,
            add=_BUMP,
            condition=" AND ".join(conditions),
            names=names,
            condition_values=values,
        )
        items: list[dict[str, Any]] = [{"Update": update}]
        if usage is not None:
            items.append({"Update": dict(usage)})
        if free_token is not None:
            delete = {
                "TableName": self.table,
                "Key": {"pk": {"S": free_token}},
                "ConditionExpression": "attribute_not_exists(pk) OR job_name = :job",
                "ExpressionAttributeValues": {":job": {"S": name}},
            }
            items.append({"Delete": delete})
        try:
            if len(items) == 1:
                with dynamodb_call("UpdateItem"):
                    self.client.update_item(**update)
            else:
                self._transact(items)
        except Refused as refused:
            if usage is not None and refused.failed(1) and not refused.failed(0):
                raise MonthTurned(name) from None
            return False
        return True

    # ------------------------------------------------------------------ list
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
        with dynamodb_call("Query"):
            page = self.client.query(**kwargs)
        items = [from_item(i) for i in page.get("Items", [])]
        return items, page.get("LastEvaluatedKey")

    def care_page(
        self, limit: int, start: dict[str, Any] | None
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One page of the jobs that need care (``jobmodel.jobs.claims.needs_care``), oldest first,
        and DynamoDB's ``LastEvaluatedKey``."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": CARE_INDEX,
            "KeyConditionExpression": "#care = :care",
            "ExpressionAttributeNames": {"#care": CARE},
            "ExpressionAttributeValues": {":care": {"S": CARE_VALUE}},
            "ScanIndexForward": True,
            "Limit": limit,
        }
        if start:
            kwargs["ExclusiveStartKey"] = start
        with dynamodb_call("Query"):
            page = self.client.query(**kwargs)
        return [from_item(i) for i in page.get("Items", [])], page.get("LastEvaluatedKey")

    def _transact(self, items: list[dict[str, Any]]) -> None:
        with dynamodb_call("TransactWriteItems"):
            self.client.transact_write_items(TransactItems=items)
