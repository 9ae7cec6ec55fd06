"""Template rule ``tracking`` (issue 27): what a template may say about experiment tracking.

The platform decides which jobs are tracked (``jobmodel.after_training.tracking_job``); a
template only turns tracking off, never on where its container cannot reach MLflow, and leaves
the tracking environment variables (``contract.names.TRACKING_VARIABLES``) to the platform.
"""

from __future__ import annotations

from ..contract.errors import TemplateError
from ..contract.names import TRACKING_VARIABLES
from .spec import TemplateSpec

__all__ = ["check_template"]


def check_template(spec: TemplateSpec, max_environment: int) -> None:
    """Template rule ``tracking``: ``tracking`` is true, false or null; a network-isolated
    template cannot turn it on; the template's environment leaves the tracking variables to
    the platform and room for them (SageMaker's ``max_environment``)."""
    if spec.tracking is not None and type(spec.tracking) is not bool:
        raise TemplateError(
            spec.name, "tracking", f"tracking must be true, false or null, got {spec.tracking!r}"
        )
    if spec.tracking and spec.network_isolation:
        raise TemplateError(
            spec.name,
            "tracking",
            "tracking: true needs network access to MLflow and the template sets "
            "network_isolation (set tracking to false or null)",
        )
    taken = sorted(set(spec.environment) & set(TRACKING_VARIABLES))
    if taken:
        raise TemplateError(
            spec.name, "tracking", f"environment sets {taken[0]}, which tracking sets"
        )
    if spec.tracking is not False and not spec.network_isolation:
        room = max_environment - len(TRACKING_VARIABLES)
        if len(spec.environment) > room:
            raise TemplateError(
                spec.name,
                "tracking",
                f"a tracked job adds {len(TRACKING_VARIABLES)} environment variables: the "
                f"template may set at most {room} (or set tracking: false)",
            )
