"""A job's experiment tracking (issue 27): whether it is tracked, and its environment.

A job is tracked (:func:`tracked`) when the platform has a server for its team, the template
does not turn tracking off, the caller does not turn it off, and the template is not
network-isolated. A tracked job's ``CreateTrainingJob`` gets :func:`tracking_environment`, for
each attempt (``jobmodel.render.render_attempt``; no ``MlflowConfig``: docs/DECISIONS.md, issue
27, says why). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contract import names
from ..contract.errors import ValidationError
from ..teams import Team
from ..templates.hyperparameters import json_type
from ..templates.spec import TemplateSpec
from .tracking import TrackingConfig, experiment_name

__all__ = [
    "AttemptTracking",
    "TRACKING_VARIABLES",
    "run_view",
    "submit_tracking",
    "tracked",
    "tracking_environment",
]


def tracked(
    requested: bool | None,
    *,
    template: str,
    template_tracking: bool | None,
    network_isolation: bool,
    config: TrackingConfig,
    team: str | None,
) -> bool:
    """Whether a job is tracked, or ``ValidationError`` on field ``tracking`` when the caller
    asks for tracking that cannot be: no server, a template that turns it off, or a
    network-isolated template (its container reaches no MLflow endpoint)."""
    if requested is not None and type(requested) is not bool:
        raise ValidationError("tracking", "tracking must be true or false")
    server = config.server_for(team)
    if requested:
        if server is None:
            raise ValidationError(
                "tracking",
                "tracking needs an MLflow tracking server and this platform has none "
                "(context ftl:mlflow); leave tracking out",
            )
        if network_isolation:
            raise ValidationError(
                "tracking",
                f"template {template} is network-isolated (network_isolation): its container "
                "cannot reach MLflow, so it cannot be tracked; leave tracking out",
            )
        if template_tracking is False:
            raise ValidationError(
                "tracking",
                f"template {template} turns tracking off (tracking: false); leave tracking out",
            )
        return True
    if requested is False or server is None or network_isolation:
        return False
    return config.default if template_tracking is None else template_tracking


def submit_tracking(
    payload: Mapping[str, Any], spec: TemplateSpec, config: TrackingConfig, team: Team | None
) -> bool | None:
    """A submit's ``tracking``: the caller's choice (None: the template's or the platform's
    default), refused where the job cannot be tracked (:func:`tracked`)."""
    value = payload.get("tracking")
    if value is not None and type(value) is not bool:
        raise ValidationError("tracking", f"tracking must be true or false, got {json_type(value)}")
    tracked(
        value,
        template=spec.name,
        template_tracking=spec.tracking,
        network_isolation=spec.network_isolation,
        config=config,
        team=team.name if team is not None else None,
    )
    return value


TRACKING_VARIABLES = names.TRACKING_VARIABLES  # every variable tracking_environment may set


def tracking_environment(
    config: TrackingConfig,
    *,
    platform: str,
    team: str | None,
    template: str,
    job_name: str,
    image: str,
    instance_type: str,
    attempt: int,
    estimate_usd: float | None,
    output_s3_uri: str,
) -> dict[str, str]:
    """The container environment of a tracked job (all values within SageMaker's 512)."""
    server = config.server_for(team)
    if server is None:
        raise ValueError(f"no MLflow server for team {team!r}")
    env = {
        names.ENV_MLFLOW_TRACKING_URI: server,
        names.ENV_MLFLOW_EXPERIMENT_NAME: experiment_name(config, platform, team, template),
        names.ENV_MLFLOW_RUN_NAME: job_name,
        names.ENV_TRACKING_TEMPLATE: template,
        names.ENV_TRACKING_IMAGE: image,
        names.ENV_TRACKING_INSTANCE_TYPE: instance_type,
        names.ENV_TRACKING_ATTEMPT: str(attempt),
        names.ENV_TRACKING_OUTPUT_S3_URI: output_s3_uri,
    }
    if estimate_usd is not None:
        env[names.ENV_TRACKING_COST_ESTIMATE] = f"{estimate_usd:.2f}"
    return env


def run_view(environment: Mapping[str, str]) -> dict[str, str] | None:
    """``describe``'s ``tracking``: the server, experiment and run a job logs to, read from
    its rendered environment; None when the job is not tracked."""
    server = environment.get(names.ENV_MLFLOW_TRACKING_URI)
    if not server:
        return None
    return {
        "mlflow_resource_arn": server,
        "experiment_name": environment.get(names.ENV_MLFLOW_EXPERIMENT_NAME, ""),
        "run_name": environment.get(names.ENV_MLFLOW_RUN_NAME, ""),
    }


@dataclass(frozen=True)
class AttemptTracking:
    """What a tracked job's environment needs beyond its request: the platform's MLflow
    servers and the job's estimate (a chain's worst case). Every attempt of a job logs to
    the job's one run; the attempt and the instance types it may get are its tags."""

    config: TrackingConfig
    estimate_usd: float | None = None

    def environment(
        self,
        requested: bool | None,
        template: TemplateSpec,
        *,
        platform: str,
        team: str | None,
        job_name: str,
        attempt: int,
        instance_types: Sequence[str],
        output_s3_uri: str,
    ) -> dict[str, str]:
        """The attempt's tracking environment (empty when the job is not tracked)."""
        track = tracked(
            requested,
            template=template.name,
            template_tracking=template.tracking,
            network_isolation=template.network_isolation,
            config=self.config,
            team=team,
        )
        if not track:
            return {}
        return tracking_environment(
            self.config,
            platform=platform,
            team=team,
            template=template.name,
            job_name=job_name,
            image=str(template.image_uri),
            instance_type=",".join(instance_types),
            attempt=attempt,
            estimate_usd=self.estimate_usd,
            output_s3_uri=output_s3_uri,
        )
