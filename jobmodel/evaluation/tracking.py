"""The evaluation job's MLflow environment (issue 36): its results go on the evaluated job's run.

Standard library only. The evaluation entrypoint (``training/ftl_eval/tracking.py``) logs the
metrics as ``eval/<name>`` on the run of the job it evaluates, found by the run's name in the
experiment, as a resumed training attempt finds its run. So an evaluation job gets exactly the
evaluated job's MLflow variables: the tracking server, the experiment and the run's name (the
evaluated job's name), read from that job's rendered request; an untracked job's evaluation
gets none and logs nothing. The renderer of the evaluation job's request adds
:func:`evaluation_tracking_environment` to its ``Environment``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..contract import names

__all__ = ["EVALUATION_TRACKING_VARIABLES", "evaluation_tracking_environment"]

# What an evaluation job carries of its evaluated job's tracking environment.
EVALUATION_TRACKING_VARIABLES = (
    names.ENV_MLFLOW_TRACKING_URI,
    names.ENV_MLFLOW_EXPERIMENT_NAME,
    names.ENV_MLFLOW_RUN_NAME,
)


def evaluation_tracking_environment(evaluated: Mapping[str, Any]) -> dict[str, str]:
    """The evaluation job's MLflow variables for ``evaluated`` (its job record, whose
    ``rendered`` request holds its ``Environment``; or that environment itself). Empty when
    the evaluated job was not tracked."""
    environment: Any = evaluated
    if "rendered" in evaluated or "job_name" in evaluated:
        rendered = evaluated.get("rendered")
        try:
            rendered = json.loads(rendered) if isinstance(rendered, str) else rendered
        except ValueError:
            rendered = None
        environment = (rendered or {}).get("Environment") if isinstance(rendered, Mapping) else {}
    if not isinstance(environment, Mapping) or not environment.get(names.ENV_MLFLOW_TRACKING_URI):
        return {}
    out = {k: str(environment[k]) for k in EVALUATION_TRACKING_VARIABLES if environment.get(k)}
    out.setdefault(names.ENV_MLFLOW_RUN_NAME, str(evaluated.get("job_name") or ""))
    return {k: v for k, v in out.items() if v}
