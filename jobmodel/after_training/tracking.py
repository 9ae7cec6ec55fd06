"""Experiment tracking on SageMaker managed MLflow (issue 27): which server a job logs to,
whether it is tracked, and the environment its entrypoint reads.

``ftl:mlflow`` (``TrackingConfig.parse``) names the platform's MLflow tracking server or
serverless MLflow app (one shared, one per team, or servers the stacks create: the
constructs turn ``create`` into ARNs), whether tracking is on by default and how experiments
are named. The trigger reads the same from ``FTL_MLFLOW`` (``to_env``/``from_env``).

Which jobs are tracked and what their containers get: ``jobmodel.after_training.tracking_job``.
Standard
library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..contract import names
from ..contract.errors import SettingsError

__all__ = [
    "EXPERIMENT_MODES",
    "SHARED",
    "TrackingConfig",
    "TrackingError",
    "experiment_name",
    "is_app",
    "is_uri",
]

EXPERIMENT_MODES = ("team", "team-template")
SERVER_SIZES = ("Small", "Medium", "Large")
# The MLflow resources CreateTrainingJob's MlflowConfig names (botocore: MlFlowResourceArn,
# 'arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:mlflow-[a-zA-Z-]*/.*', up to 2048), narrowed
# to the two kinds SageMaker has: a tracking server (name: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,255})
# and a serverless MLflow app (its id).
ARN_RE = re.compile(
    r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:[0-9]{12}:"
    r"mlflow-(tracking-server|app)/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}"
)
# MLflow's own limits: experiment names up to 500 characters; run names up to 250.
MAX_EXPERIMENT_NAME = 256  # MlflowConfig.MlflowExperimentName's maximum, the tighter one
# ``trackingUri``: a plain MLflow server (the sandbox's on localhost, a self-hosted one), no
# IAM; at most 512 characters, the most a SageMaker Environment value may hold.
URI_RE = re.compile(r"https?://[^\s/?#]+\S*")
MAX_URI = 512
_KEYS_ALL = (
    "trackingServerArn",
    "trackingUri",
    "teamTrackingServerArns",
    "create",
    "perTeam",
    "default",
    "experiment",
    "serverSize",
)
SHARED = ""  # the ``servers`` key of the one server every team shares


class TrackingError(SettingsError):
    """A bad ``ftl:mlflow`` value; ``key`` names the entry (``mlflow.trackingServerArn``)."""


def is_app(arn: str) -> bool:
    """A serverless MLflow app (``sagemaker:CallMlflowAppApi``) rather than a tracking server
    (``sagemaker-mlflow:*``)."""
    return ":mlflow-app/" in arn


def is_uri(server: str) -> bool:
    """A plain ``http(s)://`` MLflow server (``trackingUri``): IAM has no say on it."""
    return server.startswith(("http://", "https://"))


@dataclass(frozen=True)
class TrackingConfig:
    """The platform's MLflow servers: ``servers`` maps a team's name to its server's ARN, or
    :data:`SHARED` to the one every job uses; empty: no tracking. ``create``: the stacks
    create the servers (``per_team``: one per team). ``default``: jobs are tracked unless a
    template or the caller says no. ``experiment``: ``team`` (one experiment per team, named
    ``<platform>/<team>``) or ``team-template`` (``<platform>/<team>/<template>``)."""

    servers: Mapping[str, str] = field(default_factory=dict)
    create: bool = False
    per_team: bool = False
    default: bool = True
    experiment: str = "team"
    server_size: str = "Small"

    def __post_init__(self) -> None:
        object.__setattr__(self, "servers", MappingProxyType(dict(self.servers)))

    @property
    def enabled(self) -> bool:
        return bool(self.servers) or self.create

    def server_for(self, team: str | None) -> str | None:
        """The ARN (or, in the sandbox, an http URI) a team's jobs log to; None: untracked."""
        if SHARED in self.servers:
            return self.servers[SHARED]
        return self.servers.get(team or "")

    def with_servers(self, servers: Mapping[str, str]) -> TrackingConfig:
        """A copy naming the servers the stacks created (their ARNs)."""
        return TrackingConfig(
            servers=servers,
            create=self.create,
            per_team=self.per_team,
            default=self.default,
            experiment=self.experiment,
            server_size=self.server_size,
        )

    @classmethod
    def parse(
        cls, raw: Any, *, teams: list[str] | None = None, key: str = "mlflow"
    ) -> TrackingConfig:
        """``ftl:mlflow``: None (no tracking) or an object; ``teams`` the team names (None:
        a single-team platform). A problem raises :class:`TrackingError` naming the entry."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise TrackingError(
                key, 'an object such as {"create": true} or {"trackingServerArn": "arn:..."}', raw
            )
        unknown = sorted(set(raw) - set(_KEYS_ALL))
        if unknown:
            raise TrackingError(
                f"{key}.{unknown[0]}", f"unknown key; known: {', '.join(_KEYS_ALL)}"
            )
        for name in ("create", "perTeam", "default"):
            if name in raw and type(raw[name]) is not bool:
                raise TrackingError(f"{key}.{name}", "true or false", raw[name])
        experiment = raw.get("experiment", "team")
        if experiment not in EXPERIMENT_MODES:
            raise TrackingError(f"{key}.experiment", "'team' or 'team-template'", experiment)
        size = raw.get("serverSize", "Small")
        if size not in SERVER_SIZES:
            raise TrackingError(f"{key}.serverSize", "'Small', 'Medium' or 'Large'", size)
        servers = _servers(raw, teams, key)
        create = bool(raw.get("create", False))
        per_team = bool(raw.get("perTeam", False))
        if per_team and not create:
            raise TrackingError(
                f"{key}.perTeam",
                "needs create: true (for existing servers per team use teamTrackingServerArns)",
            )
        if per_team and not teams:
            raise TrackingError(f"{key}.perTeam", "needs ftl:teams (one server per team)")
        if "serverSize" in raw and not create:
            raise TrackingError(f"{key}.serverSize", "only for servers the stacks create")
        return cls(
            servers=servers,
            create=create,
            per_team=per_team,
            default=bool(raw.get("default", True)),
            experiment=experiment,
            server_size=size,
        )

    def to_env(self) -> dict[str, str]:
        """``FTL_MLFLOW`` for the trigger (values may be CDK tokens); nothing when off."""
        if not self.servers:
            return {}
        body = {"servers": dict(self.servers), "default": self.default}
        body["experiment"] = self.experiment
        return {names.ENV_MLFLOW: json.dumps(body, sort_keys=True, separators=(",", ":"))}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TrackingConfig:
        raw = env.get(names.ENV_MLFLOW)
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ValueError(
                f"environment variable {names.ENV_MLFLOW} is not JSON: {exc}"
            ) from None
        servers = data.get("servers") if isinstance(data, dict) else None
        if (
            not isinstance(servers, dict)
            or not servers
            or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in servers.items())
        ):
            raise ValueError(f"environment variable {names.ENV_MLFLOW} needs a 'servers' object")
        if data.get("experiment", "team") not in EXPERIMENT_MODES:
            raise ValueError(f"environment variable {names.ENV_MLFLOW}: bad 'experiment'")
        return cls(
            servers=servers,
            default=bool(data.get("default", True)),
            experiment=data.get("experiment", "team"),
        )


def _servers(raw: Mapping[str, Any], teams: list[str] | None, key: str) -> dict[str, str]:
    """Exactly one of ``trackingServerArn``, ``trackingUri``, ``teamTrackingServerArns`` and
    ``create``."""
    given = [k for k in ("trackingServerArn", "trackingUri", "teamTrackingServerArns") if k in raw]
    if raw.get("create"):
        given.append("create")
    if len(given) != 1:
        raise TrackingError(
            key,
            "exactly one of trackingServerArn (an existing server or app), trackingUri (a "
            "plain http(s) MLflow server), teamTrackingServerArns (one per team) and create: true",
            raw,
        )
    if "trackingServerArn" in raw:
        return {SHARED: _arn(raw["trackingServerArn"], f"{key}.trackingServerArn")}
    if "trackingUri" in raw:
        uri = raw["trackingUri"]
        if not isinstance(uri, str) or len(uri) > MAX_URI or not URI_RE.fullmatch(uri):
            raise TrackingError(
                f"{key}.trackingUri",
                "an http:// or https:// URI of an MLflow server, at most 512 characters",
                uri,
            )
        return {SHARED: uri}
    if "teamTrackingServerArns" not in raw:
        return {}
    arns = raw["teamTrackingServerArns"]
    where = f"{key}.teamTrackingServerArns"
    if not teams:
        raise TrackingError(where, "needs ftl:teams (a server per team)")
    if not isinstance(arns, dict) or set(arns) != set(teams):
        raise TrackingError(
            where, f"an object with one ARN for each team ({', '.join(teams)})", arns
        )
    return {team: _arn(arn, f"{where}.{team}") for team, arn in arns.items()}


def _arn(value: Any, key: str) -> str:
    if not isinstance(value, str) or ARN_RE.fullmatch(value) is None:
        raise TrackingError(
            key,
            "an MLflow tracking server or app ARN "
            "(arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name> or "
            ":mlflow-app/<id>)",
            value,
        )
    return value


def experiment_name(config: TrackingConfig, platform: str, team: str | None, template: str) -> str:
    """``<platform>/<team>`` (a single-team platform: ``<platform>``), plus ``/<template>``
    when experiments are per team and template. At most 256 characters by construction
    (names of at most 20, 63 and 40 characters)."""
    parts = [platform, *([team] if team else [])]
    if config.experiment == "team-template":
        parts.append(template)
    return "/".join(parts)
