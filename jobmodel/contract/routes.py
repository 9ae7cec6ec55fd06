"""The HTTP API's routes (docs/API.md, "Doors"): the one table of method, path and action.

The API construct creates a route per row (and its ``execute-api`` ARNs), the trigger's event
parser maps an HTTP event to an action with it, the sandbox's HTTP stand-in routes with it,
and the ``ftl`` client builds its requests from it. ``{name}`` in a path is a parameter taken
from that path segment; ``params`` says where the rest of the action's parameters come from:
``"body"`` (a JSON object), ``"query"`` (the query string) or ``"none"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

__all__ = ["ACTIONS", "ROUTES", "Route", "match", "route_for"]


@dataclass(frozen=True)
class Route:
    """One route: ``method path`` runs ``action``; ``params`` is ``body``, ``query`` or ``none``."""

    method: str
    path: str
    action: str
    params: str = "none"

    @property
    def key(self) -> str:
        """API Gateway's route key, ``"GET /jobs/{job_name}"``."""
        return f"{self.method} {self.path}"

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(p for p in self.path.split("/") if p)

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(s[1:-1] for s in self.segments if s.startswith("{"))

    @property
    def glob(self) -> str:
        """The path with each parameter as ``*`` (for ``execute-api`` ARNs)."""
        return "/".join("*" if p.startswith("{") else p for p in self.path.split("/"))

    def match(self, method: str, parts: Sequence[str]) -> dict[str, str] | None:
        """The path parameters when ``method`` and the path's ``parts`` match, else None."""
        if method != self.method or len(parts) != len(self.segments):
            return None
        found: dict[str, str] = {}
        for want, got in zip(self.segments, parts, strict=True):
            if want.startswith("{"):
                if not got:
                    return None
                found[want[1:-1]] = got
            elif want != got:
                return None
        return found

    def url_path(self, params: Mapping[str, Any]) -> str:
        """The request path (and query string, for a ``query`` route) for these parameters."""
        path = "/".join(
            quote(str(params[p[1:-1]]), safe="") if p.startswith("{") else p
            for p in self.path.split("/")
        )
        if self.params == "query":
            query = {k: str(v) for k, v in params.items() if v is not None}
            if query:
                path += "?" + urlencode(query, quote_via=quote)
        return path

    def body(self, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The JSON body of the request for these parameters (None when the route has none)."""
        if self.params != "body":
            return None
        return {k: v for k, v in params.items() if k not in self.path_params}


ROUTES: tuple[Route, ...] = (
    Route("POST", "/jobs", "submit", "body"),
    Route("POST", "/sweeps", "sweep", "body"),
    Route("GET", "/jobs", "list", "query"),
    Route("GET", "/jobs/{job_name}", "describe"),
    Route("POST", "/jobs/{job_name}/stop", "stop"),
    Route("GET", "/templates", "templates"),
    Route("GET", "/whoami", "whoami"),
    Route("GET", "/models", "models", "query"),
    Route("POST", "/jobs/{job_name}/review", "review", "body"),
)

# The actions, in the order the contract lists them (also the direct door's vocabulary).
ACTIONS: tuple[str, ...] = (
    "submit",
    "sweep",
    "describe",
    "stop",
    "list",
    "templates",
    "whoami",
    "models",
    "review",
)
assert sorted(ACTIONS) == sorted(r.action for r in ROUTES)


def route_for(action: str) -> Route:
    """The route that runs ``action``."""
    for route in ROUTES:
        if route.action == action:
            return route
    raise KeyError(action)


def match(method: str, parts: Sequence[str]) -> tuple[Route, dict[str, str]] | None:
    """The route for ``method`` and the path's ``parts`` and its path parameters, or None."""
    for route in ROUTES:
        found = route.match(method, parts)
        if found is not None:
            return route, found
    return None
