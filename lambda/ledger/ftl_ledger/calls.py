"""How the ledger's DynamoDB calls fail: its own exceptions for conditions that did not hold,
and the contract's errors (``jobmodel.contract.errors.aws_error``) for everything else."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from jobmodel.contract.errors import THROTTLE_CODES, JobModelError, UpstreamError, aws_error

__all__ = ["LimitRace", "MonthTurned", "NameTaken", "Refused", "TokenTaken", "dynamodb_call"]

_CONDITION_CODES = frozenset({"ConditionalCheckFailed", "TransactionConflict"})


class TokenTaken(Exception):
    """Another request already claimed this client token."""


class NameTaken(Exception):
    """The generated job name is already in the ledger."""


class MonthTurned(Exception):
    """A usage update expected a month the usage item has already left."""


class LimitRace(Exception):
    """The team's usage no longer allowed this job when the claim was written."""


class Refused(Exception):
    """A write's condition did not hold (or, in a transaction, lost to a concurrent one)."""

    def __init__(self, operation: str, err: ClientError, reasons: list[str | None]) -> None:
        super().__init__(operation)
        self.operation = operation
        self.err = err
        self.reasons = reasons

    def failed(self, index: int) -> bool:
        """Whether item ``index`` of the transaction failed its condition."""
        return len(self.reasons) > index and self.reasons[index] == "ConditionalCheckFailed"

    def as_error(self) -> JobModelError:
        error = self.err.response.get("Error", {})
        return aws_error(
            f"DynamoDB {self.operation}",
            error.get("Code", ""),
            error.get("Message", ""),
            cancellation_codes=self.reasons,
        )


@contextmanager
def dynamodb_call(operation: str) -> Iterator[None]:
    """Around one DynamoDB call: ``Refused`` when a condition did not hold, else the
    contract's error for any failure."""
    try:
        yield
    except ClientError as err:
        error = err.response.get("Error", {})
        code = error.get("Code", "")
        reasons = [r.get("Code") for r in err.response.get("CancellationReasons") or []]
        given = {r for r in reasons if r}
        if code == "ConditionalCheckFailedException" or (
            code == "TransactionCanceledException"
            and not THROTTLE_CODES & given
            and _CONDITION_CODES & given
        ):
            raise Refused(operation, err, reasons) from None
        raise aws_error(
            f"DynamoDB {operation}", code, error.get("Message", ""), cancellation_codes=reasons
        ) from None
    except BotoCoreError as err:
        raise UpstreamError(f"DynamoDB {operation} failed: {type(err).__name__}: {err}") from None
