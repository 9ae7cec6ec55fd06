"""A request against botocore's full service model: every limit the client-side validation skips.

botocore's ``ParamValidator`` checks required members, types and ``min``; it does not check
``max``, patterns, enums or list and map sizes, and moto checks none of them. Here each shape
of the installed botocore's full model (``botocore/data``, not the Lambdas' trimmed copy) is
walked with the value: string lengths (UTF-16 code units, ``jobmodel._rules.aws_len``),
enums, patterns, numeric ranges, list and map sizes, blob sizes, unknown members.

Patterns are Java regular expressions matched against the whole value. They are compiled with
the ``regex`` module, which knows Unicode properties (``\\p{L}``); a pattern that uses Java
syntax with no faithful translation is recorded in :attr:`ModelCheck.untranslated` (and
listed by the test), never skipped silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import regex
from botocore.model import Shape
from botocore.session import get_session

from jobmodel._rules import aws_len

# The recorder names a client by its signing name; the model by its service name.
SERVICE_NAMES = {"servicequotas": "service-quotas", "execute-api": "apigatewayv2"}
# Unicode general categories: the \p{..} names Java and the regex module read alike.
_CATEGORIES = frozenset(
    "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So "
    "Z Zs Zl Zp C Cc Cf Cs Co Cn".split()
)
_PROPERTY = re.compile(r"\\[pP]\{(\^?)([A-Za-z_]+)\}")


@dataclass(frozen=True)
class Finding:
    where: str  # service operation path
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}: {self.detail}"


# Java's POSIX classes are ASCII only (java.util.regex.Pattern): their ranges.
_POSIX = {"Alnum": "a-zA-Z0-9", "Alpha": "a-zA-Z", "Digit": "0-9", "Upper": "A-Z", "Lower": "a-z"}


def _posix(pattern: str) -> str:
    """``\\p{Alnum}`` and its kind written as their ASCII ranges (inside a class or not)."""
    out, depth, i = [], 0, 0
    while i < len(pattern):
        ch = pattern[i]
        match = _PROPERTY.match(pattern, i) if ch == "\\" else None
        if match and match.group(2) in _POSIX and not match.group(1) and ch == "\\":
            ranges = _POSIX[match.group(2)]
            out.append(ranges if depth else f"[{ranges}]")
            i = match.end()
            continue
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        depth += 1 if ch == "[" else -1 if ch == "]" and depth else 0
        out.append(ch)
        i += 1
    return "".join(out)


def translate(pattern: str) -> str | None:
    """The ``regex``-module form of a Java pattern, or None when no faithful one is known."""
    if "&&" in pattern:  # Java character-class intersection
        return None
    pattern = _posix(pattern)
    for match in _PROPERTY.finditer(pattern):
        if match.group(2) not in _CATEGORIES:  # other Java classes (scripts, java*)
            return None
    return pattern.replace("\\z", "\\Z")


@cache
def _compiled(pattern: str) -> Any:
    text = translate(pattern)
    if text is None:
        return None
    try:
        return regex.compile(text)
    except regex.error:
        return None


@cache
def service_model(service: str) -> Any:
    return get_session().get_service_model(SERVICE_NAMES.get(service, service))


@dataclass
class ModelCheck:
    """Checks requests; ``untranslated`` maps each pattern met that has no translation to
    where it was met; ``checked`` counts requests, ``patterns`` the patterns matched."""

    untranslated: dict[str, str] = field(default_factory=dict)
    checked: int = 0
    patterns: set[str] = field(default_factory=set)

    def check(self, service: str, operation: str, params: Mapping[str, Any]) -> list[Finding]:
        self.checked += 1
        shape = service_model(service).operation_model(operation).input_shape
        out: list[Finding] = []
        if shape is not None:
            self._walk(shape, params, f"{service} {operation}", out)
        return out

    def _walk(self, shape: Shape, value: Any, where: str, out: list[Finding]) -> None:
        meta = shape.metadata
        kind = shape.type_name
        low, high = meta.get("min"), meta.get("max")

        def bad(rule: str, detail: str) -> None:
            out.append(Finding(where, rule, detail))

        if kind == "structure":
            if not isinstance(value, Mapping):
                return
            for name in shape.required_members:
                if name not in value:
                    bad("required", f"{name} is missing")
            for name, member in value.items():
                if name not in shape.members:
                    bad("unknown member", name)
                else:
                    self._walk(shape.members[name], member, f"{where}.{name}", out)
        elif kind == "list":
            if isinstance(value, list):
                self._size(len(value), low, high, "items", bad)
                for i, item in enumerate(value):
                    self._walk(shape.member, item, f"{where}[{i}]", out)
        elif kind == "map":
            if isinstance(value, Mapping):
                self._size(len(value), low, high, "entries", bad)
                for key, item in value.items():
                    self._walk(shape.key, key, f"{where} key {str(key)[:40]!r}", out)
                    self._walk(shape.value, item, f"{where}[{str(key)[:40]!r}]", out)
        elif kind == "string":
            if isinstance(value, str):
                self._string(shape, value, where, bad)
        elif kind in ("integer", "long", "float", "double"):
            if isinstance(value, int | float) and not isinstance(value, bool):
                if low is not None and value < low:
                    bad("min", f"{value} < {low}")
                if high is not None and value > high:
                    bad("max", f"{value} > {high}")
        elif kind == "blob" and isinstance(value, bytes | str):
            size = len(value.encode() if isinstance(value, str) else value)
            self._size(size, low, high, "bytes", bad)

    def _string(self, shape: Shape, value: str, where: str, bad: Any) -> None:
        meta = shape.metadata
        self._size(aws_len(value), meta.get("min"), meta.get("max"), "UTF-16 code units", bad)
        if shape.enum and value not in shape.enum:
            bad("enum", f"{value[:60]!r} is not one of {len(shape.enum)} values")
        pattern = meta.get("pattern")
        if pattern is None:
            return
        compiled = _compiled(pattern)
        if compiled is None:
            self.untranslated.setdefault(pattern, where)
            return
        self.patterns.add(pattern)
        if compiled.fullmatch(value) is None:
            bad("pattern", f"{value[:60]!r} does not match {pattern[:80]!r}")

    @staticmethod
    def _size(size: int, low: Any, high: Any, unit: str, bad: Any) -> None:
        if low is not None and size < low:
            bad("min", f"{size} {unit} < {low}")
        if high is not None and size > high:
            bad("max", f"{size} {unit} > {high}")
