"""Signed list page tokens (docs/API.md, list).

A ``next_token`` is ``<payload>.<signature>``: the payload (base64url JSON) holds the index
and DynamoDB's ``LastEvaluatedKey``; the signature is HMAC-SHA256 over the caller's scope
(``team:<name>``, ``admin`` or ``all``) and the payload. So a token cannot be forged, edited,
or used by another team: any of those is a ``ValidationError`` on ``next_token``.

The key is a ledger item (``pk = "secret#paging"``, 32 random bytes) written once by the
first container that needs it, with a conditional put, and cached per container. Anyone who
can read the ledger table can read it; that is the platform team, who can read every job.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from typing import Any

from jobmodel import ValidationError

KEY_PK = "secret#paging"
_BAD = "next_token is not one this launcher returned to this caller"


class Signer:
    def __init__(self, load_key: Callable[[str], bytes]) -> None:
        self._load_key = load_key
        self._key: bytes | None = None

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = self._load_key(secrets.token_hex(32))
        return self._key

    def _mac(self, scope: str, payload: str) -> str:
        digest = hmac.new(self.key, f"{scope}\n{payload}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def sign(self, scope: str, index: str, last_key: dict[str, Any]) -> str:
        plain = {"i": index, "k": {k: v["S"] for k, v in sorted(last_key.items())}}
        payload = base64.urlsafe_b64encode(
            json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()
        ).decode()
        return f"{payload}.{self._mac(scope, payload)}"

    def verify(self, scope: str, token: str) -> tuple[str, dict[str, Any]]:
        """``(index, ExclusiveStartKey)`` of a token signed for ``scope``."""
        payload, dot, mac = token.partition(".")
        # As bytes: compare_digest refuses str with non-ASCII characters (a TypeError).
        expected = self._mac(scope, payload).encode()
        if not dot or not hmac.compare_digest(mac.encode("utf-8", "replace"), expected):
            raise ValidationError("next_token", _BAD)
        try:
            plain = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
            index, key = plain["i"], plain["k"]
            if not isinstance(index, str) or not isinstance(key, dict):
                raise ValueError
        except (ValueError, KeyError, TypeError, UnicodeError):
            raise ValidationError("next_token", _BAD) from None
        return index, {k: {"S": str(v)} for k, v in key.items()}
